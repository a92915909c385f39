package backoff_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
)

const (
	ms = time.Millisecond
	s  = time.Second
	m  = time.Minute
	h  = time.Hour
)

// delays returns Delay(1..n).
func delays(p backoff.Policy, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = p.Delay(i + 1)
	}
	return out
}

func TestDelaySequences(t *testing.T) {
	tests := []struct {
		name   string
		policy backoff.Policy
		want   []time.Duration // Delay(1), Delay(2), …
	}{
		{
			name:   "exponential doubles from the initial delay",
			policy: backoff.Policy{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: 2000},
			want:   []time.Duration{0, s, 2 * s, 4 * s, 8 * s, 16 * s},
		},
		{
			name:   "exponential with a fractional factor is exact to the nanosecond",
			policy: backoff.Policy{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: 1500},
			want:   []time.Duration{0, s, 1500 * ms, 2250 * ms, 3375 * ms, 5062500 * time.Microsecond},
		},
		{
			name:   "exponential stops at maxDelay",
			policy: backoff.Policy{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: 2000, MaxDelay: 5 * s},
			want:   []time.Duration{0, s, 2 * s, 4 * s, 5 * s, 5 * s},
		},
		{
			name:   "maxDelay below initialDelay caps the first retry too",
			policy: backoff.Policy{Strategy: backoff.Exponential, InitialDelay: 10 * s, FactorMilli: 2000, MaxDelay: 3 * s},
			want:   []time.Duration{0, 3 * s, 3 * s},
		},
		{
			name:   "linear adds the initial delay per attempt",
			policy: backoff.Policy{Strategy: backoff.Linear, InitialDelay: 10 * s},
			want:   []time.Duration{0, 10 * s, 20 * s, 30 * s, 40 * s},
		},
		{
			name:   "linear stops at maxDelay",
			policy: backoff.Policy{Strategy: backoff.Linear, InitialDelay: 10 * s, MaxDelay: 25 * s},
			want:   []time.Duration{0, 10 * s, 20 * s, 25 * s, 25 * s},
		},
		{
			name:   "fixed repeats the initial delay",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: 30 * s},
			want:   []time.Duration{0, 30 * s, 30 * s, 30 * s},
		},
		{
			name:   "fixed is capped by maxDelay like every strategy",
			policy: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: 30 * s, MaxDelay: 20 * s},
			want:   []time.Duration{0, 20 * s, 20 * s},
		},
		{
			name:   "schedule lists the delays then repeats the last entry",
			policy: backoff.Policy{Strategy: backoff.Schedule, Schedule: []time.Duration{5 * s, 5 * m, 30 * m}},
			want:   []time.Duration{0, 5 * s, 5 * m, 30 * m, 30 * m, 30 * m},
		},
		{
			name:   "a one-entry schedule behaves like fixed",
			policy: backoff.Policy{Strategy: backoff.Schedule, Schedule: []time.Duration{time.Minute}},
			want:   []time.Duration{0, m, m, m},
		},
		{
			name:   "schedule entries may shrink",
			policy: backoff.Policy{Strategy: backoff.Schedule, Schedule: []time.Duration{h, s}},
			want:   []time.Duration{0, h, s, s},
		},
		{
			name:   "an unknown strategy yields no delay",
			policy: backoff.Policy{Strategy: "Bogus", InitialDelay: s},
			want:   []time.Duration{0, 0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := delays(tt.policy, len(tt.want)); !slices.Equal(got, tt.want) {
				t.Errorf("Delay(1..%d) = %v, want %v", len(tt.want), got, tt.want)
			}
		})
	}
}

func TestDelayBeforeSecondAttemptIsZero(t *testing.T) {
	p := backoff.Policy{Strategy: backoff.Fixed, InitialDelay: s}
	for _, n := range []int{math.MinInt, -1, 0, 1} {
		if got := p.Delay(n); got != 0 {
			t.Errorf("Delay(%d) = %v, want 0", n, got)
		}
		if lo, hi := p.DelayBounds(n); lo != 0 || hi != 0 {
			t.Errorf("DelayBounds(%d) = [%v, %v], want [0, 0]", n, lo, hi)
		}
		if got := p.Jittered(n, func() float64 { return 0.9 }); got != 0 {
			t.Errorf("Jittered(%d) = %v, want 0", n, got)
		}
	}
}

