package ledgertest

import (
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func exerciseReads(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"UnknownIsNotFound": func(t *testing.T, f *fixture) {
			_, err := f.s.EventGet(f.ctx, "evt_unknown")
			wantErr(t, "EventGet", err, ledger.ErrNotFound)
			_, err = f.s.DeliveryGet(f.ctx, "dlv_unknown")
			wantErr(t, "DeliveryGet", err, ledger.ErrNotFound)
			_, err = f.s.AttemptList(f.ctx, "dlv_unknown")
			wantErr(t, "AttemptList", err, ledger.ErrNotFound)
			if got := f.list(ledger.DeliveryBrowseParams{EndpointID: "shop/unknown"}); len(got) != 0 {
				t.Fatalf("DeliveryBrowse of an unknown endpoint: %v", idsOf(got))
			}
		},
		"AttemptListOfNewDeliveryIsEmpty": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			id := f.publish("shop", "order.created", t0).Deliveries[0].ID
			got, err := f.s.AttemptList(f.ctx, id)
			if err != nil || len(got) != 0 {
				t.Fatalf("AttemptList = %v, %v; want none", got, err)
			}
		},
		"DeliveryBrowseFilters": testDeliveryListFilters,
		"DeliveryBrowsePages": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			f.upsert(endpoint("shop", "two", "*"), t0)
			for i := range 7 {
				f.publish("shop", "order.created", at(time.Duration(i)*time.Millisecond))
			}
			all := f.list(ledger.DeliveryBrowseParams{})
			if len(all) != 14 {
				t.Fatalf("DeliveryBrowse: %d deliveries, want 14", len(all))
			}
			wantEqual(t, "DeliveryBrowse is ordered by ID", idsOf(all), idsOf(byID(all)))
			var paged []ledger.Delivery
			after := ""
			for range 20 {
				page := f.list(ledger.DeliveryBrowseParams{AfterID: after, Limit: 3})
				if len(page) > 3 {
					t.Fatalf("page of %d deliveries with Limit 3", len(page))
				}
				if len(page) == 0 {
					break
				}
				paged = append(paged, page...)
				after = page[len(page)-1].ID
			}
			wantEqual(t, "pages", paged, all)
			mine := f.list(ledger.DeliveryBrowseParams{EndpointID: "shop/two", AfterID: all[6].ID})
			for _, d := range mine {
				if d.EndpointID != "shop/two" || d.ID <= all[6].ID {
					t.Fatalf("DeliveryBrowse by endpoint after %s returned %+v", all[6].ID, d)
				}
			}
		},
		"DeliveryBrowseLimits": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			var batch []*ledger.EventInsertParams
			for i := range ledger.MaxListLimit + 5 {
				batch = append(batch, event("shop", "order.created", at(time.Duration(i)*time.Microsecond)))
			}
			f.insert(batch...)
			if got := f.list(ledger.DeliveryBrowseParams{}); len(got) != 100 {
				t.Fatalf("DeliveryBrowse without Limit: %d deliveries, want 100", len(got))
			}
			if got := f.list(ledger.DeliveryBrowseParams{Limit: 5}); len(got) != 5 {
				t.Fatalf("DeliveryBrowse with Limit 5: %d deliveries", len(got))
			}
			if got := f.list(ledger.DeliveryBrowseParams{Limit: 5000}); len(got) != 1000 {
				t.Fatalf("DeliveryBrowse with Limit 5000: %d deliveries, want the cap of 1000", len(got))
			}
		},
	})
}

// testDeliveryListFilters checks each filter of DeliveryBrowse alone and
// combined.
func testDeliveryListFilters(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "a", "*"), t0)
	f.upsert(endpoint("shop", "b", "*"), t0)
	ev1 := f.publish("shop", "order.created", t0)
	ev2 := f.publish("shop", "order.created", at(time.Millisecond))
	a1, b1 := deliveryTo(t, ev1, "shop/a"), deliveryTo(t, ev1, "shop/b")
	a2, b2 := deliveryTo(t, ev2, "shop/a"), deliveryTo(t, ev2, "shop/b")
	// a1 delivered, b1 exhausted, a2 in flight, b2 scheduled.
	f.claim("w", t0, time.Hour, 10)
	f.mustRecord(attempt(a1, "w", t0, 200, ledger.Next{State: ledger.StateDelivered}))
	f.mustRecord(attempt(b1, "w", t0, 400, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable}))
	f.claim("w", at(time.Millisecond), time.Hour, 1, "shop/b")

	sorted := func(ids ...string) []string { return idsOf(byID(deliveriesOf(f, ids))) }
	for _, tc := range []struct {
		name string
		p    ledger.DeliveryBrowseParams
		want []string
	}{
		{"all", ledger.DeliveryBrowseParams{}, sorted(a1, b1, a2, b2)},
		{"endpoint", ledger.DeliveryBrowseParams{EndpointID: "shop/a"}, sorted(a1, a2)},
		{"event", ledger.DeliveryBrowseParams{EventID: ev2.Event.ID}, sorted(a2, b2)},
		{"one state", ledger.DeliveryBrowseParams{States: []ledger.DeliveryState{ledger.StateInFlight}}, sorted(a2)},
		{"states", ledger.DeliveryBrowseParams{States: []ledger.DeliveryState{ledger.StateScheduled, ledger.StateDelivered}}, sorted(a1, b2)},
		{"resolution", ledger.DeliveryBrowseParams{Resolution: ledger.ResolutionUnresolved}, sorted(b1)},
		{"endpoint and state", ledger.DeliveryBrowseParams{EndpointID: "shop/b", States: []ledger.DeliveryState{ledger.StateScheduled}}, sorted(b2)},
		{"event and endpoint", ledger.DeliveryBrowseParams{EndpointID: "shop/b", EventID: ev1.Event.ID}, sorted(b1)},
		{"no match", ledger.DeliveryBrowseParams{EndpointID: "shop/a", Resolution: ledger.ResolutionUnresolved}, nil},
	} {
		wantEqual(t, "DeliveryBrowse "+tc.name, idsOf(f.list(tc.p)), tc.want)
	}
}

// deliveriesOf reads deliveries by ID.
func deliveriesOf(f *fixture, ids []string) []ledger.Delivery {
	out := make([]ledger.Delivery, 0, len(ids))
	for _, id := range ids {
		out = append(out, f.delivery(id))
	}
	return out
}
