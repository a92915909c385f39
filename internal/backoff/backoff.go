// Package backoff turns a retry policy into the delay before each delivery
// attempt and decides whether a failed attempt is retried or exhausted.
//
// The RetryPolicy controller uses it to publish the effective schedule and
// worst-case horizon in status, and the delivery engine to schedule retries;
// sharing one pure implementation (no Kubernetes types, injected clock and
// randomness) keeps the two in agreement and makes the rules testable.
//
// Semantics, with attempts numbered from 1:
//   - Delay(n) is the wait between the failure of attempt n-1 and the start
//     of attempt n; the first attempt has none. Exponential waits
//     InitialDelay × factor^(n-2), Linear InitialDelay × (n-1), Fixed
//     InitialDelay, and Schedule Schedule[n-2], its last entry repeating.
//   - MaxDelay caps the delay of every strategy, jittered or not. (The CRD
//     only allows it for Exponential and Linear; applying it uniformly keeps
//     the nominal delay inside its jitter bounds for any input.)
//   - Jitter draws uniformly from delay × (1 ± JitterPercent/100), clamped to
//     [0, MaxDelay].
//   - After a failure the delivery is retried unless MaxAttempts attempts
//     were made or the next attempt would start more than MaxAge after the
//     first one. A Retry-After can lengthen a delay, up to RetryAfterCap,
//     never shorten it.
//   - Arithmetic saturates at MaxDuration: input durations above it behave
//     as MaxDuration and negative ones as zero, so nothing overflows or
//     panics, whether or not the policy passes Validate.
package backoff

import (
	"math"
	"time"
)

// MaxDuration is the saturation ceiling for every duration this package
// computes: 100 years of 365 days. Delays stop growing there, and sums and
// offsets that would exceed it report it instead. It is far beyond any real
// retry horizon yet leaves room below the ~292-year limit of time.Duration,
// so adding two values at the ceiling cannot overflow.
const MaxDuration = 100 * 365 * 24 * time.Hour

// Strategy names how the delay between attempts grows.
type Strategy string

// The strategies of a RetryPolicy's spec.backoff.strategy.
const (
	Exponential Strategy = "Exponential"
	Linear      Strategy = "Linear"
	Fixed       Strategy = "Fixed"
	Schedule    Strategy = "Schedule"
)

// Policy is the pure form of a RetryPolicy spec.
type Policy struct {
	Strategy       Strategy
	InitialDelay   time.Duration   // Exponential, Linear, Fixed
	FactorMilli    int64           // Exponential only; 2000 means 2.0; must be > 1000 and <= 10000
	MaxDelay       time.Duration   // 0 = no cap; caps the nominal and the jittered delay
	Schedule       []time.Duration // Schedule only; Schedule[i] is the delay before attempt i+2, the last entry repeating
	JitterPercent  int32           // 0..100; symmetric: delay*(1±j/100), clamped to [0, MaxDelay if set]
	MaxAttempts    int32           // total attempts including the first; 0 = not bounded by attempts
	MaxAge         time.Duration   // deadline from the first attempt; 0 = not bounded by age
	AttemptTimeout time.Duration   // per-attempt timeout, used for the worst-case horizon
	RetryAfterCap  time.Duration   // cap on an honoured Retry-After; 0 = Retry-After ignored
}

// Delay is the nominal (unjittered) delay before attempt n, after the
// MaxDelay cap; it is 0 for n < 2. It never exceeds MaxDuration: growth
// saturates there when no MaxDelay is set.
//
// Exponential delays are computed by repeated float64 multiplication, rounded
// to the nearest nanosecond. For everyday values (whole seconds, factors like
// 2 or 1.5) that equals exact arithmetic, and unlike integer steps it keeps a
// 1ns × 1.001 sequence growing instead of stalling at 1ns. Cost is
// O(min(n, steps to the cap)): at most about 43,000 steps for a valid policy,
// typically under 64.
func (p Policy) Delay(attempt int) time.Duration {
	if attempt < 2 {
		return 0
	}
	return p.delay(int64(attempt) - 1)
}

