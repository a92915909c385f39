package backoff_test

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
)

var fuzzStrategies = []backoff.Strategy{backoff.Exponential, backoff.Linear, backoff.Fixed, backoff.Schedule, "Bogus"}

type fuzzArgs struct {
	strategy                 uint8
	initial, factor, maxDel  int64
	s0, s1, s2               int64
	nSched                   uint8
	jitter, maxAttempts      int32
	maxAge, timeout, raCap   int64
	attempt, elapsed, rAfter int64
	r                        float64
}

func (a fuzzArgs) policy() backoff.Policy {
	return backoff.Policy{
		Strategy:       fuzzStrategies[int(a.strategy)%len(fuzzStrategies)],
		InitialDelay:   time.Duration(a.initial),
		FactorMilli:    a.factor,
		MaxDelay:       time.Duration(a.maxDel),
		Schedule:       []time.Duration{time.Duration(a.s0), time.Duration(a.s1), time.Duration(a.s2)}[:a.nSched%4],
		JitterPercent:  a.jitter,
		MaxAttempts:    a.maxAttempts,
		MaxAge:         time.Duration(a.maxAge),
		AttemptTimeout: time.Duration(a.timeout),
		RetryAfterCap:  time.Duration(a.raCap),
	}
}

func FuzzPolicy(f *testing.F) {
	for _, a := range []fuzzArgs{
		// strategy, initial, factor, maxDelay, s0, s1, s2, nSched, jitter, maxAttempts, maxAge, timeout, raCap, attempt, elapsed, retryAfter, r
		{0, int64(5 * s), 2000, int64(h), 0, 0, 0, 0, 10, 10, 0, int64(30 * s), int64(h), 3, int64(m), 0, 0.3},
		{0, 1, 1001, 0, 0, 0, 0, 0, 100, 0, int64(backoff.MaxDuration), int64(15 * m), 0, math.MaxInt64, 0, 0, 0.99},
		{0, math.MaxInt64, 10_000, math.MaxInt64, 0, 0, 0, 0, 100, math.MaxInt32, math.MaxInt64, math.MaxInt64, math.MaxInt64, 1, math.MaxInt64, math.MaxInt64, 0.5},
		{1, int64(10 * s), 0, int64(m), 0, 0, 0, 0, 33, 1000, int64(24 * h), int64(s), int64(h), 7, int64(h), int64(2 * h), 0},
		{1, 1, 0, 0, 0, 0, 0, 0, 7, math.MaxInt32, 0, 0, 0, 1 << 40, 0, 0, 0.1},
		{1, 137, 0, 12345, 0, 0, 0, 0, 99, 0, int64(h), 0, 0, 2, 0, 0, 0.7},
		{2, int64(s), 0, 0, 0, 0, 0, 0, 0, 0, int64(30 * 24 * h), int64(30 * s), int64(h), 100, int64(h), int64(m), 0.5},
		{2, int64(m), 0, int64(30 * s), 0, 0, 0, 0, 50, 3, int64(h), int64(10 * s), 0, 2, 0, 0, 0.999999},
		{3, 0, 0, 0, int64(5 * s), int64(5 * m), int64(30 * m), 3, 10, 0, int64(24 * h), int64(30 * s), int64(h), 4, int64(h), int64(2 * h), 0.25},
		{3, 0, 0, 0, int64(h), 1, math.MaxInt64, 3, 20, 50, 0, 0, 0, 2, 0, 0, 0},
		{4, int64(s), 2000, 0, 0, 0, 0, 0, 10, 5, 0, 0, 0, 1, 0, 0, 0.5},           // unknown strategy
		{0, -1, -1, -1, -1, -1, -1, 2, -1, -1, -1, -1, -1, -1, -1, -1, math.NaN()}, // everything invalid
		// Crasher: Plan indexed an empty prefix-sum slice for strategy Schedule without entries.
		{'S', 4999999915, 2000, int64(h), 0, -43, 0, 0, -21, 'N', 0, 29999999974, int64(h), 22, int64(m), 5, -94.7},
	} {
		f.Add(a.strategy, a.initial, a.factor, a.maxDel, a.s0, a.s1, a.s2, a.nSched, a.jitter, a.maxAttempts,
			a.maxAge, a.timeout, a.raCap, a.attempt, a.elapsed, a.rAfter, a.r)
	}
	f.Fuzz(func(t *testing.T, strategy uint8, initial, factor, maxDel, s0, s1, s2 int64, nSched uint8,
		jitter, maxAttempts int32, maxAge, timeout, raCap, attempt, elapsed, rAfter int64, r float64) {
		a := fuzzArgs{strategy, initial, factor, maxDel, s0, s1, s2, nSched, jitter, maxAttempts, maxAge, timeout, raCap, attempt, elapsed, rAfter, r}
		p := a.policy()
		valid := p.Validate() == nil

		// Every policy, valid or not: no panic, and delays inside their bounds.
		probes := []int{int(a.attempt), 2, 3, 50}
		for _, n := range probes {
			checkBounds(t, p, n, []float64{0, 0.5, 0.9999999, a.r})
		}
		next := p.Next(backoff.Input{
			Attempt: int(a.attempt), FirstAttemptAt: t0, Now: t0.Add(time.Duration(a.elapsed)),
			RetryAfter: time.Duration(a.rAfter), Rand: func() float64 { return a.r },
		})
		checkDecision(t, p, a, next)
		plan := p.Plan(25)
		if !valid {
			return
		}

		capped := p.Strategy != backoff.Schedule
		prev := time.Duration(0)
		for n := 1; n <= 64; n++ {
			d := p.Delay(n)
			if d < 0 || d > backoff.MaxDuration || (p.MaxDelay > 0 && d > p.MaxDelay) {
				t.Fatalf("Delay(%d) = %v out of range", n, d)
			}
			if capped && d < prev {
				t.Fatalf("%s Delay(%d) = %v < Delay(%d) = %v", p.Strategy, n, d, n-1, prev)
			}
			prev = d
			checkBounds(t, p, n, []float64{a.r})
		}
		checkPlan(t, p, plan)
	})
}

