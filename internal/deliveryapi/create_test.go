package deliveryapi

import (
	"context"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/httpapi"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The permission a create checks is the HTTP API's.
func TestPublishPermissionIsTheHTTPAPIs(t *testing.T) {
	if PublishGroup != httpapi.PublishGroup || PublishResource != httpapi.ResourceEvents {
		t.Errorf("create checks %s.%s, the HTTP API checks %s.%s", PublishResource, PublishGroup, httpapi.ResourceEvents, httpapi.PublishGroup)
	}
}

// fixedOutcome is the engine's side of a real Ingest: it answers res, so
// that each refusal below is the HTTP API's own.
type fixedOutcome struct{ res ledger.EventInsertResult }

func (f fixedOutcome) Publish(context.Context, *ledger.EventInsertParams) (ledger.EventInsertResult, error) {
	return f.res, nil
}

// TestPublishErrors: every refusal of the HTTP API's publish path becomes
// the Kubernetes status a create answers, naming the field under spec.
func TestPublishErrors(t *testing.T) {
	ok, err := httpapi.NewIngest(httpapi.IngestConfig{Publisher: fixedOutcome{}})
	if err != nil {
		t.Fatal(err)
	}
	conflict, _ := httpapi.NewIngest(httpapi.IngestConfig{Publisher: fixedOutcome{ledger.EventInsertResult{Err: ledger.ErrIdempotencyConflict}}})
	unknown, _ := httpapi.NewIngest(httpapi.IngestConfig{Publisher: fixedOutcome{ledger.EventInsertResult{
		Err: &ledger.TargetError{Namespace: "shop", Endpoint: "shop/nobody"}}}})
	fanOut, _ := httpapi.NewIngest(httpapi.IngestConfig{Publisher: fixedOutcome{ledger.EventInsertResult{
		Err: &ledger.FanOutError{Namespace: "shop", Type: "a", Matches: 3, Max: 2}}}})
	big := `{"type":"a","data":{"x":"` + strings.Repeat("x", httpapi.DefaultMaxBodyBytes) + `"}}`
	for _, c := range []struct {
		name   string
		in     *httpapi.Ingest
		ns     string
		key    string
		body   string
		status int32
		field  string
	}{
		{"bad type", ok, "shop", "", `{"type":"a..b","data":{}}`, http.StatusUnprocessableEntity, "spec.type"},
		{"data not an object", ok, "shop", "", `{"type":"a","data":"x"}`, http.StatusUnprocessableEntity, "spec.data"},
		{"duplicate key in data", ok, "shop", "", `{"type":"a","data":{"k":1,"k":2}}`, http.StatusUnprocessableEntity, "spec.data.k"},
		{"reissueOf not an event", ok, "shop", "", `{"type":"a","data":{},"reissueOf":"x"}`, http.StatusUnprocessableEntity, "spec.reissueOf"},
		{"endpoint not a name", ok, "shop", "", `{"type":"a","data":{},"endpoint":"A_B"}`, http.StatusUnprocessableEntity, "spec.endpoint"},
		{"bad key", ok, "shop", "\x01", `{"type":"a","data":{}}`, http.StatusUnprocessableEntity, "spec.idempotencyKey"},
		{"bad namespace", ok, "Shop", "", `{"type":"a","data":{}}`, http.StatusUnprocessableEntity, "metadata.namespace"},
		{"unknown endpoint", unknown, "shop", "", `{"type":"a","data":{},"endpoint":"nobody"}`, http.StatusUnprocessableEntity, "spec.endpoint"},
		{"fan-out limit", fanOut, "shop", "", `{"type":"a","data":{}}`, http.StatusUnprocessableEntity, "spec.type"},
		{"key reused", conflict, "shop", "k", `{"type":"a","data":{}}`, http.StatusConflict, "spec.idempotencyKey"},
		{"too large", ok, "shop", "", big, http.StatusRequestEntityTooLarge, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.in.Publish(t.Context(), c.ns, c.key, []byte(c.body))
			if err == nil {
				t.Fatal("accepted")
			}
			se, ok := publishError(err).(apierrors.APIStatus)
			if !ok {
				t.Fatalf("%T is not a status", publishError(err))
			}
			st := se.Status()
			if st.Code != c.status {
				t.Errorf("status %d %s, want %d", st.Code, st.Message, c.status)
			}
			if c.field == "" {
				return
			}
			if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != c.field {
				t.Errorf("causes %+v, want one on %s", st.Details, c.field)
			}
		})
	}
}

// TestCreateOnlyFields: what a create may not carry is refused by field.
func TestCreateOnlyFields(t *testing.T) {
	ev := &v1alpha1.WebhookEvent{
		ObjectMeta: metav1.ObjectMeta{Name: "evt_x", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"a": "b"}},
		Spec:       v1alpha1.WebhookEventSpec{Type: "a", Data: &runtime.RawExtension{Raw: []byte(`{}`)}, SecretNames: []string{"t"}},
	}
	var fields []string
	for _, e := range createOnlyFields(ev) {
		fields = append(fields, e.Field)
	}
	if got := strings.Join(fields, ","); got != "metadata.name,metadata.labels,metadata.annotations,spec.secretNames" {
		t.Errorf("refused %s", got)
	}
	if errs := createOnlyFields(&v1alpha1.WebhookEvent{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"}}); len(errs) != 0 {
		t.Errorf("a plain create refused: %v", errs)
	}
}

// TestPublishBody: the spec becomes the HTTP API's body, field for field.
func TestPublishBody(t *testing.T) {
	b, err := publishBody(&v1alpha1.WebhookEventSpec{Type: "a", Data: &runtime.RawExtension{Raw: []byte(`{"x": 1}`)},
		ReissueOf: "evt_1", Endpoint: "billing", IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != `{"data":{"x":1},"endpoint":"billing","reissueOf":"evt_1","type":"a"}` {
		t.Errorf("body %s", got)
	}
	if b, _ := publishBody(&v1alpha1.WebhookEventSpec{Type: "a"}); string(b) != `{"type":"a"}` {
		t.Errorf("without data: %s (the HTTP API then says data is required)", b)
	}
}
