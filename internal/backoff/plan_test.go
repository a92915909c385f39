package backoff_test

import (
	"math"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
)

func TestPlan(t *testing.T) {
	secs := func(v ...int64) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * s
		}
		return out
	}
	tests := []struct {
		name   string
		policy backoff.Policy
		limit  int
		want   backoff.Plan
	}{
		{
			name:   "exponential bounded by attempts",
			policy: backoff.Policy{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: 2000, MaxAttempts: 5},
			want:   backoff.Plan{Offsets: secs(0, 1, 3, 7, 15), Attempts: 5, Horizon: 15 * s, WorstCase: 15 * s},
		},
		{
			name:   "exponential reaching its cap, bounded by age",
			policy: backoff.Policy{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: 2000, MaxDelay: m, MaxAge: h},
			limit:  9,
			// 1+2+4+8+16+32 = 63s, then 58 × 60s fit in the hour.
			want: backoff.Plan{Offsets: secs(0, 1, 3, 7, 15, 31, 63, 123, 183), Attempts: 65, Truncated: true, Horizon: 3543 * s, WorstCase: h},
		},
		{
			name:   "linear bounded by attempts",
			policy: backoff.Policy{Strategy: backoff.Linear, InitialDelay: 10 * s, MaxAttempts: 4},
			want:   backoff.Plan{Offsets: secs(0, 10, 30, 60), Attempts: 4, Horizon: 60 * s, WorstCase: 60 * s},
		},
		{
			name:   "linear with a cap bounded by age",
			policy: backoff.Policy{Strategy: backoff.Linear, InitialDelay: 10 * s, MaxDelay: 25 * s, MaxAge: 2 * m},
			want:   backoff.Plan{Offsets: secs(0, 10, 30, 55, 80, 105), Attempts: 6, Horizon: 105 * s, WorstCase: 2 * m},
		},
		{
			name:   "fixed includes an attempt exactly at maxAge",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: 30 * s, MaxAge: 2 * m},
			want:   backoff.Plan{Offsets: secs(0, 30, 60, 90, 120), Attempts: 5, Horizon: 2 * m, WorstCase: 2 * m},
		},
		{
			name:   "schedule repeats its last entry",
			policy: backoff.Policy{Strategy: backoff.Schedule, Schedule: []time.Duration{5 * s, 5 * m, 30 * m}, MaxAttempts: 6},
			want:   backoff.Plan{Offsets: secs(0, 5, 305, 2105, 3905, 5705), Attempts: 6, Horizon: 5705 * s, WorstCase: 5705 * s},
		},
		{
			name:   "schedule cut short by maxAttempts",
			policy: backoff.Policy{Strategy: backoff.Schedule, Schedule: []time.Duration{5 * s, 5 * m, 30 * m}, MaxAttempts: 2},
			want:   backoff.Plan{Offsets: secs(0, 5), Attempts: 2, Horizon: 5 * s, WorstCase: 5 * s},
		},
		{
			name:   "a single attempt has an empty horizon",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: s, MaxAttempts: 1, AttemptTimeout: 30 * s},
			want:   backoff.Plan{Offsets: secs(0), Attempts: 1, WorstCase: 30 * s},
		},
		{
			name:   "the first delay already past maxAge leaves one attempt",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: h, MaxAge: m},
			want:   backoff.Plan{Offsets: secs(0), Attempts: 1, WorstCase: m},
		},
		{
			name:   "more attempts than the limit are truncated",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: s, MaxAttempts: 100},
			limit:  4,
			want:   backoff.Plan{Offsets: secs(0, 1, 2, 3), Attempts: 100, Truncated: true, Horizon: 99 * s, WorstCase: 99 * s},
		},
		{
			name:   "worst case takes every delay at its jitter maximum plus the timeout per attempt",
			policy: backoff.Policy{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: 2000, JitterPercent: 10, MaxAttempts: 4, AttemptTimeout: 30 * s},
			// (1.1 + 2.2 + 4.4)s + 4 × 30s
			want: backoff.Plan{Offsets: secs(0, 1, 3, 7), Attempts: 4, Horizon: 7 * s, WorstCase: 127700 * ms},
		},
		{
			name:   "worst case jitter maximum is clamped to maxDelay",
			policy: backoff.Policy{Strategy: backoff.Linear, InitialDelay: 10 * s, MaxDelay: 20 * s, JitterPercent: 50, MaxAttempts: 4},
			// upper bounds 15s, 20s, 20s (30s and 30s clamped)
			want: backoff.Plan{Offsets: secs(0, 10, 30, 50), Attempts: 4, Horizon: 50 * s, WorstCase: 55 * s},
		},
		{
			name:   "worst case is bounded by maxAge plus one timeout",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: m, JitterPercent: 50, MaxAttempts: 100, MaxAge: 10 * m, AttemptTimeout: 30 * s},
			want:   backoff.Plan{Offsets: []time.Duration{0, m, 2 * m, 3 * m, 4 * m, 5 * m, 6 * m, 7 * m, 8 * m, 9 * m, 10 * m}, Attempts: 11, Horizon: 10 * m, WorstCase: 10*m + 30*s},
		},
		{
			name:   "worst case with a tighter attempt bound ignores maxAge",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: m, MaxAttempts: 3, MaxAge: h, AttemptTimeout: 10 * s},
			want:   backoff.Plan{Offsets: []time.Duration{0, m, 2 * m}, Attempts: 3, Horizon: 2 * m, WorstCase: 2*m + 30*s},
		},
		{
			name:   "horizon and worst case saturate at MaxDuration",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: math.MaxInt64, MaxAttempts: 1000, AttemptTimeout: math.MaxInt64},
			limit:  3,
			want:   backoff.Plan{Offsets: []time.Duration{0, backoff.MaxDuration, backoff.MaxDuration}, Attempts: 1000, Truncated: true, Horizon: backoff.MaxDuration, WorstCase: backoff.MaxDuration},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.policy.Plan(tt.limit)
			if !slices.Equal(got.Offsets, tt.want.Offsets) || got.Attempts != tt.want.Attempts || got.Truncated != tt.want.Truncated ||
				got.Horizon != tt.want.Horizon || got.WorstCase != tt.want.WorstCase {
				t.Errorf("Plan(%d) =\n  %+v, want\n  %+v", tt.limit, got, tt.want)
			}
		})
	}
}