func checkBounds(t *testing.T, p backoff.Policy, n int, rs []float64) {
	t.Helper()
	d := p.Delay(n)
	lo, hi := p.DelayBounds(n)
	if lo < 0 || lo > d || d > hi || hi > backoff.MaxDuration || (p.MaxDelay > 0 && hi > p.MaxDelay) {
		t.Fatalf("attempt %d: Delay %v, DelayBounds [%v, %v]", n, d, lo, hi)
	}
	for _, r := range rs {
		if j := p.Jittered(n, func() float64 { return r }); j < lo || j > hi {
			t.Fatalf("attempt %d: Jittered(r=%v) = %v outside [%v, %v]", n, r, j, lo, hi)
		}
	}
}

func checkDecision(t *testing.T, p backoff.Policy, a fuzzArgs, d backoff.Decision) {
	t.Helper()
	now := t0.Add(time.Duration(a.elapsed))
	if !d.Retry {
		if d.Reason == "" || !d.At.IsZero() || d.Delay != 0 {
			t.Fatalf("exhausted decision %+v", d)
		}
		return
	}
	if d.Reason != "" || d.Delay < 0 || d.Delay > backoff.MaxDuration || !d.At.Equal(now.Add(d.Delay)) {
		t.Fatalf("retry decision %+v at %v", d, now)
	}
	if lo, _ := p.DelayBounds(int(max(a.attempt, 1)) + 1); a.attempt < math.MaxInt64 && d.Delay < lo {
		t.Fatalf("retry delay %v below the jitter lower bound %v", d.Delay, lo)
	}
	if a.rAfter > 0 && p.RetryAfterCap > 0 && d.Delay < min(time.Duration(a.rAfter), p.RetryAfterCap, backoff.MaxDuration) {
		t.Fatalf("retry delay %v shorter than the honoured Retry-After", d.Delay)
	}
}

