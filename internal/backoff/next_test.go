package backoff_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestNext(t *testing.T) {
	exp5 := backoff.Policy{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: 2000, MaxAttempts: 5}
	fixedAge := backoff.Policy{Strategy: backoff.Fixed, InitialDelay: 10 * s, MaxAge: m}
	withCap := backoff.Policy{Strategy: backoff.Fixed, InitialDelay: s, MaxAttempts: 10, RetryAfterCap: h}
	retryIn := func(d time.Duration, from time.Time) backoff.Decision {
		return backoff.Decision{Retry: true, At: from.Add(d), Delay: d}
	}
	exhausted := func(r backoff.Reason) backoff.Decision { return backoff.Decision{Reason: r} }

	tests := []struct {
		name   string
		policy backoff.Policy
		in     backoff.Input
		want   backoff.Decision
	}{
		{
			name:   "first failure retries after the initial delay",
			policy: exp5, in: backoff.Input{Attempt: 1, FirstAttemptAt: t0, Now: t0.Add(2 * s)},
			want: retryIn(s, t0.Add(2*s)),
		},
		{
			name:   "the last allowed retry uses the grown delay",
			policy: exp5, in: backoff.Input{Attempt: 4, FirstAttemptAt: t0, Now: t0},
			want: retryIn(8*s, t0),
		},
		{
			name:   "failing attempt maxAttempts exhausts",
			policy: exp5, in: backoff.Input{Attempt: 5, FirstAttemptAt: t0, Now: t0},
			want: exhausted(backoff.ReasonMaxAttempts),
		},
		{
			name:   "attempts beyond maxAttempts stay exhausted",
			policy: exp5, in: backoff.Input{Attempt: 6, FirstAttemptAt: t0, Now: t0},
			want: exhausted(backoff.ReasonMaxAttempts),
		},
		{
			name:   "maxAttempts wins over maxAge when both are hit",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: h, MaxAttempts: 2, MaxAge: m},
			in:     backoff.Input{Attempt: 2, FirstAttemptAt: t0, Now: t0.Add(h)},
			want:   exhausted(backoff.ReasonMaxAttempts),
		},
		{
			name:   "attempt 0 counts as the first attempt",
			policy: exp5, in: backoff.Input{Attempt: 0, FirstAttemptAt: t0, Now: t0},
			want: retryIn(s, t0),
		},
		{
			name:   "maxAttempts 1 never retries",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: s, MaxAttempts: 1},
			in:     backoff.Input{Attempt: 1, FirstAttemptAt: t0, Now: t0},
			want:   exhausted(backoff.ReasonMaxAttempts),
		},
		{
			name:   "a retry starting exactly at maxAge is allowed",
			policy: fixedAge, in: backoff.Input{Attempt: 3, FirstAttemptAt: t0, Now: t0.Add(50 * s)},
			want: retryIn(10*s, t0.Add(50*s)),
		},
		{
			name:   "a retry starting 1ns after maxAge exhausts",
			policy: fixedAge, in: backoff.Input{Attempt: 3, FirstAttemptAt: t0, Now: t0.Add(50*s + 1)},
			want: exhausted(backoff.ReasonMaxAge),
		},
		{
			name:   "a failure after maxAge exhausts",
			policy: fixedAge, in: backoff.Input{Attempt: 7, FirstAttemptAt: t0, Now: t0.Add(2 * m)},
			want: exhausted(backoff.ReasonMaxAge),
		},
		{
			name:   "jitter draws from the injected source",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: 10 * s, JitterPercent: 20, MaxAttempts: 3},
			in:     backoff.Input{Attempt: 1, FirstAttemptAt: t0, Now: t0, Rand: func() float64 { return 0 }},
			want:   retryIn(8*s, t0),
		},
		{
			name:   "the jittered delay decides maxAge",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: 10 * s, JitterPercent: 20, MaxAge: 11 * s},
			in:     backoff.Input{Attempt: 1, FirstAttemptAt: t0, Now: t0, Rand: func() float64 { return 0.999 }},
			want:   exhausted(backoff.ReasonMaxAge),
		},
		{
			name:   "retry-after longer than the delay is honoured",
			policy: withCap, in: backoff.Input{Attempt: 1, FirstAttemptAt: t0, Now: t0, RetryAfter: 30 * s},
			want: retryIn(30*s, t0),
		},
		{
			name:   "retry-after is cut to retryAfterCap",
			policy: withCap, in: backoff.Input{Attempt: 1, FirstAttemptAt: t0, Now: t0, RetryAfter: 5 * h},
			want: retryIn(h, t0),
		},
		{
			name:   "retry-after is ignored when retryAfterCap is 0",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: s, MaxAttempts: 10},
			in:     backoff.Input{Attempt: 1, FirstAttemptAt: t0, Now: t0, RetryAfter: 30 * s},
			want:   retryIn(s, t0),
		},
		{
			name:   "retry-after never shortens the policy's delay",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: 10 * s, MaxAttempts: 10, RetryAfterCap: h},
			in:     backoff.Input{Attempt: 1, FirstAttemptAt: t0, Now: t0, RetryAfter: 2 * s},
			want:   retryIn(10*s, t0),
		},
		{
			name:   "retry-after may exceed maxDelay",
			policy: backoff.Policy{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: 2000, MaxDelay: 5 * s, MaxAttempts: 10, RetryAfterCap: h},
			in:     backoff.Input{Attempt: 1, FirstAttemptAt: t0, Now: t0, RetryAfter: m},
			want:   retryIn(m, t0),
		},
		{
			name:   "retry-after past maxAge exhausts",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: s, MaxAge: 10 * m, RetryAfterCap: h},
			in:     backoff.Input{Attempt: 1, FirstAttemptAt: t0, Now: t0, RetryAfter: 30 * m},
			want:   exhausted(backoff.ReasonMaxAge),
		},
		{
			name:   "a huge retry-after and cap saturate at MaxDuration",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: s, MaxAttempts: 2, RetryAfterCap: math.MaxInt64},
			in:     backoff.Input{Attempt: 1, FirstAttemptAt: t0, Now: t0, RetryAfter: math.MaxInt64},
			want:   retryIn(backoff.MaxDuration, t0),
		},
		{
			name:   "a zero first-attempt time with maxAge exhausts instead of overflowing",
			policy: fixedAge, in: backoff.Input{Attempt: 1, Now: t0},
			want: exhausted(backoff.ReasonMaxAge),
		},
		{
			name:   "a clock behind the first attempt still retries",
			policy: fixedAge, in: backoff.Input{Attempt: 1, FirstAttemptAt: t0, Now: t0.Add(-h)},
			want: retryIn(10*s, t0.Add(-h)),
		},
		{
			name:   "the largest attempt number does not overflow",
			policy: backoff.Policy{Strategy: backoff.Linear, InitialDelay: s, MaxAge: backoff.MaxDuration},
			in:     backoff.Input{Attempt: math.MaxInt, FirstAttemptAt: t0, Now: t0},
			want:   retryIn(backoff.MaxDuration, t0),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.policy.Next(tt.in)
			if got.Retry != tt.want.Retry || !got.At.Equal(tt.want.At) || got.Delay != tt.want.Delay || got.Reason != tt.want.Reason {
				t.Errorf("Next(%+v) =\n  %+v, want\n  %+v", tt.in, got, tt.want)
			}
		})
	}
}

