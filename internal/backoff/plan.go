package backoff

import "time"

// DefaultPlanLimit is the number of offsets Plan lists when limit <= 0; it
// matches the 25 entries RetryPolicy status.schedule holds.
const DefaultPlanLimit = 25

// maxPlanLimit bounds the memory a single Plan call may allocate.
const maxPlanLimit = 10_000

// Plan is the effective schedule of a policy, for the RetryPolicy status.
type Plan struct {
	Offsets   []time.Duration // nominal offset of each attempt from the first; Offsets[0] == 0; at most limit entries
	Attempts  int64           // attempts made in the nominal case, the first included (bounded by MaxAttempts and/or MaxAge)
	Truncated bool            // Offsets holds fewer than Attempts entries
	Horizon   time.Duration   // nominal time from the first attempt to the last attempt's start
	WorstCase time.Duration   // worst case until exhausted: jitter upper bounds plus AttemptTimeout per attempt, at most MaxAge + AttemptTimeout
}

// Plan computes the effective schedule, listing at most limit offsets
// (DefaultPlanLimit when limit <= 0, never more than 10,000).
//
// Nominal means no jitter, no Retry-After and attempts that fail instantly,
// which is the timeline Next follows when given those inputs: attempt n+1 is
// made when n < MaxAttempts and its offset is at most MaxAge.
//
// WorstCase bounds when a delivery is exhausted: with MaxAttempts it is every
// delay at its jitter maximum plus AttemptTimeout for each of the MaxAttempts
// attempts; with MaxAge it is MaxAge + AttemptTimeout (no attempt starts
// after MaxAge); with both the smaller. Retry-After is not included: it can
// lengthen each delay up to RetryAfterCap, which the status contract leaves
// out.
//
// Cost is independent of the attempt count: attempts are found by binary
// search over closed-form prefix sums, so a MaxAge-only policy
// like Fixed 1s over 30 days is as cheap as three attempts. Durations
// saturate at MaxDuration. A policy with neither bound (invalid) reports
// math.MaxInt64 attempts.
func (p Policy) Plan(limit int) Plan {
	if limit <= 0 {
		limit = DefaultPlanLimit
	}
	limit = min(limit, maxPlanLimit)
	s := p.series()
	maxAge := int64(clampDur(p.MaxAge))

	retries := int64(saturated - 1) // delays in the nominal case
	if p.MaxAttempts > 0 {
		retries = int64(p.MaxAttempts) - 1
	}
	if maxAge > 0 {
		// The last k <= retries whose offset fits in MaxAge; offsets are
		// non-decreasing in k and k = 0 always fits.
		lo, hi := int64(0), retries
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if s.nominal(mid) <= maxAge {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		retries = lo
	}

	attempts := retries + 1
	offsets := make([]time.Duration, min(int64(limit), attempts))
	for i := range offsets {
		offsets[i] = out(s.nominal(int64(i)))
	}

	timeout := int64(clampDur(p.AttemptTimeout))
	worst := int64(saturated)
	if p.MaxAttempts > 0 {
		n := int64(p.MaxAttempts)
		worst = satAdd(s.upper(n-1), satMul(n, timeout))
	}
	if maxAge > 0 {
		worst = min(worst, maxAge+timeout) // both <= MaxDuration
	}

	return Plan{
		Offsets:   offsets,
		Attempts:  attempts,
		Truncated: int64(len(offsets)) < attempts,
		Horizon:   out(s.nominal(retries)),
		WorstCase: out(worst),
	}
}

// out clamps an internal sum to MaxDuration for the caller.
func out(v int64) time.Duration {
	return min(time.Duration(v), MaxDuration)
}
