package deliveryapi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

func TestDeliveryParams(t *testing.T) {
	for _, c := range []struct {
		ns, sel string
		want    ledger.DeliveryBrowseParams
		err     string // substring of a BadRequest; "nomatch" for errNoMatch
	}{
		{ns: "shop", want: ledger.DeliveryBrowseParams{Namespace: "shop"}},
		{ns: "", want: ledger.DeliveryBrowseParams{}},
		{ns: "shop", sel: "spec.endpoint=billing", want: ledger.DeliveryBrowseParams{Namespace: "shop", EndpointID: "shop/billing"}},
		{ns: "", sel: "metadata.namespace=shop,spec.endpoint=billing", want: ledger.DeliveryBrowseParams{Namespace: "shop", EndpointID: "shop/billing"}},
		{ns: "shop", sel: "spec.event=evt_1", want: ledger.DeliveryBrowseParams{Namespace: "shop", EventID: "evt_1"}},
		{ns: "shop", sel: "spec.eventType==order.created", want: ledger.DeliveryBrowseParams{Namespace: "shop", EventType: "order.created"}},
		{ns: "shop", sel: "metadata.name=dlv_1", want: ledger.DeliveryBrowseParams{Namespace: "shop", ID: "dlv_1"}},
		{ns: "shop", sel: "metadata.namespace=shop", want: ledger.DeliveryBrowseParams{Namespace: "shop"}},
		{ns: "shop", sel: "status.resolution=Unresolved", want: ledger.DeliveryBrowseParams{Namespace: "shop", Resolution: ledger.ResolutionUnresolved}},
		{ns: "shop", sel: "metadata.namespace=other", err: "nomatch"},
		{ns: "", sel: "spec.endpoint=billing", err: "spec.endpoint needs a namespace"},
		{ns: "shop", sel: "status.state!=Exhausted", err: "only = and == are supported"},
		{ns: "shop", sel: "status.state=exhausted", err: "unknown value; use one of AwaitingAck, Cancelled, Delivered, Exhausted, InFlight, Scheduled"},
		{ns: "shop", sel: "status.resolution=Open", err: "unknown value"},
		{ns: "shop", sel: "spec.url=x", err: `"spec.url" is not supported for Delivery`},
		{ns: "shop", sel: "spec.event=a,spec.event=b", err: "given twice"},
	} {
		sel, err := fields.ParseSelector(c.sel)
		if err != nil {
			t.Fatal(err)
		}
		got, err := deliveryParams(c.ns, sel)
		switch {
		case c.err == "nomatch":
			if !errors.Is(err, errNoMatch) {
				t.Errorf("%s %q: %v, want no match", c.ns, c.sel, err)
			}
		case c.err != "":
			var se *selectorError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %q: %v, want a selector error containing %q", c.ns, c.sel, err, c.err)
			}
		case err != nil:
			t.Errorf("%s %q: %v", c.ns, c.sel, err)
		default:
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("%s %q: (-want +got)\n%s", c.ns, c.sel, d)
			}
		}
	}
}

// Every API state and resolution maps to one ledger value and back.
func TestStateNamesRoundTrip(t *testing.T) {
	for st, name := range apiStates {
		sel := fields.OneTermEqualSelector("status.state", name)
		p, err := deliveryParams("shop", sel)
		if err != nil || len(p.States) != 1 || p.States[0] != st {
			t.Errorf("status.state=%s: %+v, %v; want %s", name, p.States, err, st)
		}
	}
	for _, st := range []ledger.DeliveryState{ledger.StateScheduled, ledger.StateInFlight, ledger.StateAwaitingAck,
		ledger.StateDelivered, ledger.StateExhausted, ledger.StateCancelled} {
		if apiStates[st] == "" {
			t.Errorf("ledger state %s has no API name", st)
		}
	}
	for res, name := range apiResolutions {
		p, err := deliveryParams("shop", fields.OneTermEqualSelector("status.resolution", name))
		if err != nil || p.Resolution != res {
			t.Errorf("status.resolution=%s: %v, %v", name, p.Resolution, err)
		}
	}
}

func TestEventParams(t *testing.T) {
	p, err := eventParams("shop", fields.ParseSelectorOrDie("spec.type=order.paid,metadata.name=evt_1"))
	if err != nil || p != (ledger.EventBrowseParams{Namespace: "shop", Type: "order.paid", ID: "evt_1"}) {
		t.Fatalf("%+v, %v", p, err)
	}
	if _, err := eventParams("shop", fields.ParseSelectorOrDie("spec.data=x")); err == nil || !strings.Contains(err.Error(), "spec.type") {
		t.Fatalf("unknown field: %v", err)
	}
}

func TestRefuseLabels(t *testing.T) {
	if err := refuseLabels(labels.Everything(), DeliveriesResource); err != nil {
		t.Fatal(err)
	}
	err := refuseLabels(labels.SelectorFromSet(labels.Set{"app": "x"}), DeliveriesResource)
	if err == nil || !strings.Contains(err.Error(), "label selectors are not supported on deliveries") || !strings.Contains(err.Error(), "status.state") {
		t.Fatalf("%v", err)
	}
}

