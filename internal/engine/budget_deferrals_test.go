package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// TestRetryBudgetDeferralsAreShared runs one engine that defers retries
// over budget and reads the deferrals through another engine that never
// ran (the leader's controller, on another replica): the streak comes from
// the shared ledger, not from the memory of the engine that deferred.
func TestRetryBudgetDeferralsAreShared(t *testing.T) {
	replicas := []struct {
		name string
		open func(t *testing.T) (deferring, reading ledger.Store)
	}{
		{"sqlite", func(t *testing.T) (ledger.Store, ledger.Store) {
			s := stores()[0].open(t) // one process per file: the two engines share the store
			return s, s
		}},
		{"postgres", func(t *testing.T) (ledger.Store, ledger.Store) {
			schema := pgtest.NewSchema(t)
			return pgtest.OpenStore(t, schema), pgtest.OpenStore(t, schema)
		}},
	}
	for _, r := range replicas {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			deferring, reading := r.open(t)
			failing := newReceiver(t, func(int) int { return 503 })
			e := run(t, engine.Options{Store: deferring})
			leader, err := engine.New(engine.Options{Store: reading})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(leader.Close)
			ctx := context.Background()

			// No floor and no ratio: every retry is over budget.
			p := policy(3, time.Millisecond)
			p.Budget = &ledger.RetryBudget{}
			if _, err := e.RegisterEndpoint(ctx, endpoint(t, "ns", "limited", failing.URL, []string{"*"}, p)); err != nil {
				t.Fatal(err)
			}
			before := time.Now()
			res := publish(t, e, "ns", "order.created", `{"n":1}`)

			var streak ledger.DeferralStreak
			eventually(t, "a deferral in the ledger", func() bool {
				streak, err = leader.RetryBudgetDeferrals(ctx, "ns/limited", time.Now())
				return err == nil && streak.Count > 0
			})
			if streak.First.Before(before.Truncate(time.Microsecond)) || !streak.Active(time.Now()) {
				t.Fatalf("streak %+v: want one that started after %v and still holds", streak, before)
			}
			if got := failing.count(res.Event.ID); got != 1 {
				t.Fatalf("the receiver saw %d attempts; the retry should wait for the next minute's budget", got)
			}
			if other, err := leader.RetryBudgetDeferrals(ctx, "ns/other", time.Now()); err != nil || other.Count != 0 {
				t.Fatalf("an endpoint nothing was deferred for: %+v, %v", other, err)
			}
		})
	}
}