// Next must agree with Plan: following the nominal timeline (no jitter,
// instant failures), it makes exactly Plan's attempts at Plan's offsets.
func TestNextFollowsPlan(t *testing.T) {
	policies := []backoff.Policy{
		{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: 2000, MaxAttempts: 8},
		{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: 2000, MaxDelay: m, MaxAge: h},
		{Strategy: backoff.Linear, InitialDelay: 10 * s, MaxAge: 5 * m},
		{Strategy: backoff.Linear, InitialDelay: 10 * s, MaxDelay: 30 * s, MaxAttempts: 12, MaxAge: 4 * m},
		{Strategy: backoff.Fixed, InitialDelay: 30 * s, MaxAge: 2 * m},
		{Strategy: backoff.Schedule, Schedule: []time.Duration{5 * s, 5 * m, 30 * m, 2 * h}, MaxAge: 24 * h},
	}
	for _, p := range policies {
		t.Run(string(p.Strategy), func(t *testing.T) {
			plan := p.Plan(1000)
			var offsets []time.Duration
			now := t0
			for attempt := 1; ; attempt++ {
				offsets = append(offsets, now.Sub(t0))
				d := p.Next(backoff.Input{Attempt: attempt, FirstAttemptAt: t0, Now: now})
				if !d.Retry {
					break
				}
				now = d.At
			}
			if int64(len(offsets)) != plan.Attempts || !slices.Equal(offsets, plan.Offsets) {
				t.Errorf("Next made attempts at %v; Plan says %d at %v", offsets, plan.Attempts, plan.Offsets)
			}
		})
	}
}
