package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// TestRecoveryPaysForItself: a recovery of 100 deliveries over a retry
// budget of 10 per minute takes ten minutes of the engine's clock (the
// issue's 1,000 over 100 per minute, scaled down by ten). Each minute its
// re-sends, retries and reissued copies alike, take the budget's floor and
// no more, the rest deferred to the next minute; and their first attempts
// do not raise the allowance, although the budget grants 100% of the
// minute's first attempts on top of its floor.
func TestRecoveryPaysForItself(t *testing.T) {
	const (
		items     = 100
		perMinute = 10
		minutes   = items / perMinute
	)
	// What is asserted is the pacing, counted at the receiver, and the
	// allowance; a minute that sends less than its floor times out, one
	// that sends more fails the count.
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := sf.open(t)
			// The last second of a minute: the budget's pace (one retry
			// every 6 s for 10 a minute) allows the whole allowance there,
			// so each step of the clock is one minute's worth.
			clock := &manualClock{now: time.Now().UTC().Truncate(time.Minute).Add(59 * time.Second)}
			var up atomic.Bool
			rcv := newReceiver(t, func(int) int {
				if up.Load() {
					return 204
				}
				return 400 // not retried: exhausted at the first attempt
			})
			e := run(t, engine.Options{Store: store, Clock: clock, IdleWait: 10 * time.Millisecond})
			p := policy(3, time.Millisecond)
			budget := ledger.RetryBudget{RatioPercent: 100, MinPerMinute: perMinute}
			p.Budget = &budget
			const id = "ns/down"
			if _, err := e.RegisterEndpoint(ctx, endpoint(t, "ns", "down", rcv.URL, []string{"*"}, p)); err != nil {
				t.Fatal(err)
			}

			// The receiver loses everything for a minute.
			for range items {
				now := clock.Now()
				res, err := e.Publish(ctx, &ledger.EventInsertParams{
					ID: ledger.NewID("evt", now), Namespace: "ns", Type: "order.created", Data: json.RawMessage(`{}`), Now: now,
				})
				if err != nil || res.Err != nil {
					t.Fatalf("publish: %v / %v", err, res.Err)
				}
			}
			eventually(t, "every delivery exhausted", func() bool {
				st, err := e.EndpointStats(ctx, id)
				return err == nil && st.ExhaustedUnresolved == items
			})
			lost := received(rcv)

			// A minute later it is back, and one recovery retries half and
			// reissues the other half.
			up.Store(true)
			clock.advance(time.Minute)
			const op = "drec:ns/recover"
			if _, err := e.RecoveryStart(ctx, op, "sha256:spec", "uid"); err != nil {
				t.Fatal(err)
			}
			exhausted, err := e.ExhaustedList(ctx, &ledger.ExhaustedListParams{EndpointID: id, ExhaustedBefore: clock.Now(), Limit: items})
			if err != nil || len(exhausted) != items {
				t.Fatalf("ExhaustedList: %d, %v", len(exhausted), err)
			}
			for i := range exhausted {
				action := ledger.RecoveryRetry
				if i%2 == 1 {
					action = ledger.RecoveryReissue
				}
				if _, err := e.Recover(ctx, op, exhausted[i].Delivery.ID, action); err != nil {
					t.Fatal(err)
				}
			}

			// Each minute sends the floor and defers the rest to the next.
			// The clock moves on once the minute is done with: its floor
			// sent, nothing due before the next minute and nothing in
			// flight (a jump past the leases of deliveries still in hand
			// would have them claimed again). The reads are in that order:
			// a delivery moves from due to in flight to sent or deferred,
			// so reading in flight first could miss one claimed between
			// the two reads.
			for m := 1; m <= minutes; m++ {
				eventually(t, fmt.Sprintf("minute %d done with", m), func() bool {
					if received(rcv)-lost < m*perMinute {
						return false
					}
					next, ok, err := store.NextDueAt(ctx, nil)
					if err != nil || (ok && !next.After(clock.Now())) {
						return false
					}
					st, err := e.EndpointStats(ctx, id)
					return err == nil && st.InFlight == 0
				})
				if got, want := received(rcv)-lost, m*perMinute; got != want {
					t.Fatalf("after minute %d the receiver got %d re-sends, want %d (%d per minute)", m, got, want, perMinute)
				}
				if m < minutes {
					clock.advance(time.Minute)
				}
			}

			// The last minute's ten first attempts of re-sends raised
			// nothing: its allowance is spent.
			answer, err := store.RetryBudgetAcquire(ctx, &ledger.RetryBudgetParams{EndpointID: id, Budget: budget, Now: clock.Now()})
			if err != nil || answer.Taken {
				t.Fatalf("a retry in the last minute of the recovery was allowed (%t, %v): the re-sends raised the allowance", answer.Taken, err)
			}
		})
	}
}

// received is how many requests r answered.
func received(r *receiver) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bodies)
}
