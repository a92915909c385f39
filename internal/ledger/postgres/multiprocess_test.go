package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// TestTwoStoresNeverShareALiveLease plays two processes (two stores, two
// pools) draining one ledger while a producer publishes: no delivery is
// handed out twice while its lease is live, together they claim every
// delivery, and once the leases expire every delivery is reclaimed exactly
// once more.
func TestTwoStoresNeverShareALiveLease(t *testing.T) {
	t.Parallel()
	schema := pgtest.NewSchema(t)
	stores := []ledger.Store{pgtest.OpenStore(t, schema), pgtest.OpenStore(t, schema)}
	const (
		endpoints = 3
		upfront   = 200
		produced  = 100
		total     = (upfront + produced) * endpoints
	)
	for i := range endpoints {
		upsert(t, stores[0], endpoint("shop", fmt.Sprintf("ep%d", i), "*"))
	}
	insert(t, stores[1], events(upfront, "shop", t0))

	drain := func(now time.Time, round string, during func()) map[string]string {
		var (
			mu      sync.Mutex
			claimed = map[string]string{} // delivery → owner
			wg      sync.WaitGroup
		)
		var producers []func()
		if during != nil {
			producers = append(producers, during)
		}
		produced := produce(&wg, producers...)
		for p, s := range stores {
			for w := range 3 {
				owner := fmt.Sprintf("%s-process%d-worker%d", round, p, w)
				wg.Go(func() {
					claimUntilDrained(t, s, owner, now, 7, produced, func(got []ledger.ClaimedDelivery) bool {
						mu.Lock()
						defer mu.Unlock()
						for _, c := range got {
							if prev, dup := claimed[c.Delivery.ID]; dup {
								t.Errorf("delivery %s leased to %s and %s", c.Delivery.ID, prev, owner)
							}
							if c.Delivery.LeaseOwner != owner || !c.Delivery.LeaseUntil.Equal(now.Add(time.Hour)) {
								t.Errorf("delivery %s claimed by %s: lease %q until %v", c.Delivery.ID, owner, c.Delivery.LeaseOwner, c.Delivery.LeaseUntil)
							}
							claimed[c.Delivery.ID] = owner
						}
						return true
					})
				})
			}
		}
		wg.Wait()
		return claimed
	}

	now := at(time.Second)
	first := drain(now, "first", func() {
		for range produced / 10 {
			if _, err := stores[1].EventInsertMany(context.Background(), events(10, "shop", t0)); err != nil {
				t.Errorf("EventInsertMany: %v", err)
				return
			}
		}
	})
	if t.Failed() {
		return
	}
	if len(first) != total {
		t.Fatalf("claimed %d distinct deliveries, want %d", len(first), total)
	}
	schemaCheck(t, stores[0], schema, total)

	// Every lease expired: each delivery is reclaimed once, by anyone.
	second := drain(now.Add(time.Hour), "second", nil)
	if len(second) != total {
		t.Fatalf("reclaimed %d distinct deliveries after the leases expired, want %d", len(second), total)
	}
	schemaCheck(t, stores[1], schema, total)
}

// schemaCheck wants every delivery in flight and the counters to agree.
func schemaCheck(t *testing.T, s ledger.Store, schema string, inFlight int) {
	t.Helper()
	wantCountersMatchRecount(t, s, schema)
	ds, err := s.DeliveryBrowse(context.Background(), &ledger.DeliveryBrowseParams{States: []ledger.DeliveryState{ledger.StateInFlight}, Limit: ledger.MaxListLimit})
	if err != nil {
		t.Fatalf("DeliveryBrowse: %v", err)
	}
	if len(ds) != inFlight {
		t.Fatalf("%d deliveries in flight, want %d", len(ds), inFlight)
	}
}

// TestTwoStoresKeepCountersExact runs a mixed workload from two stores at
// once (publishing, claiming, recording every kind of outcome, dead
// letters, releases, and an endpoint deleted midway) and checks that no
// transaction failed and that the incrementally kept counters equal a
// recount. Lock ordering is what keeps this free of deadlocks.
func TestTwoStoresKeepCountersExact(t *testing.T) {
	t.Parallel()
	schema := pgtest.NewSchema(t)
	stores := []ledger.Store{pgtest.OpenStore(t, schema), pgtest.OpenStore(t, schema)}
	for i := range 4 {
		ep := endpoint("shop", fmt.Sprintf("ep%d", i), "*")
		if i == 3 {
			ep.DeadLetter = "shop/ep0"
		}
		upsert(t, stores[0], ep)
	}
	now := at(time.Second)
	ctx := context.Background()
	var wg sync.WaitGroup
	produced := produce(&wg, publishing(t, stores, 15)...)
	for p, s := range stores {
		for w := range 2 {
			owner := fmt.Sprintf("process%d-worker%d", p, w)
			rng := rand.New(rand.NewPCG(uint64(p), uint64(w)))
			wg.Go(func() { work(t, s, owner, now, rng, produced) })
		}
	}
	wg.Go(func() {
		time.Sleep(50 * time.Millisecond)
		if _, err := stores[1].EndpointDelete(ctx, &ledger.EndpointDeleteParams{ID: "shop/ep1", Now: now}); err != nil {
			t.Errorf("EndpointDelete: %v", err)
		}
	})
	wg.Wait()
	wantCountersMatchRecount(t, stores[0], schema)
}