func TestContinueToken(t *testing.T) {
	after, err := decodeContinue(encodeContinue("dlv_abc"))
	if err != nil || after != "dlv_abc" {
		t.Fatalf("round trip: %q, %v", after, err)
	}
	for _, bad := range []string{"x", "e30", encodeContinue("")} {
		if _, err := decodeContinue(bad); err == nil {
			t.Errorf("token %q accepted", bad)
		}
	}
}

func TestPageSize(t *testing.T) {
	for _, c := range []struct {
		limit     int64
		size, ask int
	}{{0, DefaultPageSize, DefaultPageSize + 1}, {1, 1, 2}, {100, 100, 101}, {999, 999, 1000}, {1000, 999, 1000}, {5000, 999, 1000}} {
		size, ask := pageSize(c.limit)
		if size != c.size || ask != c.ask || ask > ledger.MaxListLimit {
			t.Errorf("pageSize(%d) = %d, %d; want %d, %d", c.limit, size, ask, c.size, c.ask)
		}
	}
	rows, cont := page([]string{"a", "b", "c"}, 2, func(s string) string { return s })
	if len(rows) != 2 || cont != encodeContinue("b") {
		t.Fatalf("page: %v %q", rows, cont)
	}
	if rows, cont := page([]string{"a", "b"}, 2, func(s string) string { return s }); len(rows) != 2 || cont != "" {
		t.Fatalf("last page: %v %q", rows, cont)
	}
}

// A delivery carries at most MaxAttemptsShown attempts, the newest, and
// counts the others.
func TestAttemptsBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, n := range []int{0, 1, v1alpha1.MaxAttemptsShown, v1alpha1.MaxAttemptsShown + 1, 300} {
		var as []ledger.Attempt
		for i := 1; i <= n; i++ {
			as = append(as, ledger.Attempt{Number: i, StartedAt: t0.Add(time.Duration(i) * time.Second), StatusCode: 500})
		}
		d := toDelivery(ledger.DeliveryView{Delivery: ledger.Delivery{ID: "dlv_1", EndpointID: "shop/billing", Attempts: n}, Namespace: "shop"}, as)
		shown := min(n, v1alpha1.MaxAttemptsShown)
		if len(d.Status.Attempts) != shown || int(d.Status.AttemptsOmitted) != n-shown {
			t.Fatalf("%d attempts: shown %d, omitted %d", n, len(d.Status.Attempts), d.Status.AttemptsOmitted)
		}
		if shown > 0 && int(d.Status.Attempts[shown-1].Number) != n {
			t.Fatalf("%d attempts: the newest is not shown", n)
		}
	}
}

// Every ledger field that the API shows lands in the object; the event's
// data only with permission.
func TestConvert(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	v := ledger.DeliveryView{
		Delivery: ledger.Delivery{ID: "dlv_1", EventID: "evt_1", EndpointID: "shop/billing", State: ledger.StateExhausted,
			Attempts: 3, DueAt: t0, FirstAttemptAt: &t0, AckDeadline: &t1, LastStatus: 503, LastError: "boom",
			ExhaustReason: ledger.ExhaustMaxAttempts, Resolution: ledger.ResolutionReissued, TerminalAt: &t1,
			RetryOf: "dlv_0", ResolvedBy: "op", CreatedAt: t0},
		Namespace: "shop", EventType: "order.paid", ReplacedByDelivery: "dlv_2", ReplacedByEvent: "evt_2",
	}
	d := toDelivery(v, nil)
	want := v1alpha1.DeliveryStatus{State: "Exhausted", AttemptCount: 3, FirstAttemptAt: metaTime(&t0), AckDeadline: metaTime(&t1),
		FinishedAt: metaTime(&t1), LastStatus: 503, LastError: "boom", Reason: "MaxAttempts", Resolution: "Reissued",
		ResolvedBy: "op", ReplacedBy: &v1alpha1.Replacement{Delivery: "dlv_2", Event: "evt_2"}}
	if diff := cmp.Diff(want, d.Status); diff != "" {
		t.Fatalf("status (-want +got)\n%s", diff)
	}
	if d.Spec != (v1alpha1.DeliverySpec{Endpoint: "billing", Event: "evt_1", EventType: "order.paid", RetryOf: "dlv_0"}) ||
		d.Name != "dlv_1" || d.Namespace != "shop" || !d.CreationTimestamp.Time.Equal(t0) {
		t.Fatalf("spec/meta: %+v %+v", d.Spec, d.ObjectMeta)
	}

	e := ledger.Event{ID: "evt_1", Namespace: "shop", Type: "t", Data: []byte(`{"a":1}`), Secrets: sensitive.Bytes("s3cr3t"),
		SecretNames: []string{"token"}, SecretsScrubAt: &t1, ReissueOf: "evt_0", IdempotencyKey: "k", CreatedAt: t0}
	shown, hidden := toEvent(e, true), toEvent(e, false)
	if shown.Spec.Data == nil || string(shown.Spec.Data.Raw) != `{"a":1}` || shown.Status.DataHidden {
		t.Fatalf("shown: %+v", shown)
	}
	if hidden.Spec.Data != nil || !hidden.Status.DataHidden {
		t.Fatalf("hidden: %+v", hidden)
	}
	for _, ev := range []v1alpha1.WebhookEvent{shown, hidden} {
		b, err := json.Marshal(ev)
		if err != nil || strings.Contains(string(b), "s3cr3t") {
			t.Fatalf("secret in %s (%v)", b, err)
		}
	}
}
