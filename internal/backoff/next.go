package backoff

import (
	"math"
	"time"
)

// Reason says why a delivery was exhausted.
type Reason string

// Exhaustion reasons reported by Next.
const (
	ReasonMaxAttempts Reason = "MaxAttempts"
	ReasonMaxAge      Reason = "MaxAge"
)

// Input describes a failed attempt for Next.
type Input struct {
	Attempt        int            // the 1-based attempt that just failed; values < 1 count as 1
	FirstAttemptAt time.Time      // start of attempt 1; MaxAge is measured from it
	Now            time.Time      // injected clock: when the attempt failed
	RetryAfter     time.Duration  // from a 429/503 response; 0 if none
	Rand           func() float64 // jitter source returning [0, 1); nil = no jitter (nominal delay)
}

// Decision is what follows a failed attempt.
type Decision struct {
	Retry  bool
	At     time.Time     // when the next attempt is due; zero if !Retry
	Delay  time.Duration // At - Now; zero if !Retry
	Reason Reason        // why it exhausted; empty if Retry
}

// Next decides what follows a failed attempt:
//   - exhaust with ReasonMaxAttempts if MaxAttempts is set and reached;
//   - otherwise the delay is Jittered (or Delay when in.Rand is nil), raised
//     to min(RetryAfter, RetryAfterCap) when both are positive, so a
//     Retry-After never shortens the policy's delay;
//   - exhaust with ReasonMaxAge if MaxAge is set and the next attempt would
//     start more than MaxAge after FirstAttemptAt (exactly MaxAge is allowed);
//   - otherwise retry at Now + delay.
//
// Time arithmetic saturates (time.Time.Sub and Add do), so no input
// overflows; a zero FirstAttemptAt with MaxAge set exhausts at once.
func (p Policy) Next(in Input) Decision {
	failed := max(in.Attempt, 1)
	if p.MaxAttempts > 0 && failed >= int(p.MaxAttempts) {
		return Decision{Reason: ReasonMaxAttempts}
	}
	next := failed
	if next < math.MaxInt {
		next++
	}
	delay := p.Jittered(next, in.Rand)
	if in.RetryAfter > 0 && p.RetryAfterCap > 0 {
		delay = max(delay, min(in.RetryAfter, clampDur(p.RetryAfterCap)))
	}
	if p.MaxAge > 0 {
		// elapsed+delay > maxAge, rearranged: both sides stay within
		// ±MaxDuration except elapsed, which Sub saturates.
		if in.Now.Sub(in.FirstAttemptAt) > clampDur(p.MaxAge)-delay {
			return Decision{Reason: ReasonMaxAge}
		}
	}
	return Decision{Retry: true, At: in.Now.Add(delay), Delay: delay}
}