func TestPlanCountsArithmetically(t *testing.T) {
	t.Run("fixed 1s over 30 days", func(t *testing.T) {
		p := backoff.Policy{Strategy: backoff.Fixed, InitialDelay: s, MaxAge: 30 * 24 * h, AttemptTimeout: 30 * s}
		got := p.Plan(0)
		// One attempt at every second from 0 through 2,592,000 inclusive.
		if got.Attempts != 2_592_001 || got.Horizon != 30*24*h || got.WorstCase != 30*24*h+30*s || !got.Truncated || len(got.Offsets) != 25 {
			t.Errorf("Plan = {Attempts: %d, Horizon: %v, WorstCase: %v, Truncated: %v, %d offsets}", got.Attempts, got.Horizon, got.WorstCase, got.Truncated, len(got.Offsets))
		}
	})
	t.Run("schedule tail over a year", func(t *testing.T) {
		p := backoff.Policy{Strategy: backoff.Schedule, Schedule: []time.Duration{s, m}, MaxAge: 365 * 24 * h}
		// 1s, then every minute: 1 + 1 + floor((31,536,000 - 1) / 60)
		if got := p.Plan(0).Attempts; got != 2+525_599 {
			t.Errorf("Attempts = %d, want %d", got, 2+525_599)
		}
	})
	t.Run("linear 1ns over MaxDuration", func(t *testing.T) {
		p := backoff.Policy{Strategy: backoff.Linear, InitialDelay: time.Nanosecond, MaxAge: backoff.MaxDuration}
		got := p.Plan(0)
		// The k-th offset is k(k+1)/2 ns; k retries fit while that is <= MaxAge.
		k := big.NewInt(got.Attempts - 1)
		tri := func(k *big.Int) *big.Int {
			v := new(big.Int).Mul(k, new(big.Int).Add(k, big.NewInt(1)))
			return v.Rsh(v, 1)
		}
		maxAge := big.NewInt(int64(backoff.MaxDuration))
		if tri(k).Cmp(maxAge) > 0 || tri(new(big.Int).Add(k, big.NewInt(1))).Cmp(maxAge) <= 0 {
			t.Errorf("Attempts = %d is not the last count whose offset fits in MaxDuration", got.Attempts)
		}
		if got.Horizon != time.Duration(tri(k).Int64()) {
			t.Errorf("Horizon = %v, want %v", got.Horizon, tri(k))
		}
	})
}

func TestPlanLimit(t *testing.T) {
	p := backoff.Policy{Strategy: backoff.Fixed, InitialDelay: s, MaxAge: 30 * 24 * h}
	tests := []struct {
		name  string
		limit int
		want  int
	}{
		{"zero means the default of 25", 0, backoff.DefaultPlanLimit},
		{"negative means the default", -3, backoff.DefaultPlanLimit},
		{"a small limit is honoured", 1, 1},
		{"a huge limit is capped to bound memory", math.MaxInt, 10_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(p.Plan(tt.limit).Offsets); got != tt.want {
				t.Errorf("len(Plan(%d).Offsets) = %d, want %d", tt.limit, got, tt.want)
			}
		})
	}
}

func TestPlanOfUnboundedPolicySaturates(t *testing.T) {
	p := backoff.Policy{Strategy: backoff.Fixed, InitialDelay: s} // fails Validate: no bound
	got := p.Plan(3)
	if got.Attempts != math.MaxInt64 || !got.Truncated || got.Horizon != backoff.MaxDuration || got.WorstCase != backoff.MaxDuration {
		t.Errorf("Plan = %+v", got)
	}
}
