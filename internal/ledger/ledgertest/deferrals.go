package ledgertest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The Deferrals group: ledger.RetryDeferrals, the retries a retry budget
// put off, recorded by every engine and read by the endpoint's status.

func exerciseDeferrals(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"BucketsPerEndpointAndMinute":   testDeferralBuckets,
		"StreakAcrossBuckets":           testDeferralStreak,
		"OldBucketsDeleted":             testDeferralPrune,
		"ConcurrentRecordsAddUp":        testDeferralConcurrent,
		"InvalidParamsRefused":          testDeferralInvalid,
		"EndpointWithoutDeferralsEmpty": testDeferralNone,
	})
}

// deferAt records n deferred retries of endpoint at now.
func (f *fixture) deferAt(endpoint string, n int64, now time.Time) {
	f.t.Helper()
	if err := f.s.RetryDeferralRecord(f.ctx, &ledger.RetryDeferralParams{EndpointID: endpoint, Count: n, Now: now}); err != nil {
		f.t.Fatalf("RetryDeferralRecord(%s, %d, %v): %v", endpoint, n, now, err)
	}
}

// deferralBuckets lists endpoint's buckets from since's minute on.
func (f *fixture) deferralBuckets(endpoint string, since time.Time) []ledger.DeferralBucket {
	f.t.Helper()
	b, err := f.s.RetryDeferralBuckets(f.ctx, &ledger.RetryDeferralBucketsParams{EndpointID: endpoint, SinceMinute: ledger.BudgetMinute(since)})
	if err != nil {
		f.t.Fatalf("RetryDeferralBuckets(%s): %v", endpoint, err)
	}
	return b
}

// streak reads endpoint's latest streak as of now.
func (f *fixture) streak(endpoint string, now time.Time) ledger.DeferralStreak {
	f.t.Helper()
	s, err := ledger.RetryDeferralStreak(f.ctx, f.s, endpoint, now)
	if err != nil {
		f.t.Fatalf("RetryDeferralStreak(%s): %v", endpoint, err)
	}
	return s
}

// testDeferralBuckets: records of one minute add up in one bucket that
// keeps the earliest and latest deferral, whatever the order they come in;
// another minute and another endpoint have their own.
func testDeferralBuckets(t *testing.T, f *fixture) {
	m := t0.Truncate(time.Minute).Add(time.Minute)
	f.deferAt("a/ep", 2, m.Add(30*time.Second))
	f.deferAt("a/ep", 1, m.Add(10*time.Second)) // earlier, recorded later
	f.deferAt("a/ep", 3, m.Add(50*time.Second))
	f.deferAt("a/ep", 1, m.Add(time.Minute+5*time.Second))
	f.deferAt("b/ep", 7, m.Add(20*time.Second))

	wantEqual(t, "a/ep's buckets", f.deferralBuckets("a/ep", m), []ledger.DeferralBucket{
		{Minute: ledger.BudgetMinute(m) + 1, Count: 1, First: m.Add(time.Minute + 5*time.Second), Last: m.Add(time.Minute + 5*time.Second)},
		{Minute: ledger.BudgetMinute(m), Count: 6, First: m.Add(10 * time.Second), Last: m.Add(50 * time.Second)},
	})
	wantEqual(t, "a/ep's buckets from the second minute", len(f.deferralBuckets("a/ep", m.Add(time.Minute))), 1)
	wantEqual(t, "b/ep's buckets", f.deferralBuckets("b/ep", m), []ledger.DeferralBucket{
		{Minute: ledger.BudgetMinute(m), Count: 7, First: m.Add(20 * time.Second), Last: m.Add(20 * time.Second)},
	})
}

