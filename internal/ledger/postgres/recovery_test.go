package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/ledgertest"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// TestRecoveryRefusals runs the recovery rules on events whose secrets and
// data were removed directly in the tables, as scrubbing and pruning do.
func TestRecoveryRefusals(t *testing.T) {
	t.Parallel()
	var schemas sync.Map // store → schema
	exec := func(t *testing.T, s ledger.Store, query, id string) {
		t.Helper()
		schema, _ := schemas.Load(s)
		if _, err := rawConn(t, schema.(string)).Exec(context.Background(), query, id); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	ledgertest.ExerciseRecoveryRefusals(t, func(t *testing.T) ledger.Store {
		schema := pgtest.NewSchema(t)
		s := pgtest.OpenStore(t, schema)
		schemas.Store(ledger.Store(s), schema)
		return s
	}, ledgertest.Simulation{
		ScrubSecrets: func(t *testing.T, s ledger.Store, id string) {
			exec(t, s, `DELETE FROM event_secrets WHERE event_id = $1`, id)
		},
		PrunePayload: func(t *testing.T, s ledger.Store, id string) {
			exec(t, s, `UPDATE events SET data = NULL WHERE id = $1`, id)
		},
	})
}

// TestTwoStoresShareOneRetryBudget plays two processes spending one
// endpoint's retry budget from many goroutines while one of them records
// the first attempts that raise it: together they are granted exactly the
// final allowance, never more.
func TestTwoStoresShareOneRetryBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.NewSchema(t)
	stores := []*postgres.Store{pgtest.OpenStore(t, schema), pgtest.OpenStore(t, schema)}
	upsert(t, stores[0], endpoint("shop", "all", "*"))
	const (
		firsts  = 30
		workers = 6 // per store
	)
	budget := ledger.RetryBudget{RatioPercent: 50, MinPerMinute: 40}
	want := budget.Allowance(firsts) // 55
	m := time.Date(2030, 5, 6, 7, 8, 0, 0, time.UTC)
	insert(t, stores[1], events(firsts, "shop", m))

	var (
		granted, tries atomic.Int64
		wg             sync.WaitGroup
		record         sync.WaitGroup
	)
	acquire := func(s *postgres.Store, owner string, until func() bool) {
		for n := 0; !until(); n++ {
			// At the minute's end, where its pace allows the whole
			// allowance (ledger.NextRetryAt), a few milliseconds apart.
			answer, err := s.RetryBudgetAcquire(ctx, &ledger.RetryBudgetParams{
				EndpointID: "shop/all", Budget: budget, Now: m.Add(time.Minute - time.Duration(1+n%50)*time.Millisecond),
			})
			if err != nil {
				t.Errorf("%s: RetryBudgetAcquire: %v", owner, err)
				return
			}
			tries.Add(1)
			if answer.Taken {
				granted.Add(1)
			}
		}
	}
	// The first attempts are recorded in small batches by the second
	// process while both spend.
	record.Go(func() {
		for {
			got, err := stores[1].DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: "recorder", Now: m, LeaseFor: time.Hour, Limit: 3})
			if err != nil {
				t.Errorf("DeliveryClaim: %v", err)
				return
			}
			if len(got) == 0 {
				return
			}
			var ps []*ledger.AttemptRecordParams
			for _, c := range got {
				ps = append(ps, &ledger.AttemptRecordParams{
					DeliveryID: c.Delivery.ID, Owner: "recorder", Attempt: ledger.Attempt{StartedAt: m, StatusCode: 503},
					Next: ledger.Next{State: ledger.StateScheduled, DueAt: m.Add(time.Hour)}, Now: m.Add(time.Second),
				})
			}
			if _, err := stores[1].AttemptRecordMany(ctx, ps); err != nil {
				t.Errorf("AttemptRecordMany: %v", err)
				return
			}
		}
	})
	var recorded atomic.Bool
	go func() { record.Wait(); recorded.Store(true) }()
	for p, s := range stores {
		for w := range workers {
			wg.Go(func() {
				owner := fmt.Sprintf("process%d-worker%d", p, w)
				// While the first attempts come in, then 20 more each.
				acquire(s, owner, recorded.Load)
				left := 20
				acquire(s, owner, func() bool { left--; return left < 0 })
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if got := granted.Load(); got != want {
		t.Fatalf("two processes were granted %d retries of an allowance of %d", got, want)
	}
	var first, retries int64
	if err := rawConn(t, schema).QueryRow(ctx, `SELECT first_attempts, retries FROM retry_budgets WHERE endpoint_id = 'shop/all' AND minute = $1`,
		ledger.BudgetMinute(m)).Scan(&first, &retries); err != nil {
		t.Fatal(err)
	}
	if first != firsts || retries != want {
		t.Fatalf("bucket: %d first attempts, %d retries; want %d, %d", first, retries, firsts, want)
	}
	t.Logf("granted %d of %d acquisitions across 2 stores x %d goroutines (allowance %d)", granted.Load(), tries.Load(), workers, want)
}

// TestTwoStoresApplyARecoveryOnce applies one recovery item from two
// processes and many goroutines at once: one effect, the same item for
// every caller, exactly one of them not replayed.
func TestTwoStoresApplyARecoveryOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.NewSchema(t)
	stores := []*postgres.Store{pgtest.OpenStore(t, schema), pgtest.OpenStore(t, schema)}
	upsert(t, stores[0], endpoint("shop", "all", "*"))
	res := insert(t, stores[0], events(1, "shop", t0))
	id := res[0].Deliveries[0].ID
	if _, err := stores[0].DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: "w", Now: t0, LeaseFor: time.Minute, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if r, err := stores[0].AttemptRecordMany(ctx, []*ledger.AttemptRecordParams{{
		DeliveryID: id, Owner: "w", Attempt: ledger.Attempt{StartedAt: t0, StatusCode: 500},
		Next: ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustMaxAttempts}, Now: t0,
	}}); err != nil || r[0].Err != nil {
		t.Fatalf("exhaust: %v %v", err, r)
	}

	for _, action := range []ledger.RecoveryAction{ledger.RecoveryRetry, ledger.RecoveryReissue, ledger.RecoveryDismiss} {
		op := "op-" + string(action)
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			items []ledger.RecoveryItem
		)
		for p, s := range stores {
			for range 6 {
				wg.Go(func() {
					now := at(time.Minute)
					it, err := s.RecoveryApply(ctx, &ledger.RecoveryApplyParams{
						OperationKey: op, DeliveryID: id, Action: action,
						NewEventID: ledger.NewID("evt", now), NewDeliveryID: ledger.NewID("dlv", now), Now: now,
					})
					if err != nil {
						t.Errorf("process %d: RecoveryApply: %v", p, err)
						return
					}
					mu.Lock()
					items = append(items, it)
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		fresh := 0
		for _, it := range items {
			if !it.Replayed {
				fresh++
			}
			it.Replayed = false
			first := items[0]
			first.Replayed = false
			if it != first {
				t.Fatalf("%s: callers got different items: %+v and %+v", action, it, first)
			}
		}
		if fresh != 1 {
			t.Fatalf("%s: %d callers applied the item, want 1", action, fresh)
		}
		if action == ledger.RecoveryRetry && items[0].Outcome != ledger.OutcomeRetried {
			t.Fatalf("retry: %+v", items[0])
		}
		// Later actions on the retried delivery are refused, once each.
		if action != ledger.RecoveryRetry && (items[0].Outcome != ledger.OutcomeRefused || items[0].Reason != ledger.RefusedAlreadyResolved) {
			t.Fatalf("%s after the retry: %+v", action, items[0])
		}
	}
	var deliveries int
	if err := rawConn(t, schema).QueryRow(ctx, `SELECT count(*) FROM deliveries`).Scan(&deliveries); err != nil {
		t.Fatal(err)
	}
	if deliveries != 2 {
		t.Fatalf("%d deliveries after concurrent recoveries, want the original and one retry", deliveries)
	}
	wantCountersMatchRecount(t, stores[0], schema)
}

// TestRetryBudgetDeletesOldBuckets checks that the first retry of a minute
// deletes the endpoint's buckets older than ledger.BudgetRetention.
func TestRetryBudgetDeletesOldBuckets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.NewSchema(t)
	s := pgtest.OpenStore(t, schema)
	m := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	b := ledger.RetryBudget{MinPerMinute: 1}
	for _, a := range []struct {
		ep  string
		now time.Time
	}{
		{"shop/a", m}, {"shop/b", m}, {"shop/a", m.Add(30 * time.Minute)}, {"shop/b", m.Add(30 * time.Minute)},
		{"shop/a", m.Add(61 * time.Minute)}, // ages shop/a's first bucket out
	} {
		if answer, err := s.RetryBudgetAcquire(ctx, &ledger.RetryBudgetParams{EndpointID: a.ep, Budget: b, Now: a.now}); err != nil || !answer.Taken {
			t.Fatalf("RetryBudgetAcquire(%s, %v) = %v, %v", a.ep, a.now, answer, err)
		}
	}
	rows, err := rawConn(t, schema).Query(ctx, `SELECT endpoint_id, minute FROM retry_budgets ORDER BY endpoint_id, minute`)
	if err != nil {
		t.Fatal(err)
	}
	var (
		got    []string
		ep     string
		minute int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&ep, &minute}, func() error {
		got = append(got, ep+"@"+time.Unix(minute*60, 0).UTC().Format("15:04"))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]string{"shop/a@03:34", "shop/a@04:05", "shop/b@03:04", "shop/b@03:34"})
	if fmt.Sprint(got) != want {
		t.Fatalf("buckets %v, want %v", got, want)
	}
}