// DelayBounds is the range [lo, hi] that Jittered draws the delay before
// attempt n from: Delay(n) ∓ JitterPercent%, hi clamped to MaxDelay. Both are
// 0 for n < 2.
func (p Policy) DelayBounds(attempt int) (lo, hi time.Duration) {
	if attempt < 2 {
		return 0, 0
	}
	return p.bounds(p.delay(int64(attempt) - 1))
}

// Jittered draws the delay before attempt n within DelayBounds. r must
// return a value in [0, 1) (production passes rand.Float64; tests inject a
// constant); r() = 0.5 yields the nominal delay, r() = 0 the lower bound.
// Out-of-range values are clamped, NaN counts as 0. A nil r, or a policy
// without jitter, yields Delay(n) without calling r.
func (p Policy) Jittered(attempt int, r func() float64) time.Duration {
	if attempt < 2 {
		return 0
	}
	d := p.delay(int64(attempt) - 1)
	s := spread(d, p.jitter())
	if r == nil || s == 0 {
		return d
	}
	x := r()
	if !(x > 0) { // also catches NaN
		x = 0
	}
	x = min(x, 1)
	// |(2x-1)·s| <= s <= MaxDuration, so the conversion cannot overflow.
	v := d + time.Duration((2*x-1)*float64(s))
	lo, hi := p.bounds(d)
	return min(max(v, lo), hi)
}

// delay is the nominal delay before attempt m+1, for m >= 1.
func (p Policy) delay(m int64) time.Duration {
	c := p.ceiling()
	switch p.Strategy {
	case Fixed:
		return min(clampDur(p.InitialDelay), c)
	case Linear:
		return min(time.Duration(satMul(int64(clampDur(p.InitialDelay)), m)), c)
	case Exponential:
		it := p.expIter()
		for i := int64(1); i < m && it.grows(); i++ {
			it.step()
		}
		return it.d
	case Schedule:
		n := len(p.Schedule)
		if n == 0 {
			return 0
		}
		i := n - 1
		if m-1 < int64(i) {
			i = int(m - 1)
		}
		return min(clampDur(p.Schedule[i]), c)
	default:
		return 0
	}
}

// bounds is the jitter range around the nominal delay d (0 <= d <= ceiling).
func (p Policy) bounds(d time.Duration) (lo, hi time.Duration) {
	s := spread(d, p.jitter())
	return d - s, min(d+s, p.ceiling())
}

// ceiling is the effective cap on any single delay.
func (p Policy) ceiling() time.Duration {
	if p.MaxDelay > 0 {
		return min(p.MaxDelay, MaxDuration)
	}
	return MaxDuration
}

// jitter is JitterPercent forced into [0, 100].
func (p Policy) jitter() int64 {
	return int64(min(max(p.JitterPercent, 0), 100))
}

// expIter walks the Exponential delays d(1), d(2), … (before attempts 2,
// 3, …). Delay and Plan both step through it, so they agree exactly.
type expIter struct {
	d time.Duration // the current delay, exact for the first step
	c time.Duration // the ceiling
	v float64       // the unrounded current delay, so small delays keep growing
	f float64       // the factor
}

func (p Policy) expIter() expIter {
	init := clampDur(p.InitialDelay)
	c := p.ceiling()
	return expIter{d: min(init, c), c: c, v: float64(init), f: float64(p.FactorMilli) / 1000}
}

// grows reports whether step can still change d. With a valid factor (>= 1.001)
// and d >= 1ns, d reaches the ceiling in at most ~43,000 steps.
func (it *expIter) grows() bool {
	return it.d > 0 && it.d < it.c && it.f > 1
}

func (it *expIter) step() {
	it.v *= it.f // may become +Inf for an invalid huge factor; caught below
	if it.v >= float64(it.c) {
		it.d = it.c
		return
	}
	it.d = min(time.Duration(math.Round(it.v)), it.c)
}
