package deliveryapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// TestLedgerOutageIsServiceUnavailable creates webhookevents into a real
// PostgreSQL, cuts it off (connections reset, new ones refused) and
// creates again: the answer is ServiceUnavailable (503) with a
// retry-after, never an internal error, and the outage is counted.
func TestLedgerOutageIsServiceUnavailable(t *testing.T) {
	store, outage := pgtest.OpenOutageStore(t)
	metrics := publish.NewMetrics(prometheus.NewRegistry())
	core, err := publish.New(publish.Config{Committer: pgtest.Committer{Store: store}, Door: publish.DoorKube, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	s := &creatableEvents{eventStorage: newEventStorage(store, authorizerfactory.NewAlwaysAllowAuthorizer(), time.Now), publisher: core}
	ctx := genericapirequest.WithUser(genericapirequest.WithNamespace(t.Context(), "shop"), &user.DefaultInfo{Name: "producer"})
	create := func() error {
		ev := &v1alpha1.WebhookEvent{Spec: v1alpha1.WebhookEventSpec{Type: "order.created", IdempotencyKey: "outage-1",
			Data: &runtime.RawExtension{Raw: []byte(`{"n": 1}`)}}}
		_, err := s.Create(ctx, ev, nil, &metav1.CreateOptions{})
		return err
	}

	if err := create(); err != nil {
		t.Fatalf("before the outage: %v", err)
	}
	outage.Cut()
	for range 2 { // an idle connection reset, then a connect refused
		err := create()
		se, ok := err.(apierrors.APIStatus)
		if !ok || !apierrors.IsServiceUnavailable(err) {
			t.Fatalf("during the outage: %v, want ServiceUnavailable", err)
		}
		st := se.Status()
		if st.Code != http.StatusServiceUnavailable || st.Details == nil || st.Details.RetryAfterSeconds != 1 {
			t.Errorf("status %d, details %+v: want 503 with a retry after 1 second", st.Code, st.Details)
		}
	}
	if got := metrics.LedgerUnavailable(publish.DoorKube); got != 2 {
		t.Errorf("hookkeeper_api_ledger_unavailable_total{door=kube} = %v, want 2", got)
	}
	if got := metrics.LedgerUnavailable(publish.DoorHTTP); got != 0 {
		t.Errorf("hookkeeper_api_ledger_unavailable_total{door=http} = %v, want 0", got)
	}
}
