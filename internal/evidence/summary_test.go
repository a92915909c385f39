package evidence

import (
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

var now = time.Date(2026, 12, 1, 13, 20, 0, 0, time.UTC)

// bucket builds a row of endpoint ep, hoursAgo hours before now's hour.
func bucket(ep string, gen int64, hoursAgo int, outcome string, attempt int, count int64) ledger.OutcomeBucket {
	hour := now.Truncate(time.Hour).Add(-time.Duration(hoursAgo) * time.Hour)
	b := ledger.OutcomeBucket{
		OutcomeKey:       ledger.OutcomeKey{EndpointID: ep, Hour: hour, Outcome: outcome, Attempt: attempt},
		Namespace:        "ns",
		PolicyName:       "standard",
		PolicyGeneration: gen,
		OutcomeCount:     ledger.OutcomeCount{Count: count, FirstAt: hour.Add(10 * time.Minute), LastAt: hour.Add(50 * time.Minute)},
	}
	if outcome == ledger.OutcomeDelivered {
		b.TimeToDelivery[ledger.TimeToDeliveryBucket(time.Duration(attempt)*time.Minute)] = count
	}
	return b
}

func TestWindowEdges(t *testing.T) {
	for _, tc := range []struct {
		name string
		hour time.Time
		w    time.Duration
		in   bool
	}{
		{"current partial hour", now.Truncate(time.Hour), Day, true},
		{"oldest hour of 24h", now.Truncate(time.Hour).Add(-23 * time.Hour), Day, true},
		{"hour before the 24h window", now.Truncate(time.Hour).Add(-24 * time.Hour), Day, false},
		{"oldest hour of 7d", now.Truncate(time.Hour).Add(-167 * time.Hour), Week, true},
		{"hour before the 7d window", now.Truncate(time.Hour).Add(-168 * time.Hour), Week, false},
		{"future hour (skewed clock) counts", now.Truncate(time.Hour).Add(time.Hour), Day, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := InWindow(tc.hour, now, tc.w); got != tc.in {
				t.Errorf("InWindow(%v, %v, %v) = %v, want %v", tc.hour, now, tc.w, got, tc.in)
			}
		})
	}
	// At the exact start of an hour, that hour is the current one.
	top := now.Truncate(time.Hour)
	if !InWindow(top, top, Day) || InWindow(top.Add(-24*time.Hour), top, Day) {
		t.Error("at the top of the hour the window is the current hour and the 23 before it")
	}
}

func TestSummarize(t *testing.T) {
	buckets := []ledger.OutcomeBucket{
		bucket("ns/a", 1, 0, ledger.OutcomeDelivered, 1, 90),
		bucket("ns/a", 1, 2, ledger.OutcomeDelivered, 2, 4),
		bucket("ns/b", 1, 5, ledger.OutcomeDelivered, 3, 1), // a shared policy: endpoints sum
		bucket("ns/b", 1, 5, string(ledger.ExhaustMaxAttempts), 5, 3),
		bucket("ns/a", 1, 30, string(ledger.ExhaustNonRetryable), 1, 2), // outside 24h, inside 7d
		bucket("ns/a", 1, 30, ledger.OutcomeDelivered, 1, 100),
		bucket("ns/a", 1, 200, ledger.OutcomeDelivered, 1, 1000), // outside 7d
	}
	for _, tc := range []struct {
		name                          string
		w                             time.Duration
		settled, delivered, exhausted int64
		firstTry                      int64
		recovered                     int64
		lastRecovering                int
		byReason                      map[string]int64
	}{
		{"24h", Day, 98, 95, 3, 91, 5, 3, map[string]int64{"MaxAttempts": 3}},
		{"7d", Week, 200, 195, 5, 95, 5, 3, map[string]int64{"MaxAttempts": 3, "NonRetryable": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(buckets, Window(now, tc.w))
			if s.Settled != tc.settled || s.Delivered != tc.delivered || s.ExhaustedTotal() != tc.exhausted {
				t.Errorf("settled/delivered/exhausted = %d/%d/%d, want %d/%d/%d", s.Settled, s.Delivered, s.ExhaustedTotal(), tc.settled, tc.delivered, tc.exhausted)
			}
			if pct, ok := s.FirstTryPercent(); !ok || pct != tc.firstTry {
				t.Errorf("first try = %d%% (%v), want %d%%", pct, ok, tc.firstTry)
			}
			if s.Recovered() != tc.recovered || s.LastRecoveringAttempt() != tc.lastRecovering {
				t.Errorf("recovered %d, last recovering %d; want %d, %d", s.Recovered(), s.LastRecoveringAttempt(), tc.recovered, tc.lastRecovering)
			}
			for r, n := range tc.byReason {
				if s.Exhausted[r] != n {
					t.Errorf("exhausted %s = %d, want %d", r, s.Exhausted[r], n)
				}
			}
			if len(s.Exhausted) != len(tc.byReason) {
				t.Errorf("exhausted reasons %v, want %v", s.Exhausted, tc.byReason)
			}
		})
	}
}

func TestSummarizeEmpty(t *testing.T) {
	for _, buckets := range [][]ledger.OutcomeBucket{nil, {bucket("ns/a", 1, 0, ledger.OutcomeDelivered, 1, 0)}} {
		s := Summarize(buckets, Window(now, Day))
		if _, ok := s.FirstTryPercent(); ok {
			t.Error("an empty window has no first-try share")
		}
		if _, ok := s.Quantile(50); ok {
			t.Error("an empty window has no quantile")
		}
		if s.LastRecoveringAttempt() != 0 || s.Recovered() != 0 || s.Reached(2) != 0 {
			t.Errorf("empty summary: %+v", s)
		}
	}
}

