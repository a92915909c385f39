package ledgertest

import (
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The retry-budget part of the Recovery suite (RetryBudgetAcquire).

// acquire takes one retry from the budget of endpoint at now.
func (f *fixture) acquire(endpoint string, b ledger.RetryBudget, now time.Time) bool {
	f.t.Helper()
	answer, err := f.s.RetryBudgetAcquire(f.ctx, &ledger.RetryBudgetParams{EndpointID: endpoint, Budget: b, Now: now})
	if err != nil {
		f.t.Fatalf("RetryBudgetAcquire(%s, %v): %v", endpoint, now, err)
	}
	return answer.Taken
}

// endOf is the last millisecond of now's minute: the pace allows the
// whole allowance there (NextRetryAt).
func endOf(now time.Time) time.Time {
	return now.Truncate(time.Minute).Add(time.Minute - time.Millisecond)
}

// wantAcquired checks how many of n acquisitions succeed (the first ones).
func (f *fixture) wantAcquired(what, endpoint string, b ledger.RetryBudget, now time.Time, n, want int) {
	f.t.Helper()
	var got []bool
	for range n {
		got = append(got, f.acquire(endpoint, b, now))
	}
	wantBools := make([]bool, n)
	for i := range min(want, n) {
		wantBools[i] = true
	}
	wantEqual(f.t, what, got, wantBools)
}

// testBudgetArithmetic pins the allowance (RatioPercent × first attempts /
// 100, rounded down, + MinPerMinute), what counts as a first attempt, and
// that a bucket is one Unix minute of one endpoint.
func testBudgetArithmetic(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "ep", "*"), t0)
	f.upsert(endpoint("b", "ep", "*"), t0)
	m := t0.Truncate(time.Minute).Add(time.Minute) // the start of a minute
	b := ledger.RetryBudget{RatioPercent: 50, MinPerMinute: 2}

	f.wantAcquired("without first attempts: the floor", "a/ep", b, endOf(m), 3, 2)

	// Five first attempts in the minute: 50% of 5 is 2 (rounded down), +2.
	for range 5 {
		f.publish("a", "order.created", m)
	}
	f.attemptAll(m.Add(time.Second), ledger.Next{State: ledger.StateScheduled, DueAt: m.Add(2 * time.Second)})
	f.wantAcquired("after 5 first attempts (2 of 4 taken)", "a/ep", b, endOf(m), 3, 2)

	// Second attempts are retries, not first attempts.
	f.attemptAll(m.Add(2*time.Second), ledger.Next{State: ledger.StateDelivered})
	f.wantAcquired("after second attempts", "a/ep", b, endOf(m), 1, 0)

	// A sixth first attempt: 50% of 6 is 3, +2 = 5.
	f.publish("a", "order.created", m.Add(5*time.Second))
	f.attemptAll(m.Add(5*time.Second), ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable})
	f.wantAcquired("after a sixth first attempt", "a/ep", b, m.Add(59*time.Second+999999*time.Microsecond), 2, 1)

	// Another endpoint has its own bucket.
	f.wantAcquired("another endpoint", "b/ep", ledger.RetryBudget{MinPerMinute: 1}, endOf(m), 2, 1)

	// The next minute starts from the floor again.
	f.wantAcquired("the next minute", "a/ep", b, endOf(m.Add(time.Minute)), 3, 2)

	// No floor: nothing without first attempts; a denied acquisition does
	// not spoil the bucket for the first attempts that follow.
	m2 := m.Add(2 * time.Minute)
	ratio := ledger.RetryBudget{RatioPercent: 100}
	f.wantAcquired("no floor, no first attempts", "b/ep", ratio, m2, 1, 0)
	for range 3 {
		f.publish("b", "order.created", m2)
	}
	f.attemptAll(m2.Add(time.Second), ledger.Next{State: ledger.StateDelivered})
	f.wantAcquired("100% of 3 first attempts", "b/ep", ratio, endOf(m2), 4, 3)
	// The first attempts of a/ep in the same minute are a/ep's.
	f.wantAcquired("a/ep in the minute of b/ep's first attempts", "a/ep", ratio, endOf(m2), 1, 0)
}

