package deliveryapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/deliveryapi"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
	"github.com/hookkeeper/hookkeeper/internal/publish"
	"github.com/hookkeeper/hookkeeper/test/testenv"
	"github.com/hookkeeper/hookkeeper/test/testenv/aggregated"
)

// TestLedgerOutageOverTheWire creates a webhookevent through the aggregated
// server (delegated authentication and authorization against the real
// kube-apiserver) into a real PostgreSQL, cuts the ledger off and creates
// again: the answer on the wire is 503 ServiceUnavailable with
// Retry-After, which client-go honours by retrying, and it is counted.
func TestLedgerOutageOverTheWire(t *testing.T) {
	cp := aggregated.Start(t, testenv.AggregatedOptions{})
	ctx := t.Context()
	if _, err := kubernetes.NewForConfigOrDie(cp.Config).CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	store, outage := pgtest.OpenOutageStore(t)
	metrics := publish.NewMetrics(prometheus.NewRegistry())
	core, err := publish.New(publish.Config{Committer: pgtest.Committer{Store: store}, Door: publish.DoorKube, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	aggregated.Serve(t, cp, deliveryapi.Config{Ledger: store, Publisher: core})

	// An admin's client certificate, verified by the server against the
	// client CA kube-apiserver publishes.
	admin, err := cp.Env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	client, err := cp.Client(admin.Config())
	if err != nil {
		t.Fatal(err)
	}
	url := cp.URL() + "/apis/" + v1alpha1.SchemeGroupVersion.String() + "/namespaces/shop/webhookevents"
	body := `{"apiVersion":"` + v1alpha1.SchemeGroupVersion.String() + `","kind":"WebhookEvent","spec":{"type":"order.created","idempotencyKey":"outage-1","data":{"n":1}}}`
	create := func() (*http.Response, metav1.Status, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return nil, metav1.Status{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return nil, metav1.Status{}, err
		}
		defer resp.Body.Close()
		var st metav1.Status
		_ = json.NewDecoder(resp.Body).Decode(&st)
		return resp, st, nil
	}

	// Ready: the server has read the control plane's client CA.
	NewWithT(t).Eventually(func(g Gomega) {
		resp, st, err := create()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(http.StatusCreated), "%+v", st)
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())

	// Over the namespace's quota (its one event's payload retained, more
	// than one byte): 429, the cause naming the limit.
	if _, err := store.QuotaSet(ctx, &ledger.QuotaSetParams{Namespace: "shop", Hard: ledger.QuotaHard{PayloadBytesRetained: 1}, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	body = strings.Replace(body, "outage-1", "quota-1", 1)
	resp, st, err := create()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusTooManyRequests || st.Reason != metav1.StatusReasonTooManyRequests {
		t.Fatalf("over quota: %d %+v, want 429 TooManyRequests", resp.StatusCode, st)
	}
	// A minute's wait is in the message, not in Retry-After: client-go
	// would sleep it and retry ten times.
	if got := resp.Header.Get("Retry-After"); got != "" {
		t.Errorf("Retry-After = %q, want none", got)
	}
	if !strings.Contains(st.Message, "retry after 60s") {
		t.Errorf("message %q, want the wait in it", st.Message)
	}
	if st.Details == nil || st.Details.RetryAfterSeconds != 0 || len(st.Details.Causes) != 1 ||
		st.Details.Causes[0].Type != deliveryapi.QuotaExceeded || st.Details.Causes[0].Field != "spec.hard.payloadBytesRetained" {
		t.Errorf("details %+v, want no retryAfterSeconds and a QuotaExceeded cause on spec.hard.payloadBytesRetained", st.Details)
	}
	if err := store.QuotaDelete(ctx, "shop"); err != nil {
		t.Fatal(err)
	}

	outage.Cut()
	resp, st, err = create()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || st.Reason != metav1.StatusReasonServiceUnavailable {
		t.Fatalf("during the outage: %d %+v, want 503 ServiceUnavailable", resp.StatusCode, st)
	}
	if got := resp.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
	if st.Details == nil || st.Details.RetryAfterSeconds != 1 {
		t.Errorf("details %+v, want retryAfterSeconds 1", st.Details)
	}
	if strings.Contains(st.Message, "127.0.0.1") {
		t.Errorf("message %q carries the cause", st.Message)
	}
	if got := metrics.LedgerUnavailable(publish.DoorKube); got != 1 {
		t.Errorf("hookkeeper_api_ledger_unavailable_total{door=kube} = %v, want 1", got)
	}
}
