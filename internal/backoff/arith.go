package backoff

import (
	"math"
	"time"
)

// saturated is the value internal sums stick at instead of overflowing. It
// lies above MaxDuration, so a saturated sum exceeds every clamped input
// (such as MaxAge) and comparisons against it stay correct; results are
// clamped to MaxDuration before they leave the package.
const saturated = math.MaxInt64

// clampDur forces an input duration into [0, MaxDuration]: negative values
// (invalid) behave as zero, values past the ceiling as the ceiling.
func clampDur(d time.Duration) time.Duration {
	return min(max(d, 0), MaxDuration)
}

// satAdd adds two non-negative values, saturating.
func satAdd(a, b int64) int64 {
	if a > saturated-b {
		return saturated
	}
	return a + b
}

// satMul multiplies two non-negative values, saturating.
func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > saturated/b {
		return saturated
	}
	return a * b
}

// tri is 1+2+…+k, saturating; 0 for k <= 0.
func tri(k int64) int64 {
	switch {
	case k <= 0:
		return 0
	case k%2 == 0:
		return satMul(k/2, k+1)
	default:
		return satMul(k, k/2+1) // (k+1)/2 without overflowing k+1
	}
}

// spread is floor(d*j/100) for d >= 0 and j in [0, 100], computed without
// the d*j intermediate that would overflow for long durations.
func spread(d time.Duration, j int64) time.Duration {
	return d/100*time.Duration(j) + d%100*time.Duration(j)/100
}

// floorSum100 is the sum of floor(a*m/100) for m = 1..k, saturating, for
// a in [0, 9900]. It runs in constant time: floor(a*(100t+u)/100) equals
// a*t + floor(a*u/100), so the terms repeat with period 100 plus a linear
// drift.
func floorSum100(a, k int64) int64 {
	if a <= 0 || k <= 0 {
		return 0
	}
	p, s := k/100, k%100
	var period, rest int64
	for u := int64(1); u <= 100; u++ {
		t := a * u / 100
		period += t
		if u <= s {
			rest += t
		}
	}
	sum := satMul(p, period)                   // the floor(a*u/100) part of p full periods
	sum = satAdd(sum, satMul(100*a, tri(p-1))) // their drift: 100*a*(0+1+…+(p-1))
	sum = satAdd(sum, satMul(satMul(s, a), p)) // drift of the partial period t = p
	return satAdd(sum, rest)
}