func TestFirstTryPercentRoundsDown(t *testing.T) {
	s := Summarize([]ledger.OutcomeBucket{
		bucket("ns/a", 1, 0, ledger.OutcomeDelivered, 1, 999),
		bucket("ns/a", 1, 0, string(ledger.ExhaustGone), 1, 1),
	}, nil)
	if pct, _ := s.FirstTryPercent(); pct != 99 {
		t.Errorf("999 of 1000 = %d%%, want 99%% (100%% only when all were)", pct)
	}
}

func TestQuantile(t *testing.T) {
	hist := func(counts map[int]int64) Summary {
		var s Summary
		for i, n := range counts {
			s.TimeToDelivery[i] = n
		}
		return s
	}
	last := ledger.TimeToDeliveryBuckets - 1
	for _, tc := range []struct {
		name     string
		s        Summary
		pct      int
		bucket   int
		label    string
		wantNone bool
	}{
		{"one delivery", hist(map[int]int64{3: 1}), 50, 3, "1m", false},
		{"p50 at the median bucket", hist(map[int]int64{0: 50, 4: 50}), 50, 0, "1s", false},
		{"p50 past the half", hist(map[int]int64{0: 49, 4: 51}), 50, 4, "5m", false},
		{"p95 in the tail", hist(map[int]int64{0: 94, 8: 6}), 95, 8, "2h", false},
		{"p95 exactly at the rank", hist(map[int]int64{0: 95, 8: 5}), 95, 0, "1s", false},
		{"overflow bucket", hist(map[int]int64{last: 2}), 95, last, "over 24h", false},
		{"empty", hist(nil), 50, 0, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := tc.s.Quantile(tc.pct)
			if ok == tc.wantNone {
				t.Fatalf("ok = %v", ok)
			}
			if ok && (b != tc.bucket || BucketLabel(b) != tc.label) {
				t.Errorf("p%d = bucket %d (%s), want %d (%s)", tc.pct, b, BucketLabel(b), tc.bucket, tc.label)
			}
		})
	}
}

func TestTimeToDeliveryBucketEdges(t *testing.T) {
	for i, bound := range ledger.TimeToDeliveryBounds {
		if got := ledger.TimeToDeliveryBucket(bound); got != i {
			t.Errorf("bound %v in bucket %d, want %d (bounds are inclusive)", bound, got, i)
		}
		if got := ledger.TimeToDeliveryBucket(bound + 1); got != i+1 {
			t.Errorf("just past %v in bucket %d, want %d", bound, got, i+1)
		}
	}
	if got := ledger.TimeToDeliveryBucket(-time.Second); got != 0 {
		t.Errorf("a negative duration (skewed clock) in bucket %d, want 0", got)
	}
}

func TestReached(t *testing.T) {
	s := Summarize([]ledger.OutcomeBucket{
		bucket("ns/a", 1, 0, ledger.OutcomeDelivered, 1, 10),
		bucket("ns/a", 1, 0, ledger.OutcomeDelivered, 3, 2),
		bucket("ns/a", 1, 0, string(ledger.ExhaustMaxAttempts), 5, 4),
		bucket("ns/a", 1, 0, string(ledger.ExhaustNonRetryable), 2, 1),
	}, nil)
	for k, want := range map[int]int64{1: 17, 2: 7, 3: 6, 4: 4, 5: 4, 6: 0} {
		if got := s.Reached(k); got != want {
			t.Errorf("Reached(%d) = %d, want %d", k, got, want)
		}
	}
	if got := s.RecoveredFrom(3); got != 2 {
		t.Errorf("RecoveredFrom(3) = %d, want 2", got)
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		2 * time.Hour: "2h", 90 * time.Minute: "1h30m", 40 * time.Minute: "40m", 30 * time.Second: "30s", 1500 * time.Millisecond: "1.5s",
	} {
		if got := ShortDuration(d); got != want {
			t.Errorf("ShortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// Deliveries cancelled because their event expired are counted apart:
// they are neither settled nor exhausted, so they move no percentage and
// no horizon advice.
func TestSummarizeKeepsExpiredApart(t *testing.T) {
	buckets := []ledger.OutcomeBucket{
		bucket("ns/a", 1, 0, ledger.OutcomeDelivered, 1, 9),
		bucket("ns/a", 1, 0, string(ledger.ExhaustMaxAttempts), 5, 1),
		bucket("ns/a", 1, 1, ledger.OutcomeExpired, 2, 3),
		bucket("ns/b", 1, 30, ledger.OutcomeExpired, 0, 2), // out of the day
	}
	day := Summarize(buckets, Window(now, Day))
	if day.Expired != 3 || day.Settled != 10 || day.ExhaustedTotal() != 1 || len(day.Exhausted) != 1 {
		t.Errorf("day: expired %d, settled %d, exhausted %d %v; want 3, 10, 1 without Expired",
			day.Expired, day.Settled, day.ExhaustedTotal(), day.Exhausted)
	}
	if pct, ok := day.FirstTryPercent(); !ok || pct != 90 {
		t.Errorf("first-try percent = %d, %v; want 90 (expired deliveries left out)", pct, ok)
	}
	if week := Summarize(buckets, Window(now, Week)); week.Expired != 5 || week.Reached(1) != 10 {
		t.Errorf("week: expired %d, reached(1) %d; want 5, 10", week.Expired, week.Reached(1))
	}
}