// testDeferralStreak: buckets whose deferrals are within
// ledger.DeferralWindow of each other form one streak; a longer gap starts
// a new one; the streak ends DeferralWindow after its last deferral.
func testDeferralStreak(t *testing.T, f *fixture) {
	m := t0.Truncate(time.Minute).Add(time.Minute)
	f.deferAt("a/ep", 4, m.Add(5*time.Second)) // an old streak
	f.deferAt("a/ep", 2, m.Add(10*time.Minute))
	f.deferAt("a/ep", 3, m.Add(11*time.Minute+50*time.Second))
	f.deferAt("a/ep", 1, m.Add(13*time.Minute+40*time.Second)) // 110s after the one before

	got := f.streak("a/ep", m.Add(14*time.Minute))
	wantEqual(t, "the latest streak", got, ledger.DeferralStreak{Count: 6, First: m.Add(10 * time.Minute), Last: m.Add(13*time.Minute + 40*time.Second)})
	if !got.Active(m.Add(15*time.Minute + 40*time.Second)) {
		t.Fatalf("streak %+v not active %s after its last deferral", got, ledger.DeferralWindow)
	}
	if got.Active(m.Add(15*time.Minute + 41*time.Second)) {
		t.Fatalf("streak %+v still active more than %s after its last deferral", got, ledger.DeferralWindow)
	}
	wantEqual(t, "an endpoint without deferrals", f.streak("b/ep", m.Add(14*time.Minute)), ledger.DeferralStreak{})
}

// testDeferralPrune: the record that opens a new minute deletes buckets
// older than ledger.BudgetRetention, of every endpoint.
func testDeferralPrune(t *testing.T, f *fixture) {
	m := t0.Truncate(time.Minute).Add(time.Minute)
	f.deferAt("a/ep", 1, m)
	f.deferAt("b/ep", 1, m.Add(time.Second))
	later := m.Add(ledger.BudgetRetention + 2*time.Minute)
	f.deferAt("a/ep", 1, later)
	wantEqual(t, "a/ep's buckets after an hour", f.deferralBuckets("a/ep", m), []ledger.DeferralBucket{
		{Minute: ledger.BudgetMinute(later), Count: 1, First: later, Last: later},
	})
	wantEqual(t, "b/ep's buckets after an hour", len(f.deferralBuckets("b/ep", m)), 0)
}

// testDeferralConcurrent: records from many goroutines (connections, on a
// shared store) all count.
func testDeferralConcurrent(t *testing.T, f *fixture) {
	const (
		workers = 8
		each    = 10
	)
	var (
		wg   sync.WaitGroup
		errs = make(chan error, workers)
	)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				now := t0.Add(time.Duration(w*each+i) * time.Millisecond)
				if err := f.s.RetryDeferralRecord(f.ctx, &ledger.RetryDeferralParams{EndpointID: "shop/all", Count: 1, Now: now}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("RetryDeferralRecord: %v", err)
	}
	wantEqual(t, "the streak of concurrent records", f.streak("shop/all", t0.Add(time.Second)), ledger.DeferralStreak{
		Count: workers * each, First: t0, Last: t0.Add((workers*each - 1) * time.Millisecond),
	})
}

// testDeferralInvalid: a record without an endpoint or with a count below
// 1 is refused, naming the field, and records nothing.
func testDeferralInvalid(t *testing.T, f *fixture) {
	for name, p := range map[string]*ledger.RetryDeferralParams{
		"endpointID": {Count: 1, Now: t0},
		"count":      {EndpointID: "a/ep", Now: t0},
	} {
		err := f.s.RetryDeferralRecord(f.ctx, p)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("RetryDeferralRecord(%+v) = %v, want an error naming %s", p, err, name)
		}
	}
	if err := f.s.RetryDeferralRecord(f.ctx, nil); err == nil {
		t.Fatal("RetryDeferralRecord(nil) succeeded")
	}
	wantEqual(t, "buckets after refused records", len(f.deferralBuckets("a/ep", t0.Add(-time.Hour))), 0)
}

// testDeferralNone: an endpoint nothing was deferred for lists no bucket.
func testDeferralNone(t *testing.T, f *fixture) {
	f.deferAt("a/ep", 1, t0)
	wantEqual(t, "another endpoint's buckets", len(f.deferralBuckets("a/e", t0.Add(-time.Hour))), 0)
}
