package deliveryapi

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/httpapi"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// The permission a create checks is the HTTP API's.
func TestPublishPermissionIsTheHTTPAPIs(t *testing.T) {
	if PublishGroup != httpapi.PublishGroup || PublishResource != httpapi.ResourceEvents {
		t.Errorf("create checks %s.%s, the HTTP API checks %s.%s", PublishResource, PublishGroup, httpapi.ResourceEvents, httpapi.PublishGroup)
	}
}

// fixedOutcome is the engine's side of a real publish core: it answers res
// and err, so that each refusal below is the core's own.
type fixedOutcome struct {
	res ledger.EventInsertResult
	err error
}

func (f fixedOutcome) Publish(context.Context, *ledger.EventInsertParams) (ledger.EventInsertResult, error) {
	return f.res, f.err
}

func newCore(t *testing.T, f fixedOutcome) *publish.Core {
	t.Helper()
	c, err := publish.New(publish.Config{Committer: f, RetryAfter: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPublishErrors: every refusal of the publish core becomes the
// Kubernetes status a create answers, naming the field under spec.
func TestPublishErrors(t *testing.T) {
	ok := newCore(t, fixedOutcome{})
	conflict := newCore(t, fixedOutcome{res: ledger.EventInsertResult{Err: ledger.ErrIdempotencyConflict}})
	unknown := newCore(t, fixedOutcome{res: ledger.EventInsertResult{
		Err: &ledger.TargetError{Namespace: "shop", Endpoint: "shop/nobody"}}})
	fanOut := newCore(t, fixedOutcome{res: ledger.EventInsertResult{
		Err: &ledger.FanOutError{Namespace: "shop", Type: "a", Matches: 3, Max: 2}}})
	down := newCore(t, fixedOutcome{err: fmt.Errorf("insert: %w", ledger.ErrUnavailable)})
	spec := func(typ, data string) v1alpha1.WebhookEventSpec {
		return v1alpha1.WebhookEventSpec{Type: typ, Data: &runtime.RawExtension{Raw: []byte(data)}}
	}
	with := func(s v1alpha1.WebhookEventSpec, f func(*v1alpha1.WebhookEventSpec)) v1alpha1.WebhookEventSpec {
		f(&s)
		return s
	}
	big := `{"x":"` + strings.Repeat("x", publish.DefaultMaxBytes) + `"}`
	for _, c := range []struct {
		name   string
		core   *publish.Core
		ns     string
		spec   v1alpha1.WebhookEventSpec
		status int32
		field  string
	}{
		{"bad type", ok, "shop", spec("a..b", `{}`), http.StatusUnprocessableEntity, "spec.type"},
		{"data not an object", ok, "shop", spec("a", `"x"`), http.StatusUnprocessableEntity, "spec.data"},
		{"data missing", ok, "shop", v1alpha1.WebhookEventSpec{Type: "a"}, http.StatusUnprocessableEntity, "spec.data"},
		{"duplicate key in data", ok, "shop", spec("a", `{"k":1,"k":2}`), http.StatusUnprocessableEntity, "spec.data.k"},
		{"reissueOf not an event", ok, "shop", with(spec("a", `{}`), func(s *v1alpha1.WebhookEventSpec) { s.ReissueOf = "x" }), http.StatusUnprocessableEntity, "spec.reissueOf"},
		{"endpoint not a name", ok, "shop", with(spec("a", `{}`), func(s *v1alpha1.WebhookEventSpec) { s.Endpoint = "A_B" }), http.StatusUnprocessableEntity, "spec.endpoint"},
		{"bad key", ok, "shop", with(spec("a", `{}`), func(s *v1alpha1.WebhookEventSpec) { s.IdempotencyKey = "\x01" }), http.StatusUnprocessableEntity, "spec.idempotencyKey"},
		{"bad namespace", ok, "Shop", spec("a", `{}`), http.StatusUnprocessableEntity, "metadata.namespace"},
		{"unknown endpoint", unknown, "shop", with(spec("a", `{}`), func(s *v1alpha1.WebhookEventSpec) { s.Endpoint = "nobody" }), http.StatusUnprocessableEntity, "spec.endpoint"},
		{"fan-out limit", fanOut, "shop", spec("a", `{}`), http.StatusUnprocessableEntity, "spec.type"},
		{"key reused", conflict, "shop", with(spec("a", `{}`), func(s *v1alpha1.WebhookEventSpec) { s.IdempotencyKey = "k" }), http.StatusConflict, "spec.idempotencyKey"},
		{"too large", ok, "shop", spec("a", big), http.StatusRequestEntityTooLarge, ""},
		{"ledger unavailable", down, "shop", spec("a", `{}`), http.StatusServiceUnavailable, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := refusedStatus(t, c.core, c.ns, &c.spec)
			if st.Code != c.status {
				t.Errorf("status %d %s, want %d", st.Code, st.Message, c.status)
			}
			if c.status == http.StatusServiceUnavailable && (st.Details == nil || st.Details.RetryAfterSeconds != 2) {
				t.Errorf("details %+v, want a retry after 2 seconds (1.5 rounded up)", st.Details)
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

// refusedStatus is the status a create of spec in ns answers when core
// refuses it.
func refusedStatus(t *testing.T, core *publish.Core, ns string, spec *v1alpha1.WebhookEventSpec) metav1.Status {
	t.Helper()
	_, err := core.Publish(t.Context(), publishRequest(ns, spec))
	if err == nil {
		t.Fatal("accepted")
	}
	se, ok := publishError(err).(apierrors.APIStatus)
	if !ok {
		t.Fatalf("%T is not a status", publishError(err))
	}
	return se.Status()
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

// TestPublishRequest: the spec becomes the publish core's request, field
// for field, in the namespace of the create.
func TestPublishRequest(t *testing.T) {
	r := publishRequest("shop", &v1alpha1.WebhookEventSpec{Type: "a", Data: &runtime.RawExtension{Raw: []byte(`{"x": 1}`)},
		ReissueOf: "evt_1", Endpoint: "billing", IdempotencyKey: "k"})
	want := publish.Request{Namespace: "shop", IdempotencyKey: "k", Type: "a", Data: []byte(`{"x": 1}`), ReissueOf: "evt_1", Endpoint: "billing"}
	if !reflect.DeepEqual(*r, want) {
		t.Errorf("request %+v, want %+v", *r, want)
	}
	if r := publishRequest("shop", &v1alpha1.WebhookEventSpec{Type: "a"}); r.Data != nil {
		t.Errorf("without data: %s (the core then says data is required)", r.Data)
	}
}
