// Package evidence turns the ledger's hourly outcome buckets into what an
// admin reads on a RetryPolicy or a WebhookEndpoint (what the schedule
// achieved over the last 24 hours and 7 days) and into advice about the
// retry horizon. Everything here is a pure function of buckets and a clock
// reading: the controllers gather the buckets, call these, and write status.
package evidence

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Windows the status shows.
const (
	Day  = 24 * time.Hour
	Week = 7 * Day
)

// WindowStart returns the start of the window of length w ending at now:
// the hour buckets of the last w/OutcomeBucketWidth hours, the current
// (partial) hour included. A window therefore covers between w-1h and w of
// history, and every bucket is either wholly in it or wholly out.
func WindowStart(now time.Time, w time.Duration) time.Time {
	return now.UTC().Truncate(ledger.OutcomeBucketWidth).Add(-w + ledger.OutcomeBucketWidth)
}

// InWindow reports whether the bucket of hour is in the window of length w
// ending at now. Buckets of later hours (a clock skewed between processes)
// count in the current hour.
func InWindow(hour, now time.Time, w time.Duration) bool {
	return !hour.Before(WindowStart(now, w))
}

// Summary is what a set of buckets says.
type Summary struct {
	// Settled = Delivered + the sum of Exhausted.
	Settled   int64
	Delivered int64
	// DeliveredOnAttempt counts deliveries by the attempt that delivered
	// them (1 is the first try; 2 and later are recoveries).
	DeliveredOnAttempt map[int]int64
	// Exhausted counts exhaustions by reason.
	Exhausted map[string]int64
	// ExhaustedOnAttempt counts exhaustions by the attempts they had.
	ExhaustedOnAttempt map[int]int64
	// TimeToDelivery is the summed histogram (ledger.TimeToDeliveryBounds).
	TimeToDelivery [ledger.TimeToDeliveryBuckets]int64
	// Expired counts deliveries cancelled because their event's ValidUntil
	// passed before they were delivered (ledger.OutcomeExpired). They are
	// kept apart from Settled: the type's contract ended them, not the
	// schedule, so they say nothing about whether the horizon fits.
	Expired int64
}

// Summarize sums the buckets for which keep returns true (nil keeps all).
func Summarize(buckets []ledger.OutcomeBucket, keep func(*ledger.OutcomeBucket) bool) Summary {
	s := Summary{DeliveredOnAttempt: map[int]int64{}, Exhausted: map[string]int64{}, ExhaustedOnAttempt: map[int]int64{}}
	for i := range buckets {
		b := &buckets[i]
		if keep != nil && !keep(b) {
			continue
		}
		if b.Outcome == ledger.OutcomeExpired {
			s.Expired += b.Count
			continue
		}
		s.Settled += b.Count
		if b.Outcome == ledger.OutcomeDelivered {
			s.Delivered += b.Count
			s.DeliveredOnAttempt[b.Attempt] += b.Count
			for j, n := range b.TimeToDelivery {
				s.TimeToDelivery[j] += n
			}
			continue
		}
		s.Exhausted[b.Outcome] += b.Count
		s.ExhaustedOnAttempt[b.Attempt] += b.Count
	}
	return s
}

// Window keeps the buckets in the window of length w ending at now.
func Window(now time.Time, w time.Duration) func(*ledger.OutcomeBucket) bool {
	return func(b *ledger.OutcomeBucket) bool { return InWindow(b.Hour, now, w) }
}

// FirstTryPercent is the share of settled deliveries delivered on the
// first attempt, in whole percent rounded down (100 only when all were);
// ok is false when nothing settled.
func (s Summary) FirstTryPercent() (pct int64, ok bool) {
	if s.Settled == 0 {
		return 0, false
	}
	return s.DeliveredOnAttempt[1] * 100 / s.Settled, true
}

// Recovered is the number of deliveries delivered by a later attempt.
func (s Summary) Recovered() int64 { return s.Delivered - s.DeliveredOnAttempt[1] }

// ExhaustedTotal is the number of exhaustions, whatever the reason.
func (s Summary) ExhaustedTotal() int64 { return s.Settled - s.Delivered }

// LastRecoveringAttempt is the highest attempt number above 1 that
// delivered anything, or 0.
func (s Summary) LastRecoveringAttempt() int {
	last := 0
	for a, n := range s.DeliveredOnAttempt {
		if a > 1 && n > 0 && a > last {
			last = a
		}
	}
	return last
}

// Reached is the number of deliveries that reached attempt k: delivered
// on it or later, or exhausted after it or later.
func (s Summary) Reached(k int) int64 {
	var n int64
	for a, c := range s.DeliveredOnAttempt {
		if a >= k {
			n += c
		}
	}
	for a, c := range s.ExhaustedOnAttempt {
		if a >= k {
			n += c
		}
	}
	return n
}

// RecoveredFrom is the number of deliveries delivered on attempt k or
// later.
func (s Summary) RecoveredFrom(k int) int64 {
	var n int64
	for a, c := range s.DeliveredOnAttempt {
		if a >= k {
			n += c
		}
	}
	return n
}

// RecoveringAttempts returns the attempt numbers above 1 that delivered anything,
// ascending.
func (s Summary) RecoveringAttempts() []int {
	var out []int
	for _, a := range slices.Sorted(maps.Keys(s.DeliveredOnAttempt)) {
		if a > 1 && s.DeliveredOnAttempt[a] > 0 {
			out = append(out, a)
		}
	}
	return out
}

// Quantile returns the histogram bucket holding the pct-th percentile of
// time to delivery (the smallest bucket whose cumulative count reaches
// ceil(pct × delivered / 100)); ok is false when nothing was delivered.
func (s Summary) Quantile(pct int) (bucket int, ok bool) {
	var total int64
	for _, n := range s.TimeToDelivery {
		total += n
	}
	if total == 0 {
		return 0, false
	}
	rank := (int64(pct)*total + 99) / 100
	if rank < 1 {
		rank = 1
	}
	var cum int64
	for i, n := range s.TimeToDelivery {
		cum += n
		if cum >= rank {
			return i, true
		}
	}
	return ledger.TimeToDeliveryBuckets - 1, true
}

// BucketLabel names a histogram bucket by its upper bound ("30s", "5m",
// "2h"); the open last bucket is "over 24h". A quantile is reported as the
// bound of its bucket: "at most that long".
func BucketLabel(bucket int) string {
	if bucket >= len(ledger.TimeToDeliveryBounds) {
		return "over " + ShortDuration(ledger.TimeToDeliveryBounds[len(ledger.TimeToDeliveryBounds)-1])
	}
	return ShortDuration(ledger.TimeToDeliveryBounds[bucket])
}

// ShortDuration formats d without zero units ("2h", "1h30m", "30s"); a
// duration that is not whole seconds keeps Go's form.
func ShortDuration(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Hour && d%time.Minute == 0:
		return fmt.Sprintf("%dh%dm", d/time.Hour, d%time.Hour/time.Minute)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	default:
		return d.String()
	}
}