func checkPlan(t *testing.T, p backoff.Policy, plan backoff.Plan) {
	t.Helper()
	maxAge := min(p.MaxAge, backoff.MaxDuration)
	n := len(plan.Offsets)
	switch {
	case plan.Attempts < 1 || (p.MaxAttempts > 0 && plan.Attempts > int64(p.MaxAttempts)):
		t.Fatalf("Attempts = %d", plan.Attempts)
	case n == 0 || plan.Offsets[0] != 0 || int64(n) != min(25, plan.Attempts) || plan.Truncated != (int64(n) < plan.Attempts):
		t.Fatalf("Plan = %+v", plan)
	case plan.Horizon < plan.Offsets[n-1] || (!plan.Truncated && plan.Horizon != plan.Offsets[n-1]):
		t.Fatalf("Horizon %v vs offsets %v", plan.Horizon, plan.Offsets)
	case maxAge > 0 && plan.Horizon > maxAge:
		t.Fatalf("Horizon %v beyond maxAge %v", plan.Horizon, maxAge)
	case plan.WorstCase < plan.Horizon || plan.WorstCase > backoff.MaxDuration:
		t.Fatalf("WorstCase %v, Horizon %v", plan.WorstCase, plan.Horizon)
	case maxAge > 0 && plan.WorstCase > maxAge+min(p.AttemptTimeout, backoff.MaxDuration):
		t.Fatalf("WorstCase %v beyond maxAge + attemptTimeout", plan.WorstCase)
	}
	for i := 1; i < n; i++ {
		step := plan.Offsets[i] - plan.Offsets[i-1]
		if step < 0 || (plan.Offsets[i] < backoff.MaxDuration && step != p.Delay(i+1)) {
			t.Fatalf("Offsets %v: step %d is %v, Delay(%d) = %v", plan.Offsets, i, step, i+1, p.Delay(i+1))
		}
	}

	// Small plans: Next must walk the same timeline, and the worst case must
	// match summing the bounds one by one.
	if plan.Attempts <= 300 && plan.Horizon < backoff.MaxDuration {
		now, attempts := t0, int64(1)
		for ; ; attempts++ {
			if d := p.Next(backoff.Input{Attempt: int(attempts), FirstAttemptAt: t0, Now: now}); d.Retry {
				now = d.At
			} else {
				break
			}
		}
		if attempts != plan.Attempts || now.Sub(t0) != plan.Horizon {
			t.Fatalf("Next made %d attempts over %v; Plan says %d over %v", attempts, now.Sub(t0), plan.Attempts, plan.Horizon)
		}
	}
	if p.MaxAttempts > 0 && p.MaxAttempts <= 300 {
		timeout := big.NewInt(int64(min(p.AttemptTimeout, backoff.MaxDuration)))
		worst := new(big.Int).Mul(big.NewInt(int64(p.MaxAttempts)), timeout)
		for i := 2; i <= int(p.MaxAttempts); i++ {
			_, hi := p.DelayBounds(i)
			worst.Add(worst, big.NewInt(int64(hi)))
		}
		if maxAge > 0 {
			if bound := new(big.Int).Add(big.NewInt(int64(maxAge)), timeout); bound.Cmp(worst) < 0 {
				worst = bound
			}
		}
		if ceiling := big.NewInt(int64(backoff.MaxDuration)); ceiling.Cmp(worst) < 0 {
			worst = ceiling
		}
		if worst.Int64() != int64(plan.WorstCase) {
			t.Fatalf("WorstCase = %v, summing the bounds gives %v", plan.WorstCase, time.Duration(worst.Int64()))
		}
	}
}
