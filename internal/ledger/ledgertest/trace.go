package ledgertest

import (
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// An event's trace context (issue #46): stored once, with the event, and
// read back wherever the event is read (the insert's answer, EventGet, a
// claim, a publish's hand-off, Browse, a delivery's browse), each event of
// a batch with its own;
// an event published without one reads back without one.
func exerciseTrace(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"StoredOnceReadEverywhere": testTraceStored,
		"ReissueCopyContinuesIt":   testTraceReissueCopy,
	})
}

func testTraceStored(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "orders", "order.*"), t0)
	traced := func(n int, now time.Time) *ledger.EventInsertParams {
		p := event("shop", "order.created", now)
		p.Trace = ledger.TraceContext{
			Parent: "00-4bf92f3577b34da6a3ce929d0e0e473" + string(rune('0'+n)) + "-00f067aa0ba902b7-01",
			State:  "vendor=n" + string(rune('0'+n)),
		}
		return p
	}
	first, second, plain := traced(1, t0), traced(2, at(time.Millisecond)), event("shop", "order.created", at(2*time.Millisecond))
	res := f.insert(first, second, plain)
	for i, p := range []*ledger.EventInsertParams{first, second, plain} {
		if res[i].Err != nil {
			t.Fatalf("insert %d: %v", i, res[i].Err)
		}
		wantEqual(t, "the inserted event's trace context", res[i].Event.Trace, p.Trace)
		got, err := f.s.EventGet(f.ctx, res[i].Event.ID)
		if err != nil {
			t.Fatalf("EventGet: %v", err)
		}
		wantEqual(t, "EventGet's trace context", got.Trace, p.Trace)
		views, err := f.s.EventBrowse(f.ctx, &ledger.EventBrowseParams{ID: res[i].Event.ID})
		if err != nil || len(views) != 1 {
			t.Fatalf("EventBrowse = %v, %v", views, err)
		}
		wantEqual(t, "the browsed event's trace context", views[0].Trace, p.Trace)
	}
	if !res[2].Event.Trace.IsZero() {
		t.Fatalf("an event published without a trace context reads back %+v", res[2].Event.Trace)
	}

	byEvent := map[string]ledger.TraceContext{}
	for _, c := range f.claim("w", at(time.Second), time.Minute, 10) {
		byEvent[c.Event.ID] = c.Event.Trace
	}
	for i, p := range []*ledger.EventInsertParams{first, second, plain} {
		wantEqual(t, "the claimed event's trace context", byEvent[res[i].Event.ID], p.Trace)
	}

	handed := traced(3, at(2*time.Second))
	handed.LeaseTo = &ledger.Lease{Owner: "w", Until: at(time.Minute)}
	h := f.insert(handed)[0]
	if h.Err != nil || len(h.Leased) != 1 {
		t.Fatalf("a handed-off publish: %v, %d leased; want 1", h.Err, len(h.Leased))
	}
	wantEqual(t, "the handed-off delivery's event trace context", h.Leased[0].Event.Trace, handed.Trace)

	for i, p := range []*ledger.EventInsertParams{first, second, plain} {
		views := f.browse(ledger.DeliveryBrowseParams{Namespace: "shop", EventID: res[i].Event.ID})
		if len(views) != 1 {
			t.Fatalf("DeliveryBrowse of event %d: %d deliveries; want 1", i, len(views))
		}
		wantEqual(t, "a browsed delivery's event trace context", views[0].EventTrace, p.Trace)
	}
}

// testTraceReissueCopy: a recovery's reissued copy of an event carries the
// original's trace context, so its attempts continue the original publish's
// trace.
func testTraceReissueCopy(t *testing.T, f *fixture) {
	const ep = "shop/orders"
	f.upsert(endpoint("shop", "orders", "order.*"), t0)
	p := event("shop", "order.created", t0)
	p.Trace = ledger.TraceContext{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", State: "vendor=1"}
	ev := f.insert(p)[0]
	if ev.Err != nil {
		t.Fatal(ev.Err)
	}
	f.exhaustAll(at(time.Second))
	orig := f.delivery(deliveryTo(t, ev, ep))
	rp := recoveryParams("op-t", orig.ID, ledger.RecoveryReissue, at(time.Minute))
	if it := f.applyP(rp); it.Outcome != ledger.OutcomeReissued {
		t.Fatalf("reissue: %+v", it)
	}
	cp, err := f.s.EventGet(f.ctx, rp.NewEventID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "the reissued copy's trace context", cp.Trace, p.Trace)
}
