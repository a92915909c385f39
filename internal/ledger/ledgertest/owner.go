package ledgertest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// exerciseOwner checks that an endpoint's Owner reaches everything that
// reads about its work: the endpoint itself, EndpointOwners, the delivery
// API's rows and the dead letters of its exhausted deliveries, and that a
// changed owner replaces the old one everywhere except in what was already
// written (a dead letter names the owner at exhaustion).
func exerciseOwner(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"RoundTripAndChange": func(t *testing.T, f *fixture) {
			ep := endpoint("shop", "orders", "*")
			ep.Owner = "team-payments"
			f.upsert(ep, t0)
			f.upsert(endpoint("shop", "audit", "*"), t0) // no owner
			f.wantOwner(ep.ID, "team-payments")
			f.wantOwners([]string{"shop/orders", "shop/audit", "shop/none"}, map[string]string{"shop/orders": "team-payments"})

			for i, owner := range []string{"payments@example.com", "", "team-billing"} {
				ep.Owner = owner
				if got := f.upsert(ep, at(time.Duration(i+1)*time.Second)); got.Owner != owner {
					t.Fatalf("EndpointUpsert result owner = %q, want %q", got.Owner, owner)
				}
				f.wantOwner(ep.ID, owner)
				want := map[string]string{}
				if owner != "" {
					want[ep.ID] = owner
				}
				f.wantOwners([]string{ep.ID}, want)
			}

			// A deleted endpoint's history still names its owner.
			if _, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: ep.ID, Now: at(time.Minute)}); err != nil {
				t.Fatalf("EndpointDelete: %v", err)
			}
			f.wantOwners([]string{ep.ID}, map[string]string{ep.ID: "team-billing"})
			f.wantOwners(nil, map[string]string{})
		},
		"BrowseShowsTheCurrentOwner": func(t *testing.T, f *fixture) {
			ep := endpoint("shop", "orders", "order.*")
			ep.Owner = "team-payments"
			f.upsert(ep, t0)
			f.upsert(endpoint("shop", "audit", "order.*"), t0)
			ev := f.publish("shop", "order.created", t0)
			owners := func() map[string]string {
				got := map[string]string{}
				for _, v := range f.browse(ledger.DeliveryBrowseParams{EventID: ev.Event.ID}) {
					got[v.EndpointID] = v.EndpointOwner
				}
				return got
			}
			wantEqual(t, "owners of the browsed deliveries", owners(), map[string]string{"shop/orders": "team-payments", "shop/audit": ""})
			ep.Owner = "team-billing"
			f.upsert(ep, at(time.Second))
			wantEqual(t, "owners after the owner changed", owners(), map[string]string{"shop/orders": "team-billing", "shop/audit": ""})
		},
		"DeadLetterNamesTheOwnerAtExhaustion": func(t *testing.T, f *fixture) {
			src := endpoint("shop", "orders", "order.*")
			src.DeadLetter, src.Owner = "shop/dlq", "team-payments"
			f.upsert(src, t0)
			dlq := endpoint("shop", "dlq", "nothing")
			dlq.Paused = true // its dead letters wait, so that each claim takes the one new delivery
			f.upsert(dlq, t0)
			exhaust := func(now time.Time) ledger.DeadLetterData {
				t.Helper()
				id := f.publish("shop", "order.created", now).Deliveries[0].ID
				f.claimOne("w", now)
				res := f.record(attempt(id, "w", now, 500, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable}))
				if res.Err != nil || res.DeadLetter == nil {
					t.Fatalf("exhausting %s: err %v, dead letter %v", id, res.Err, res.DeadLetter)
				}
				var data ledger.DeadLetterData
				if err := json.Unmarshal(f.getEvent(res.DeadLetter.EventID).Data, &data); err != nil {
					t.Fatalf("dead-letter data: %v", err)
				}
				return data
			}
			first := exhaust(at(time.Second))
			if first.Owner != "team-payments" {
				t.Fatalf("dead letter owner = %q, want team-payments", first.Owner)
			}
			src.Owner = "team-billing"
			f.upsert(src, at(2*time.Second))
			if second := exhaust(at(3 * time.Second)); second.Owner != "team-billing" {
				t.Fatalf("dead letter owner after the change = %q, want team-billing", second.Owner)
			}
			// The first dead letter is history: it keeps the owner it named.
			var again ledger.DeadLetterData
			dl := f.list(ledger.DeliveryBrowseParams{EndpointID: "shop/dlq"})
			if len(dl) != 2 {
				t.Fatalf("dead-letter deliveries = %d, want 2", len(dl))
			}
			if err := json.Unmarshal(f.getEvent(dl[0].EventID).Data, &again); err != nil || again.Owner != "team-payments" {
				t.Fatalf("first dead letter after the change: owner %q, %v", again.Owner, err)
			}
			// Without an owner the field is left out.
			src.Owner = ""
			f.upsert(src, at(4*time.Second))
			if third := exhaust(at(5 * time.Second)); third.Owner != "" {
				t.Fatalf("dead letter owner without one = %q", third.Owner)
			}
		},
	})
}

// wantOwner checks the Owner of EndpointGet and of the endpoint's row in
// EndpointList.
func (f *fixture) wantOwner(id, owner string) {
	f.t.Helper()
	got, err := f.s.EndpointGet(f.ctx, id)
	if err != nil {
		f.t.Fatalf("EndpointGet %s: %v", id, err)
	}
	if got.Owner != owner {
		f.t.Fatalf("EndpointGet %s owner = %q, want %q", id, got.Owner, owner)
	}
	list, err := f.s.EndpointList(f.ctx)
	if err != nil {
		f.t.Fatalf("EndpointList: %v", err)
	}
	for _, ep := range list {
		if ep.ID == id && ep.Owner != owner {
			f.t.Fatalf("EndpointList %s owner = %q, want %q", id, ep.Owner, owner)
		}
	}
}

func (f *fixture) wantOwners(ids []string, want map[string]string) {
	f.t.Helper()
	got, err := f.s.EndpointOwners(f.ctx, ids)
	if err != nil {
		f.t.Fatalf("EndpointOwners(%v): %v", ids, err)
	}
	wantEqual(f.t, "EndpointOwners", got, want)
}