func TestDelaySaturates(t *testing.T) {
	tests := []struct {
		name    string
		policy  backoff.Policy
		attempt int
		want    time.Duration
	}{
		{
			name:    "exponential attempt 10000 without a cap stops at MaxDuration",
			policy:  backoff.Policy{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: 2000},
			attempt: 10_000,
			want:    backoff.MaxDuration,
		},
		{
			name:    "exponential factor 10 at MaxInt attempt stops at MaxDuration",
			policy:  backoff.Policy{Strategy: backoff.Exponential, InitialDelay: time.Nanosecond, FactorMilli: 10_000},
			attempt: math.MaxInt,
			want:    backoff.MaxDuration,
		},
		{
			name:    "exponential with the smallest factor and delay reaches MaxDuration",
			policy:  backoff.Policy{Strategy: backoff.Exponential, InitialDelay: time.Nanosecond, FactorMilli: 1001},
			attempt: math.MaxInt,
			want:    backoff.MaxDuration,
		},
		{
			name:    "exponential with a cap at MaxInt attempt stays at the cap",
			policy:  backoff.Policy{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: 10_000, MaxDelay: h},
			attempt: math.MaxInt,
			want:    h,
		},
		{
			name:    "linear at MaxInt attempt stops at MaxDuration",
			policy:  backoff.Policy{Strategy: backoff.Linear, InitialDelay: h},
			attempt: math.MaxInt,
			want:    backoff.MaxDuration,
		},
		{
			name:    "an initial delay above MaxDuration behaves as MaxDuration",
			policy:  backoff.Policy{Strategy: backoff.Exponential, InitialDelay: math.MaxInt64, FactorMilli: 2000},
			attempt: 2,
			want:    backoff.MaxDuration,
		},
		{
			name:    "a maxDelay above MaxDuration does not lift the ceiling",
			policy:  backoff.Policy{Strategy: backoff.Linear, InitialDelay: 50 * 365 * 24 * h, MaxDelay: math.MaxInt64},
			attempt: 5,
			want:    backoff.MaxDuration,
		},
		{
			name:    "a schedule entry above MaxDuration behaves as MaxDuration",
			policy:  backoff.Policy{Strategy: backoff.Schedule, Schedule: []time.Duration{math.MaxInt64}},
			attempt: 1000,
			want:    backoff.MaxDuration,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.policy.Delay(tt.attempt); got != tt.want {
				t.Errorf("Delay(%d) = %v, want %v", tt.attempt, got, tt.want)
			}
		})
	}
}

// Integer arithmetic would round 1ns × 1.001 back to 1ns forever.
func TestExponentialTinyDelayKeepsGrowing(t *testing.T) {
	p := backoff.Policy{Strategy: backoff.Exponential, InitialDelay: time.Nanosecond, FactorMilli: 1001}
	// 1.001^1000 = 2.7169…, rounded to 3ns.
	if got := p.Delay(1002); got != 3*time.Nanosecond {
		t.Errorf("Delay(1002) = %v, want 3ns", got)
	}
}

func TestExponentialIsMonotonicAndSaturates(t *testing.T) {
	for _, factor := range []int64{1001, 1100, 1500, 2000, 3333, 10_000} {
		p := backoff.Policy{Strategy: backoff.Exponential, InitialDelay: 7 * time.Nanosecond, FactorMilli: factor}
		prev := time.Duration(0)
		for n := 2; n < 2000; n++ {
			d := p.Delay(n)
			if d < prev || d > backoff.MaxDuration {
				t.Fatalf("factor %d: Delay(%d) = %v after %v", factor, n, d, prev)
			}
			prev = d
		}
		// ~41,000 steps reach the ceiling at factor 1.001.
		if got := p.Delay(100_000); got != backoff.MaxDuration {
			t.Errorf("factor %d: Delay(100000) = %v, want MaxDuration", factor, got)
		}
	}
}

func TestInvalidPoliciesDoNotPanic(t *testing.T) {
	policies := []backoff.Policy{
		{},
		{Strategy: backoff.Exponential, InitialDelay: -s, FactorMilli: -5, MaxDelay: -h, JitterPercent: -50},
		{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: math.MaxInt64, JitterPercent: math.MaxInt32},
		{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: 1000},
		{Strategy: backoff.Linear, InitialDelay: math.MinInt64},
		{Strategy: backoff.Schedule},
		{Strategy: backoff.Schedule, Schedule: []time.Duration{-s, math.MinInt64}},
	}
	for _, p := range policies {
		for _, n := range []int{2, 3, 1000, math.MaxInt} {
			d := p.Delay(n)
			lo, hi := p.DelayBounds(n)
			j := p.Jittered(n, func() float64 { return 0.999 })
			if d < 0 || lo < 0 || lo > d || d > hi || j < lo || j > hi {
				t.Errorf("%+v attempt %d: Delay %v, bounds [%v, %v], jittered %v", p, n, d, lo, hi, j)
			}
		}
		p.Next(backoff.Input{Attempt: 1, Now: time.Now(), RetryAfter: math.MaxInt64})
		if plan := p.Plan(3); plan.Attempts < 1 || len(plan.Offsets) == 0 {
			t.Errorf("%+v: Plan = %+v", p, plan)
		}
	}
}