// testBudgetPaced: the retries of a minute are paced evenly over it, the
// k-th (from 0) no sooner than k/allowance of the minute; refused, the
// answer says when the next may be; so the end of one minute and the start
// of the next never see twice the allowance.
func testBudgetPaced(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "ep", "*"), t0)
	m := t0.Truncate(time.Minute).Add(time.Minute)
	b := ledger.RetryBudget{MinPerMinute: 4} // one every 15 s
	try := func(what string, now time.Time, taken bool, next time.Time) {
		t.Helper()
		answer, err := f.s.RetryBudgetAcquire(f.ctx, &ledger.RetryBudgetParams{EndpointID: "a/ep", Budget: b, Now: now})
		if err != nil {
			t.Fatalf("%s: RetryBudgetAcquire: %v", what, err)
		}
		if answer.Taken != taken || (!taken && !answer.NextAt.Equal(next)) {
			t.Fatalf("%s: taken %v, next at %v; want taken %v, next at %v", what, answer.Taken, answer.NextAt, taken, next)
		}
	}
	try("the minute's first", m, true, time.Time{})
	try("a second at once", m, false, m.Add(15*time.Second))
	try("a second at 14.999 s", m.Add(15*time.Second-time.Millisecond), false, m.Add(15*time.Second))
	try("the second at 15 s", m.Add(15*time.Second), true, time.Time{})
	try("a third at 20 s", m.Add(20*time.Second), false, m.Add(30*time.Second))
	try("the third at the minute's end", endOf(m), true, time.Time{})
	try("the fourth at the minute's end", endOf(m), true, time.Time{})
	try("a fifth: spent", endOf(m), false, m.Add(time.Minute))
	try("the next minute's first", m.Add(time.Minute), true, time.Time{})
	try("and no second with it", m.Add(time.Minute), false, m.Add(time.Minute+15*time.Second))
}

// testBudgetConcurrent spends one budget from many goroutines: exactly the
// allowance is granted.
func testBudgetConcurrent(t *testing.T, f *fixture) {
	const (
		workers = 8
		each    = 12
		floor   = 25
	)
	f.upsert(endpoint("shop", "all", "*"), t0)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted int
		errs    = make(chan error, workers)
	)
	for range workers {
		wg.Go(func() {
			for range each {
				answer, err := f.s.RetryBudgetAcquire(f.ctx, &ledger.RetryBudgetParams{
					EndpointID: "shop/all", Budget: ledger.RetryBudget{RatioPercent: 10, MinPerMinute: floor}, Now: endOf(t0),
				})
				if err != nil {
					errs <- err
					return
				}
				if answer.Taken {
					mu.Lock()
					granted++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("RetryBudgetAcquire: %v", err)
	}
	if granted != floor {
		t.Fatalf("granted %d retries of a budget of %d", granted, floor)
	}
}

// testBudgetNotRaisedByResends: the first attempts of re-sends (a
// recovery's retry, a reissued copy, a replacement published with
// ReissueOf, a replay) are not counted as first attempts, so a recovery
// never raises the allowance it draws from; a fresh event's first attempt
// still is.
func testBudgetNotRaisedByResends(t *testing.T, f *fixture) {
	const ep = "a/ep"
	f.upsert(endpoint("a", "ep", "*"), t0)
	m := t0.Truncate(time.Minute).Add(time.Minute)
	for range 4 {
		f.publish("a", "order.created", m)
	}
	exhausted := f.exhaustAll(m.Add(time.Second))

	// The next minute: no first attempt yet, and a budget of 100% of them
	// without a floor allows nothing.
	m1 := m.Add(time.Minute)
	ratio := ledger.RetryBudget{RatioPercent: 100}
	retry := f.apply("op", exhausted[0].ID, ledger.RecoveryRetry, m1)
	reissue := f.apply("op", exhausted[1].ID, ledger.RecoveryReissue, m1)
	replacement := event("a", "order.created", m1)
	replacement.ReissueOf = exhausted[2].EventID
	repl := f.insert(replacement)[0]
	if repl.Err != nil || len(repl.Deliveries) != 1 {
		t.Fatalf("replacement: %+v", repl)
	}
	replayed := f.replay("op", exhausted[3].EventID, ep, ledger.ReplayRefuse, m1)
	resends := []string{retry.NewDeliveryID, reissue.NewDeliveryID, repl.Deliveries[0].ID, replayed.NewDeliveryID}
	for _, id := range resends {
		if d := f.delivery(id); !d.Resend || !d.SpendsRetryBudget() {
			t.Fatalf("delivery %s is not a re-send that spends the budget: %+v", id, d)
		}
	}

	sent := f.attemptAll(m1.Add(time.Second), ledger.Next{State: ledger.StateScheduled, DueAt: m1.Add(30 * time.Second)})
	wantEqual(t, "re-sends attempted", len(sent), len(resends))
	f.wantAcquired("after the first attempts of four re-sends", ep, ratio, m1.Add(3*time.Second), 1, 0)

	// A fresh event's first attempt in the same minute counts.
	f.publish("a", "order.created", m1.Add(4*time.Second))
	claimed := f.claim("w", m1.Add(4*time.Second), time.Minute, 10)
	if len(claimed) != 1 || claimed[0].Delivery.Resend || claimed[0].Delivery.SpendsRetryBudget() {
		t.Fatalf("claimed %+v, want the fresh event's delivery only", claimed)
	}
	f.mustRecord(attempt(claimed[0].Delivery.ID, "w", m1.Add(5*time.Second), 204, ledger.Next{State: ledger.StateDelivered}))
	f.wantAcquired("after one fresh first attempt", ep, ratio, m1.Add(6*time.Second), 2, 1)
}
