package ledgertest

import (
	"slices"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

func exerciseClaim(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"DueOnlyEarliestFirst": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			f.upsert(endpoint("shop", "all", "*"), t0) // version 2
			var ids []string
			// Inserted out of due order.
			for _, d := range []time.Duration{2 * time.Second, 0, 3 * time.Second, time.Second} {
				ids = append(ids, f.publish("shop", "order.created", at(d)).Deliveries[0].ID)
			}
			if got := f.claim("w", at(-time.Second), time.Minute, 10); len(got) != 0 {
				t.Fatalf("claimed %v before anything was due", claimedIDs(got))
			}
			now := at(2 * time.Second)
			got := f.claim("w", now, 30*time.Second, 10)
			wantEqual(t, "claimed in due order", claimedIDs(got), []string{ids[1], ids[3], ids[0]})
			for _, c := range got {
				d := c.Delivery
				if d.State != ledger.StateInFlight || d.LeaseOwner != "w" || d.LeaseUntil == nil || !d.LeaseUntil.Equal(now.Add(30*time.Second)) {
					t.Fatalf("claimed delivery %s: state %s owner %q until %v", d.ID, d.State, d.LeaseOwner, d.LeaseUntil)
				}
				wantEqual(t, "DeliveryGet of a claimed delivery", f.delivery(d.ID), d)
				if c.EndpointVersion != 2 {
					t.Fatalf("EndpointVersion = %d, want 2", c.EndpointVersion)
				}
				ev, err := f.s.EventGet(f.ctx, d.EventID)
				if err != nil {
					t.Fatalf("EventGet: %v", err)
				}
				wantEqual(t, "claimed event", canonEvent(t, c.Event), canonEvent(t, ev))
			}
			if got := f.claim("w", now, time.Minute, 10); len(got) != 0 {
				t.Fatalf("claimed %v again while leased", claimedIDs(got))
			}
			wantEqual(t, "the last one, when due", claimedIDs(f.claim("w", at(3*time.Second), time.Minute, 10)), []string{ids[2]})
		},
		"ClaimCarriesSecrets": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			p := event("shop", "order.created", t0)
			p.Secrets, p.SecretNames = sensitive.Bytes(`{"token":"tok_1"}`), []string{"token"}
			f.insert(p)
			c := f.claimOne("w", t0)
			if string(c.Event.Secrets.Reveal()) != `{"token":"tok_1"}` || len(c.Event.SecretNames) != 1 {
				t.Fatalf("claimed event secrets %q names %v", c.Event.Secrets.Reveal(), c.Event.SecretNames)
			}
		},
		"Limit": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			var ids []string
			for i := range 5 {
				ids = append(ids, f.publish("shop", "order.created", at(time.Duration(i)*time.Millisecond)).Deliveries[0].ID)
			}
			now := at(time.Second)
			wantEqual(t, "first claim", claimedIDs(f.claim("a", now, time.Minute, 2)), ids[:2])
			wantEqual(t, "second claim", claimedIDs(f.claim("b", now, time.Minute, 2)), ids[2:4])
			wantEqual(t, "third claim", claimedIDs(f.claim("c", now, time.Minute, 2)), ids[4:])
			f.wantCounts("shop/all", counts{InFlight: 5})
		},
		"EndpointSlotsCapEachEndpoint": func(t *testing.T, f *fixture) {
			// "busy" has 5 due and 2 free slots, "open" 3 due and no cap:
			// the claim takes busy's 2 earliest and all of open's, and
			// leaves busy's other 3 scheduled rather than leased.
			f.upsert(endpoint("shop", "busy", "order.created"), t0)
			f.upsert(endpoint("shop", "open", "order.shipped"), t0)
			var busy, open []string
			for i := range 5 {
				busy = append(busy, deliveryTo(t, f.publish("shop", "order.created", at(time.Duration(i)*time.Millisecond)), "shop/busy"))
			}
			for i := range 3 {
				open = append(open, deliveryTo(t, f.publish("shop", "order.shipped", at(time.Second+time.Duration(i)*time.Millisecond)), "shop/open"))
			}
			got, err := f.s.DeliveryClaim(f.ctx, &ledger.DeliveryClaimParams{
				Owner: "w", Now: at(time.Minute), LeaseFor: time.Minute, Limit: 10,
				EndpointSlots: map[string]int{"shop/busy": 2},
			})
			if err != nil {
				t.Fatalf("DeliveryClaim: %v", err)
			}
			wantEqual(t, "claimed", claimedIDs(got), append(busy[:2:2], open...))
			f.wantCounts("shop/busy", counts{Pending: 3, InFlight: 2})
			f.wantCounts("shop/open", counts{InFlight: 3})
			for _, id := range busy[2:] {
				if d := f.delivery(id); d.State != ledger.StateScheduled || d.LeaseOwner != "" {
					t.Fatalf("delivery %s past the slots: state %s, owner %q; want scheduled, unowned", id, d.State, d.LeaseOwner)
				}
			}
		},
		"NamespaceSlotsCapEachNamespace": func(t *testing.T, f *fixture) {
			// Namespace "a" has 2 endpoints with 3 due each and 3 free
			// slots; "b" 3 due, not listed, within the default of 2; "c"
			// 2 due, listed with 5. The cap counts what the endpoint cap
			// kept: a/x may take 1, so a takes a/x's earliest and a/y's
			// 2 earliest, in due order.
			for _, ep := range []struct{ ns, name, typ string }{{"a", "x", "x"}, {"a", "y", "y"}, {"b", "z", "z"}, {"c", "w", "w"}} {
				f.upsert(endpoint(ep.ns, ep.name, ep.typ), t0)
			}
			due := map[string][]string{}
			for i := range 3 {
				d := time.Duration(i) * time.Millisecond
				due["a/x"] = append(due["a/x"], deliveryTo(t, f.publish("a", "x", at(d)), "a/x"))
				due["a/y"] = append(due["a/y"], deliveryTo(t, f.publish("a", "y", at(d+time.Microsecond)), "a/y"))
				due["b/z"] = append(due["b/z"], deliveryTo(t, f.publish("b", "z", at(d+2*time.Microsecond)), "b/z"))
				if i < 2 {
					due["c/w"] = append(due["c/w"], deliveryTo(t, f.publish("c", "w", at(d+3*time.Microsecond)), "c/w"))
				}
			}
			got, err := f.s.DeliveryClaim(f.ctx, &ledger.DeliveryClaimParams{
				Owner: "w", Now: at(time.Minute), LeaseFor: time.Minute, Limit: 20,
				EndpointSlots:  map[string]int{"a/x": 1},
				NamespaceSlots: map[string]int{"a": 3, "c": 5}, DefaultNamespaceSlots: 2,
			})
			if err != nil {
				t.Fatalf("DeliveryClaim: %v", err)
			}
			want := []string{due["a/x"][0], due["a/y"][0], due["b/z"][0], due["c/w"][0], due["a/y"][1], due["b/z"][1], due["c/w"][1]}
			wantEqual(t, "claimed", claimedIDs(got), want)
			f.wantCounts("a/x", counts{Pending: 2, InFlight: 1})
			f.wantCounts("a/y", counts{Pending: 1, InFlight: 2})
			f.wantCounts("b/z", counts{Pending: 1, InFlight: 2})
		},
		"FirstAttemptsOnly": func(t *testing.T, f *fixture) {
			// A retry due before a first attempt: a claim of first
			// attempts only takes the first attempt and leaves the retry
			// scheduled, which the next ordinary claim takes.
			f.upsert(endpoint("shop", "all", "*"), t0)
			retry := f.publish("shop", "order.created", t0).Deliveries[0].ID
			f.claim("w", at(time.Second), time.Minute, 1)
			if res := f.record(attempt(retry, "w", at(2*time.Second), 503, ledger.Next{State: ledger.StateScheduled, DueAt: at(3 * time.Second)})); res.Err != nil {
				t.Fatalf("record: %v", res.Err)
			}
			first := f.publish("shop", "order.created", at(4*time.Second)).Deliveries[0].ID
			got, err := f.s.DeliveryClaim(f.ctx, &ledger.DeliveryClaimParams{
				Owner: "w", Now: at(time.Minute), LeaseFor: time.Minute, Limit: 10, FirstAttemptsOnly: true,
			})
			if err != nil {
				t.Fatalf("DeliveryClaim: %v", err)
			}
			wantEqual(t, "first attempts only", claimedIDs(got), []string{first})
			wantEqual(t, "then the retry", claimedIDs(f.claim("w", at(time.Minute), time.Minute, 10)), []string{retry})
		},
		"LeaseToHandsNewDeliveriesToThePublisher": func(t *testing.T, f *fixture) {
			// Two live endpoints and a paused one match: the live ones'
			// deliveries are inserted leased to the publisher (as a claim
			// would have leased them, counted in flight), the paused one's
			// scheduled. Nobody can claim a leased one before its lease
			// ends; its holder records the attempt like a claimed one's.
			paused := endpoint("shop", "paused", "*")
			paused.Paused = true
			f.upsert(paused, t0)
			f.upsert(endpoint("shop", "a", "*"), t0)
			f.upsert(endpoint("shop", "b", "*"), t0)
			f.upsert(endpoint("shop", "b", "*"), t0) // version 2
			p := event("shop", "order.created", t0)
			p.Secrets, p.SecretNames = sensitive.Bytes(`{"token":"tok_1"}`), []string{"token"}
			p.IdempotencyKey = "k1"
			until := t0.Add(30 * time.Second)
			p.LeaseTo = &ledger.Lease{Owner: "w", Until: until}
			res := f.insert(p)[0]
			if res.Err != nil || res.Duplicate || len(res.Deliveries) != 3 {
				t.Fatalf("insert: err %v duplicate %v, %d deliveries", res.Err, res.Duplicate, len(res.Deliveries))
			}
			for _, d := range res.Deliveries {
				wantEqual(t, "DeliveryGet of "+d.EndpointID, f.delivery(d.ID), d)
				wantEqual(t, "the rule's delivery to "+d.EndpointID, d, p.NewDelivery(d.ID, d.EventID, d.EndpointID, d.EndpointID == "shop/paused"))
			}
			wantEqual(t, "leased endpoints", endpointsOfClaimed(res.Leased), []string{"shop/a", "shop/b"})
			for _, c := range res.Leased {
				d := c.Delivery
				if d.State != ledger.StateInFlight || d.LeaseOwner != "w" || d.LeaseUntil == nil || !d.LeaseUntil.Equal(until) {
					t.Fatalf("leased delivery %s: state %s owner %q until %v", d.ID, d.State, d.LeaseOwner, d.LeaseUntil)
				}
				wantEqual(t, "leased delivery as stored", f.delivery(d.ID), d)
				want := map[string]int64{"shop/a": 1, "shop/b": 2}[d.EndpointID]
				if c.EndpointVersion != want {
					t.Fatalf("leased delivery to %s: EndpointVersion %d, want %d", d.EndpointID, c.EndpointVersion, want)
				}
				if string(c.Event.Secrets.Reveal()) != `{"token":"tok_1"}` || c.Event.ID != res.Event.ID {
					t.Fatalf("leased delivery's event %s, secrets %q", c.Event.ID, c.Event.Secrets.Reveal())
				}
			}
			f.wantCounts("shop/a", counts{InFlight: 1})
			f.wantCounts("shop/b", counts{InFlight: 1})
			f.wantCounts("shop/paused", counts{Pending: 1})
			if got := f.claim("x", until.Add(-time.Nanosecond), time.Minute, 10); len(got) != 0 {
				t.Fatalf("claimed %v while leased to the publisher", claimedIDs(got))
			}
			// A duplicate answers the originals and leases nothing more.
			dup := event("shop", "order.created", at(time.Second))
			dup.ID, dup.Data, dup.BodyHash, dup.IdempotencyKey = p.ID, p.Data, p.BodyHash, "k1"
			dup.LeaseTo = &ledger.Lease{Owner: "y", Until: at(time.Minute)}
			again := f.insert(dup)[0]
			if !again.Duplicate || len(again.Leased) != 0 {
				t.Fatalf("duplicate: Duplicate %v, leased %v", again.Duplicate, claimedIDs(again.Leased))
			}
			wantEqual(t, "duplicate's deliveries", byID(again.Deliveries), byID(res.Deliveries))
			a := res.Leased[0].Delivery
			got := f.mustRecord(attempt(a.ID, "w", at(time.Second), 204, ledger.Next{State: ledger.StateDelivered}))
			if got.State != ledger.StateDelivered || got.Attempts != 1 {
				t.Fatalf("recorded: state %s attempts %d", got.State, got.Attempts)
			}
			f.wantCounts("shop/a", counts{Delivered: 1})
			// The other one's lease runs out: it returns to the pool.
			c := f.claimOne("x", until)
			if c.Delivery.ID != res.Leased[1].Delivery.ID || c.Delivery.LeaseOwner != "x" {
				t.Fatalf("after the lease: claimed %s by %q", c.Delivery.ID, c.Delivery.LeaseOwner)
			}
			f.wantCounts("shop/b", counts{InFlight: 1})
		},
		"LeaseToInABatchWithoutIt": func(t *testing.T, f *fixture) {
			// One batch mixes a publisher that takes its deliveries (but
			// not those of an endpoint it excludes) and one that leaves
			// them to claims.
			f.upsert(endpoint("shop", "all", "*"), t0)
			leased, plain := event("shop", "order.created", t0), event("shop", "order.created", t0)
			asked := map[string]bool{}
			leased.LeaseTo = &ledger.Lease{Owner: "w", Until: at(time.Minute), Admit: func(id string) bool {
				asked[id] = true
				return id != "shop/full"
			}}
			f.upsert(endpoint("shop", "full", "*"), t0)
			paused := endpoint("shop", "paused", "*")
			paused.Paused = true
			f.upsert(paused, t0)
			f.upsert(endpoint("billing", "other", "*"), t0)
			res := f.insert(plain, leased)
			// Admit is asked of the endpoints the event goes to and may
			// be leased to, and of no other (a paused one never is).
			wantEqual(t, "endpoints Admit was asked of", asked, map[string]bool{"shop/all": true, "shop/full": true})
			for i := range res {
				res[i].Deliveries = slices.DeleteFunc(res[i].Deliveries, func(d ledger.Delivery) bool {
					if d.EndpointID != "shop/full" && d.EndpointID != "shop/paused" {
						return false
					}
					if d.State != ledger.StateScheduled {
						t.Fatalf("delivery to %s (refused or paused): state %s", d.EndpointID, d.State)
					}
					return true
				})
			}
			if len(res[0].Leased) != 0 || res[0].Deliveries[0].State != ledger.StateScheduled {
				t.Fatalf("without LeaseTo: state %s, leased %v", res[0].Deliveries[0].State, claimedIDs(res[0].Leased))
			}
			if len(res[1].Leased) != 1 || res[1].Leased[0].Delivery.ID != res[1].Deliveries[0].ID {
				t.Fatalf("with LeaseTo: leased %v of %v", claimedIDs(res[1].Leased), idsOf(res[1].Deliveries))
			}
			f.wantCounts("shop/all", counts{Pending: 1, InFlight: 1})
			f.wantCounts("shop/full", counts{Pending: 2})
			f.wantCounts("shop/paused", counts{Pending: 2})
			wantEqual(t, "claimable", claimedIDs(f.claim("x", t0, time.Minute, 10, "shop/full")), []string{res[0].Deliveries[0].ID})
		},
		"SkipsPausedDeletedAndExcluded": func(t *testing.T, f *fixture) {
			paused := endpoint("shop", "paused", "*")
			paused.Paused = true
			f.upsert(paused, t0)
			f.upsert(endpoint("shop", "deleted", "*"), t0)
			f.upsert(endpoint("shop", "busy", "*"), t0)
			f.upsert(endpoint("shop", "open", "*"), t0)
			res := f.publish("shop", "order.created", t0)
			if len(res.Deliveries) != 4 {
				t.Fatalf("fan-out: %d deliveries, want 4", len(res.Deliveries))
			}
			if _, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: "shop/deleted", Now: t0}); err != nil {
				t.Fatalf("EndpointDelete: %v", err)
			}
			got := f.claim("w", at(time.Second), time.Minute, 10, "shop/busy", "shop/unknown")
			wantEqual(t, "claimable endpoints", endpointsOfClaimed(got), []string{"shop/open"})
			if got := f.claim("w", at(time.Second), time.Minute, 10, "shop/busy"); len(got) != 0 {
				t.Fatalf("claimed %v of excluded or paused endpoints", claimedIDs(got))
			}
			wantEqual(t, "without exclusions", endpointsOfClaimed(f.claim("w", at(time.Second), time.Minute, 10)), []string{"shop/busy"})
			// Unpausing makes the waiting deliveries claimable.
			paused.Paused = false
			f.upsert(paused, at(2*time.Second))
			c := f.claimOne("w", at(2*time.Second))
			if c.Delivery.EndpointID != "shop/paused" || c.EndpointVersion != 2 {
				t.Fatalf("after unpausing: claimed %s of version %d", c.Delivery.EndpointID, c.EndpointVersion)
			}
		},
		"BlockedBacklogDoesNotHideDueWork": func(t *testing.T, f *fixture) {
			// Blocked endpoints hold hundreds of earlier deliveries: more
			// than a driver may read ahead in due order.
			paused := endpoint("shop", "paused", "*")
			paused.Paused = true
			f.upsert(paused, t0)
			f.upsert(endpoint("shop", "busy", "*"), t0)
			var backlog []*ledger.EventInsertParams
			for i := range 300 {
				backlog = append(backlog, event("shop", "order.created", at(time.Duration(i)*time.Millisecond)))
			}
			f.insert(backlog...)
			f.upsert(endpoint("shop", "open", "order.shipped"), t0)
			var want []string
			for i := range 3 {
				res := f.publish("shop", "order.shipped", at(time.Second+time.Duration(i)*time.Millisecond))
				want = append(want, deliveryTo(t, res, "shop/open"))
			}
			now := at(time.Minute)
			if got, ok, err := f.s.NextDueAt(f.ctx, nil); err != nil || !ok || !got.Equal(t0) {
				t.Fatalf("NextDueAt = %v, %v, %v; want the busy endpoint's first at %v", got, ok, err, t0)
			}
			if got, ok, err := f.s.NextDueAt(f.ctx, []string{"shop/busy"}); err != nil || !ok || !got.Equal(at(time.Second)) {
				t.Fatalf("NextDueAt excluding the busy endpoint = %v, %v, %v; want the open endpoint's first at %v", got, ok, err, at(time.Second))
			}
			wantEqual(t, "claim past the blocked backlog", claimedIDs(f.claim("w", now, time.Minute, 2, "shop/busy")), want[:2])
			wantEqual(t, "and the rest", claimedIDs(f.claim("w", now, time.Minute, 2, "shop/busy")), want[2:])
			// With the busy endpoint drained, only the paused backlog is left.
			if got := f.claim("w", now, time.Minute, 1000); len(got) != 303 {
				t.Fatalf("claimed %d of the busy endpoint's backlog, want 303", len(got))
			}
			if got, ok, err := f.s.NextDueAt(f.ctx, nil); err != nil || ok {
				t.Fatalf("NextDueAt with only a paused backlog = %v, %v, %v; want none", got, ok, err)
			}
			f.wantCounts("shop/paused", counts{Pending: 303})
		},
		"ExpiredLeaseIsReclaimed": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			id := f.publish("shop", "order.created", t0).Deliveries[0].ID
			f.claim("a", t0, time.Minute, 1)
			if got := f.claim("b", at(time.Minute-time.Millisecond), time.Minute, 10); len(got) != 0 {
				t.Fatalf("claimed %v while the lease was live", claimedIDs(got))
			}
			now := at(time.Minute) // expired at or before now
			got := f.claim("b", now, 2*time.Minute, 10)
			wantEqual(t, "reclaimed", claimedIDs(got), []string{id})
			d := got[0].Delivery
			if d.LeaseOwner != "b" || !d.LeaseUntil.Equal(now.Add(2*time.Minute)) || d.Attempts != 0 {
				t.Fatalf("reclaimed delivery: owner %q until %v attempts %d", d.LeaseOwner, d.LeaseUntil, d.Attempts)
			}
			f.wantCounts("shop/all", counts{InFlight: 1})
		},
		"LeasesReclaimReturnsAnInstancesEarlierLeases": func(t *testing.T, f *fixture) {
			// Processes of instance "pod-a" (one crashed, "1", one current,
			// "2"), of "pod-a2" (a longer instance sharing the prefix) and of
			// "pod-b" hold a lease each; the current process of pod-a
			// reclaims: only the crashed process's delivery returns to the
			// pool, at once, due as it was.
			f.upsert(endpoint("shop", "all", "*"), t0)
			owners := []string{ledger.OwnerOf("pod-a", "1"), ledger.OwnerOf("pod-a", "2"), ledger.OwnerOf("pod-a2", "1"), ledger.OwnerOf("pod-b", "1")}
			ids := map[string]string{}
			for i, owner := range owners {
				id := f.publish("shop", "order.created", at(time.Duration(i)*time.Millisecond)).Deliveries[0].ID
				wantEqual(t, "claimed by "+owner, claimedIDs(f.claim(owner, at(time.Second), time.Hour, 1)), []string{id})
				ids[owner] = id
			}
			crashed, current := owners[0], owners[1]
			n, err := f.s.LeasesReclaim(f.ctx, &ledger.LeasesReclaimParams{Instance: "pod-a", Keep: current})
			if err != nil || n != 1 {
				t.Fatalf("LeasesReclaim = %d, %v; want 1", n, err)
			}
			d := f.delivery(ids[crashed])
			if d.State != ledger.StateScheduled || !d.DueAt.Equal(t0) || d.LeaseOwner != "" || d.LeaseUntil != nil || d.Attempts != 0 {
				t.Fatalf("reclaimed delivery: %+v", d)
			}
			for _, owner := range owners[1:] {
				if d := f.delivery(ids[owner]); d.State != ledger.StateInFlight || d.LeaseOwner != owner {
					t.Fatalf("the lease of %s was reclaimed too: %+v", owner, d)
				}
			}
			f.wantCounts("shop/all", counts{Pending: 1, InFlight: 3})
			// Claimable long before the lease would have expired; the crashed
			// process can no longer record.
			wantEqual(t, "claimed again at once", claimedIDs(f.claim(current, at(2*time.Second), time.Hour, 10)), []string{ids[crashed]})
			res := f.record(attempt(ids[crashed], crashed, at(3*time.Second), 200, ledger.Next{State: ledger.StateDelivered}))
			wantErr(t, "record by the crashed process", res.Err, ledger.ErrLeaseLost)
			if n, err := f.s.LeasesReclaim(f.ctx, &ledger.LeasesReclaimParams{Instance: "pod-a", Keep: current}); err != nil || n != 0 {
				t.Fatalf("second LeasesReclaim = %d, %v; want 0", n, err)
			}
			if _, err := f.s.LeasesReclaim(f.ctx, &ledger.LeasesReclaimParams{Keep: current}); err == nil {
				t.Fatal("LeasesReclaim without an instance succeeded")
			}
		},
		"ExpiredLeaseOrdersWithScheduled": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			first := f.publish("shop", "order.created", t0).Deliveries[0].ID
			f.claim("a", t0, time.Second, 1)
			second := f.publish("shop", "order.created", at(time.Millisecond)).Deliveries[0].ID
			got := f.claim("b", at(time.Minute), time.Minute, 10)
			wantEqual(t, "expired and scheduled, earliest due first", claimedIDs(got), []string{first, second})
		},
		"ReleaseReschedules": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			id := f.publish("shop", "order.created", t0).Deliveries[0].ID
			f.claimOne("a", t0)
			err := f.s.DeliveryRelease(f.ctx, &ledger.DeliveryReleaseParams{DeliveryID: id, Owner: "b", DueAt: at(time.Second), Now: t0})
			wantErr(t, "release by another owner", err, ledger.ErrLeaseLost)
			err = f.s.DeliveryRelease(f.ctx, &ledger.DeliveryReleaseParams{DeliveryID: "dlv_unknown", Owner: "a", DueAt: at(time.Second), Now: t0})
			wantErr(t, "release of an unknown delivery", err, ledger.ErrNotFound)

			due := at(5 * time.Second)
			if err := f.s.DeliveryRelease(f.ctx, &ledger.DeliveryReleaseParams{DeliveryID: id, Owner: "a", DueAt: due, Now: at(time.Second)}); err != nil {
				t.Fatalf("DeliveryRelease: %v", err)
			}
			d := f.delivery(id)
			if d.State != ledger.StateScheduled || !d.DueAt.Equal(due) || d.LeaseOwner != "" || d.LeaseUntil != nil || d.Attempts != 0 {
				t.Fatalf("released delivery: %+v", d)
			}
			f.wantCounts("shop/all", counts{Pending: 1})
			if got, err := f.s.AttemptList(f.ctx, id); err != nil || len(got) != 0 {
				t.Fatalf("release recorded attempts: %v, %v", got, err)
			}
			err = f.s.DeliveryRelease(f.ctx, &ledger.DeliveryReleaseParams{DeliveryID: id, Owner: "a", DueAt: due, Now: at(time.Second)})
			wantErr(t, "release of a scheduled delivery", err, ledger.ErrLeaseLost)
			if got := f.claim("a", due.Add(-time.Millisecond), time.Minute, 10); len(got) != 0 {
				t.Fatal("released delivery claimed before its DueAt")
			}
			f.claimOne("b", due)
		},
		"ReleaseAfterReclaimIsRefused": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			id := f.publish("shop", "order.created", t0).Deliveries[0].ID
			f.claimOne("a", t0)
			f.claim("b", at(time.Minute), time.Minute, 1)
			err := f.s.DeliveryRelease(f.ctx, &ledger.DeliveryReleaseParams{DeliveryID: id, Owner: "a", DueAt: at(time.Hour), Now: at(time.Minute)})
			wantErr(t, "release by the former owner", err, ledger.ErrLeaseLost)
			if d := f.delivery(id); d.State != ledger.StateInFlight || d.LeaseOwner != "b" {
				t.Fatalf("after a refused release: state %s owner %q", d.State, d.LeaseOwner)
			}
		},
		"NextDueAt": func(t *testing.T, f *fixture) {
			next := func() (time.Time, bool) {
				t.Helper()
				at, ok, err := f.s.NextDueAt(f.ctx, nil)
				if err != nil {
					t.Fatalf("NextDueAt: %v", err)
				}
				return at, ok
			}
			if _, ok := next(); ok {
				t.Fatal("NextDueAt on an empty store reports a delivery")
			}
			paused := endpoint("shop", "paused", "*")
			paused.Paused = true
			f.upsert(paused, t0)
			f.publish("shop", "order.created", t0)
			if _, ok := next(); ok {
				t.Fatal("NextDueAt counts a paused endpoint's delivery")
			}
			f.upsert(endpoint("shop", "open", "*"), t0)
			f.publish("shop", "order.created", at(3*time.Second))
			f.publish("shop", "order.created", at(2*time.Second))
			if got, ok := next(); !ok || !got.Equal(at(2*time.Second)) {
				t.Fatalf("NextDueAt = %v, %v; want %v", got, ok, at(2*time.Second))
			}
			c := f.claimOne("w", at(2*time.Second))
			if got, ok := next(); !ok || !got.Equal(at(3*time.Second)) {
				t.Fatalf("NextDueAt after a claim = %v, %v; want %v", got, ok, at(3*time.Second))
			}
			f.claimOne("w", at(3*time.Second))
			if got, ok := next(); ok {
				t.Fatalf("NextDueAt with everything in flight = %v", got)
			}
			f.mustRecord(attempt(c.Delivery.ID, "w", at(4*time.Second), 503, ledger.Next{State: ledger.StateScheduled, DueAt: at(time.Hour)}))
			if got, ok := next(); !ok || !got.Equal(at(time.Hour)) {
				t.Fatalf("NextDueAt after a retry = %v, %v; want %v", got, ok, at(time.Hour))
			}
		},
	})
}

// endpointsOfClaimed returns the sorted endpoint IDs of claimed deliveries.
func endpointsOfClaimed(cs []ledger.ClaimedDelivery) []string {
	ds := make([]ledger.Delivery, 0, len(cs))
	for _, c := range cs {
		ds = append(ds, c.Delivery)
	}
	return endpointsOf(ds)
}