// work claims and records random outcomes until the producers are done
// and nothing is claimable (claimUntilDrained).
func work(t *testing.T, s ledger.Store, owner string, now time.Time, rng *rand.Rand, produced <-chan struct{}) {
	ctx := context.Background()
	claimUntilDrained(t, s, owner, now, 8, produced, func(got []ledger.ClaimedDelivery) bool {
		var batch []*ledger.AttemptRecordParams
		for _, c := range got {
			p := &ledger.AttemptRecordParams{
				DeliveryID: c.Delivery.ID, Owner: owner, Now: now,
				Attempt: ledger.Attempt{StartedAt: now, Duration: time.Millisecond, StatusCode: 500},
			}
			switch rng.IntN(6) {
			case 0:
				err := s.DeliveryRelease(ctx, &ledger.DeliveryReleaseParams{DeliveryID: c.Delivery.ID, Owner: owner, DueAt: now, Now: now})
				wantOnlyCancelled(t, s, owner, c.Delivery.ID, err)
				continue
			case 1: // retry, due at once, so it comes back
				if c.Delivery.Attempts >= 2 {
					p.Next = ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustMaxAttempts}
				} else {
					p.Next = ledger.Next{State: ledger.StateScheduled, DueAt: now}
				}
			case 2:
				p.Next = ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable}
			case 3:
				p.Attempt.StatusCode = 202
				p.Next = ledger.Next{State: ledger.StateAwaitingAck, AckDeadline: now.Add(time.Hour)}
			default:
				p.Attempt.StatusCode = 200
				p.Next = ledger.Next{State: ledger.StateDelivered}
			}
			batch = append(batch, p)
		}
		if len(batch) == 0 {
			return true
		}
		res, err := s.AttemptRecordMany(ctx, batch)
		if err != nil {
			t.Errorf("%s: AttemptRecordMany: %v", owner, err)
			return false
		}
		for i, r := range res {
			wantOnlyCancelled(t, s, owner, batch[i].DeliveryID, r.Err)
		}
		return true
	})
}

// claimUntilDrained claims up to limit deliveries at a time for owner at
// now and hands each non-empty claim to handle (false stops), until
// produced is closed and a claim made after that finds nothing. A claim
// that finds nothing while the producers still publish is made again a
// millisecond later, or as soon as they are done: how fast they publish
// decides only how often a worker looks, never whether it stops before
// the work is there.
func claimUntilDrained(t *testing.T, s ledger.Store, owner string, now time.Time, limit int, produced <-chan struct{},
	handle func([]ledger.ClaimedDelivery) bool) {
	for {
		done := isClosed(produced)
		got, err := s.DeliveryClaim(context.Background(), &ledger.DeliveryClaimParams{Owner: owner, Now: now, LeaseFor: time.Hour, Limit: limit})
		if err != nil {
			t.Errorf("%s: DeliveryClaim: %v", owner, err)
			return
		}
		if len(got) == 0 {
			if done {
				return
			}
			select {
			case <-produced:
			case <-time.After(time.Millisecond):
			}
			continue
		}
		if !handle(got) {
			return
		}
	}
}

// produce runs each producer on wg and returns a channel closed once all
// of them are done.
func produce(wg *sync.WaitGroup, producers ...func()) <-chan struct{} {
	produced := make(chan struct{})
	var running sync.WaitGroup
	for _, p := range producers {
		running.Go(p)
	}
	wg.Go(func() { running.Wait(); close(produced) })
	return produced
}

// publishing returns a producer for each store that publishes batches of
// ten events to namespace shop, batches times.
func publishing(t *testing.T, stores []ledger.Store, batches int) []func() {
	producers := make([]func(), len(stores))
	for i, s := range stores {
		producers[i] = func() {
			for range batches {
				if _, err := s.EventInsertMany(context.Background(), events(10, "shop", t0)); err != nil {
					t.Errorf("EventInsertMany: %v", err)
					return
				}
			}
		}
	}
	return producers
}

// wantOnlyCancelled accepts err only as the lease lost to the endpoint
// deleted midway, which cancels the deliveries its workers hold.
func wantOnlyCancelled(t *testing.T, s ledger.Store, owner, id string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if d, _ := s.DeliveryGet(context.Background(), id); !errors.Is(err, ledger.ErrLeaseLost) || d.State != ledger.StateCancelled {
		t.Errorf("%s: delivery %s: %v", owner, id, err)
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
