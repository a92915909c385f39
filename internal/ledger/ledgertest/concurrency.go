package ledgertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func exerciseConcurrency(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"ClaimersNeverShareALiveLease": testConcurrentClaims,
	})
}

// testConcurrentClaims lets several claimers drain one store at once, while
// a producer keeps publishing, and checks that no delivery is handed out
// twice while its lease is live.
func testConcurrentClaims(t *testing.T, f *fixture) {
	const (
		endpoints = 3
		events    = 120
		claimers  = 6
	)
	for i := range endpoints {
		f.upsert(endpoint("shop", fmt.Sprintf("ep%d", i), "*"), t0)
	}
	var first []*ledger.EventInsertParams
	for range events / 2 {
		first = append(first, event("shop", "order.created", t0))
	}
	f.insert(first...)

	var (
		mu      sync.Mutex
		claimed = map[string]string{} // delivery → owner
		wg      sync.WaitGroup
		errs    = make(chan error, claimers+1)
	)
	now := at(time.Second) // leases of an hour: none expires here
	wg.Go(func() {
		for range events / 2 / 10 {
			var batch []*ledger.EventInsertParams
			for range 10 {
				batch = append(batch, event("shop", "order.created", t0))
			}
			if _, err := f.s.EventInsertMany(f.ctx, batch); err != nil {
				errs <- fmt.Errorf("EventInsertMany: %w", err)
				return
			}
		}
	})
	for w := range claimers {
		owner := fmt.Sprintf("worker-%d", w)
		wg.Go(func() {
			idle := 0
			for idle < 20 {
				got, err := f.s.DeliveryClaim(f.ctx, &ledger.DeliveryClaimParams{Owner: owner, Now: now, LeaseFor: time.Hour, Limit: 7})
				if err != nil {
					errs <- fmt.Errorf("%s: DeliveryClaim: %w", owner, err)
					return
				}
				if len(got) == 0 {
					idle++
					time.Sleep(time.Millisecond)
					continue
				}
				idle = 0
				mu.Lock()
				for _, c := range got {
					if prev, dup := claimed[c.Delivery.ID]; dup {
						mu.Unlock()
						errs <- fmt.Errorf("delivery %s claimed by %s and %s", c.Delivery.ID, prev, owner)
						return
					}
					if c.Delivery.LeaseOwner != owner {
						mu.Unlock()
						errs <- fmt.Errorf("delivery %s claimed by %s has lease owner %q", c.Delivery.ID, owner, c.Delivery.LeaseOwner)
						return
					}
					claimed[c.Delivery.ID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	// Whatever the claimers missed (the producer may finish last) is
	// still claimable exactly once.
	for _, c := range f.claim("late", now, time.Hour, events*endpoints) {
		if prev, dup := claimed[c.Delivery.ID]; dup {
			t.Fatalf("delivery %s claimed by %s and late", c.Delivery.ID, prev)
		}
		claimed[c.Delivery.ID] = "late"
	}
	if len(claimed) != events*endpoints {
		t.Fatalf("claimed %d distinct deliveries, want %d", len(claimed), events*endpoints)
	}
	var inFlight int64
	for i := range endpoints {
		inFlight += f.stats(fmt.Sprintf("shop/ep%d", i)).InFlight
	}
	if inFlight != events*endpoints {
		t.Fatalf("in-flight counters add up to %d, want %d", inFlight, events*endpoints)
	}
}