func TestDelayBoundsAndJittered(t *testing.T) {
	fixed10s := backoff.Policy{Strategy: backoff.Fixed, InitialDelay: 10 * s, JitterPercent: 20}
	tests := []struct {
		name           string
		policy         backoff.Policy
		attempt        int
		r              float64
		wantLo, wantHi time.Duration
		want           time.Duration // exact Jittered result; 0 = only check the range and min
		wantAtLeast    time.Duration
	}{
		{name: "r=0 draws the lower bound", policy: fixed10s, attempt: 2, r: 0, wantLo: 8 * s, wantHi: 12 * s, want: 8 * s},
		{name: "r=0.5 draws the nominal delay", policy: fixed10s, attempt: 2, r: 0.5, wantLo: 8 * s, wantHi: 12 * s, want: 10 * s},
		{name: "r=0.75 draws halfway up", policy: fixed10s, attempt: 2, r: 0.75, wantLo: 8 * s, wantHi: 12 * s, want: 11 * s},
		{name: "r just below 1 approaches the upper bound", policy: fixed10s, attempt: 2, r: 0.999999999, wantLo: 8 * s, wantHi: 12 * s, wantAtLeast: 12*s - 10*time.Microsecond},
		{
			name:    "maxDelay clamps the upper bound and the draw",
			policy:  backoff.Policy{Strategy: backoff.Exponential, InitialDelay: 10 * s, FactorMilli: 2000, MaxDelay: 11 * s, JitterPercent: 20},
			attempt: 2, r: 0.999, wantLo: 8 * s, wantHi: 11 * s, want: 11 * s,
		},
		{
			name:    "at the cap jitter only shortens",
			policy:  backoff.Policy{Strategy: backoff.Exponential, InitialDelay: 10 * s, FactorMilli: 2000, MaxDelay: 15 * s, JitterPercent: 20},
			attempt: 5, r: 0, wantLo: 12 * s, wantHi: 15 * s, want: 12 * s,
		},
		{
			name:    "100% jitter reaches down to zero",
			policy:  backoff.Policy{Strategy: backoff.Fixed, InitialDelay: 10 * s, JitterPercent: 100},
			attempt: 3, r: 0, wantLo: 0, wantHi: 20 * s, want: 0,
		},
		{
			name:    "the spread rounds down to the nanosecond",
			policy:  backoff.Policy{Strategy: backoff.Fixed, InitialDelay: 199, JitterPercent: 33},
			attempt: 2, r: 0, wantLo: 199 - 65, wantHi: 199 + 65, want: 199 - 65,
		},
		{
			name:    "jitter applies to the schedule's repeated entry",
			policy:  backoff.Policy{Strategy: backoff.Schedule, Schedule: []time.Duration{s, 10 * s}, JitterPercent: 10},
			attempt: 9, r: 0, wantLo: 9 * s, wantHi: 11 * s, want: 9 * s,
		},
		{
			name:    "r above 1 is clamped to the upper bound",
			policy:  fixed10s,
			attempt: 2, r: 7, wantLo: 8 * s, wantHi: 12 * s, want: 12 * s,
		},
		{
			name:    "NaN counts as 0",
			policy:  fixed10s,
			attempt: 2, r: math.NaN(), wantLo: 8 * s, wantHi: 12 * s, want: 8 * s,
		},
		{
			name:    "jitter at MaxDuration does not overflow",
			policy:  backoff.Policy{Strategy: backoff.Fixed, InitialDelay: math.MaxInt64, JitterPercent: 100},
			attempt: 2, r: 0.999, wantLo: 0, wantHi: backoff.MaxDuration, wantAtLeast: backoff.MaxDuration - backoff.MaxDuration/100,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := tt.policy.DelayBounds(tt.attempt)
			if lo != tt.wantLo || hi != tt.wantHi {
				t.Errorf("DelayBounds(%d) = [%v, %v], want [%v, %v]", tt.attempt, lo, hi, tt.wantLo, tt.wantHi)
			}
			got := tt.policy.Jittered(tt.attempt, func() float64 { return tt.r })
			if got < lo || got > hi {
				t.Errorf("Jittered(%d) = %v, outside [%v, %v]", tt.attempt, got, lo, hi)
			}
			if tt.wantAtLeast == 0 && got != tt.want {
				t.Errorf("Jittered(%d) = %v, want %v", tt.attempt, got, tt.want)
			}
			if got < tt.wantAtLeast {
				t.Errorf("Jittered(%d) = %v, want at least %v", tt.attempt, got, tt.wantAtLeast)
			}
		})
	}
}

func TestJitteredWithoutJitterIgnoresRand(t *testing.T) {
	mustNotCall := func() float64 { t.Fatal("r called without jitter"); return 0 }
	p := backoff.Policy{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: 2000}
	if got := p.Jittered(3, mustNotCall); got != 2*s {
		t.Errorf("Jittered(3) without jitter = %v, want 2s", got)
	}
	p.JitterPercent = 50
	if got := p.Jittered(3, nil); got != 2*s {
		t.Errorf("Jittered(3) with nil r = %v, want the nominal 2s", got)
	}
}
