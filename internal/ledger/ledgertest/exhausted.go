package ledgertest

import (
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The ExhaustedList part of the Recovery suite: selectors, order, paging.

// exhausted lists unresolved exhausted deliveries.
func (f *fixture) exhausted(p ledger.ExhaustedListParams) []ledger.ExhaustedDelivery {
	f.t.Helper()
	got, err := f.s.ExhaustedList(f.ctx, &p)
	if err != nil {
		f.t.Fatalf("ExhaustedList(%+v): %v", p, err)
	}
	return got
}

// exhaustedIDs returns the delivery IDs in order.
func exhaustedIDs(es []ledger.ExhaustedDelivery) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Delivery.ID)
	}
	return out
}

// testExhaustedListFilters checks every selector criterion, the order, the
// limit and the fields of ExhaustedList.
func testExhaustedListFilters(t *testing.T, f *fixture) {
	const ep = "shop/orders"
	f.upsert(endpoint("shop", "orders", "*"), t0)
	f.upsert(endpoint("shop", "other", "*"), t0)
	var (
		evs  []string
		mine []ledger.Delivery // the deliveries to ep, in exhaustion order
		them []ledger.Delivery
	)
	for i, typ := range []string{"order.created", "order.paid", "invoice.sent", "order.created"} {
		now := at(time.Duration(i+1) * time.Second)
		res := f.publish("shop", typ, now)
		evs = append(evs, res.Event.ID)
		for _, d := range f.exhaustAll(now) {
			if d.EndpointID == ep {
				mine = append(mine, d)
			} else {
				them = append(them, d)
			}
		}
	}
	// Resolved and live deliveries are not listed.
	f.apply("op", mine[3].ID, ledger.RecoveryDismiss, at(5*time.Second))
	f.publish("shop", "order.created", at(6*time.Second))
	f.attemptAll(at(6*time.Second), ledger.Next{State: ledger.StateScheduled, DueAt: at(time.Hour)})

	all := f.exhausted(ledger.ExhaustedListParams{EndpointID: ep})
	var want []ledger.ExhaustedDelivery
	for i, typ := range []string{"order.created", "order.paid", "invoice.sent"} {
		want = append(want, ledger.ExhaustedDelivery{
			Delivery: f.delivery(mine[i].ID), EventType: typ, ReplayFrom: *mine[i].FirstAttemptAt,
		})
	}
	wantEqual(t, "ExhaustedList of the endpoint", all, want)
	d1, d2, d3 := mine[0].ID, mine[1].ID, mine[2].ID

	for _, tc := range []struct {
		name string
		p    ledger.ExhaustedListParams
		want []string
	}{
		{"types by prefix", ledger.ExhaustedListParams{EventTypes: []string{"order.*"}}, []string{d1, d2}},
		{"exact type", ledger.ExhaustedListParams{EventTypes: []string{"invoice.sent"}}, []string{d3}},
		{"any of the types", ledger.ExhaustedListParams{EventTypes: []string{"order.created", "invoice.*"}}, []string{d1, d3}},
		{"every type", ledger.ExhaustedListParams{EventTypes: []string{"*"}}, []string{d1, d2, d3}},
		{"no type matches", ledger.ExhaustedListParams{EventTypes: []string{"order"}}, nil},
		{"delivery IDs of this endpoint only", ledger.ExhaustedListParams{DeliveryIDs: []string{d3, them[0].ID, d1, mine[3].ID}}, []string{d1, d3}},
		{"event IDs", ledger.ExhaustedListParams{EventIDs: []string{evs[1], evs[3]}}, []string{d2}},
		{"exhausted after (inclusive)", ledger.ExhaustedListParams{ExhaustedAfter: at(2 * time.Second)}, []string{d2, d3}},
		{"exhausted before (exclusive)", ledger.ExhaustedListParams{ExhaustedBefore: at(2 * time.Second)}, []string{d1}},
		{"window", ledger.ExhaustedListParams{ExhaustedAfter: at(2 * time.Second), ExhaustedBefore: at(3 * time.Second)}, []string{d2}},
		{"limit keeps the oldest", ledger.ExhaustedListParams{Limit: 2}, []string{d1, d2}},
		{"criteria are ANDed", ledger.ExhaustedListParams{DeliveryIDs: []string{d1, d2, d3}, EventTypes: []string{"order.*"}, ExhaustedAfter: at(2 * time.Second)}, []string{d2}},
	} {
		tc.p.EndpointID = ep
		wantEqual(t, tc.name, exhaustedIDs(f.exhausted(tc.p)), tc.want)
	}
	if got := f.exhausted(ledger.ExhaustedListParams{EndpointID: "shop/unknown"}); len(got) != 0 {
		t.Fatalf("ExhaustedList of an unknown endpoint: %v", exhaustedIDs(got))
	}

	// ReplayFrom is the event's earliest first attempt, on any endpoint.
	res := f.publish("shop", "order.created", at(10*time.Second))
	f.claim("w", at(10*time.Second), time.Minute, 10)
	early := attempt(deliveryTo(t, res, "shop/other"), "w", at(11*time.Second), 503, ledger.Next{State: ledger.StateScheduled, DueAt: at(time.Hour)})
	f.mustRecord(early)
	f.mustRecord(attempt(deliveryTo(t, res, ep), "w", at(20*time.Second), 503, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustMaxAge}))
	got := f.exhausted(ledger.ExhaustedListParams{EndpointID: ep, EventIDs: []string{res.Event.ID}})
	if len(got) != 1 || !got[0].ReplayFrom.Equal(early.Attempt.StartedAt) {
		t.Fatalf("ExhaustedList of an event first attempted at %v elsewhere: %+v", early.Attempt.StartedAt, got)
	}
}

// testExhaustedListPages filters by type past more non-matching deliveries
// than a page holds.
func testExhaustedListPages(t *testing.T, f *fixture) {
	const ep = "shop/all"
	f.upsert(endpoint("shop", "all", "*"), t0)
	var many []*ledger.EventInsertParams
	for range 300 {
		many = append(many, event("shop", "a", t0))
	}
	f.insert(many...)
	f.exhaustAll(at(time.Second))
	f.insert(event("shop", "b", t0), event("shop", "b", t0), event("shop", "b", t0))
	bs := idsOf(byID(f.exhaustAll(at(2 * time.Second))))

	wantEqual(t, "the two oldest of type b", exhaustedIDs(f.exhausted(ledger.ExhaustedListParams{EndpointID: ep, EventTypes: []string{"b"}, Limit: 2})), bs[:2])
	wantEqual(t, "every one of type b", exhaustedIDs(f.exhausted(ledger.ExhaustedListParams{EndpointID: ep, EventTypes: []string{"b"}})), bs)
	if n := len(f.exhausted(ledger.ExhaustedListParams{EndpointID: ep})); n != ledger.DefaultExhaustedLimit {
		t.Fatalf("ExhaustedList without a limit returned %d, want %d", n, ledger.DefaultExhaustedLimit)
	}
	if n := len(f.exhausted(ledger.ExhaustedListParams{EndpointID: ep, Limit: ledger.MaxExhaustedLimit + 1})); n != 303 {
		t.Fatalf("ExhaustedList with a large limit returned %d, want all 303", n)
	}
}
