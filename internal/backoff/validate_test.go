package backoff_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
)

func validExponential() backoff.Policy {
	return backoff.Policy{
		Strategy: backoff.Exponential, InitialDelay: 5 * s, FactorMilli: 2000, MaxDelay: h,
		JitterPercent: 10, MaxAttempts: 10, MaxAge: 24 * h, AttemptTimeout: 30 * s, RetryAfterCap: h,
	}
}

func TestValidateAcceptsValidPolicies(t *testing.T) {
	tests := []struct {
		name   string
		policy backoff.Policy
	}{
		{"exponential with every field set", validExponential()},
		{"linear bounded by attempts only", backoff.Policy{Strategy: backoff.Linear, InitialDelay: s, MaxAttempts: 3}},
		{"fixed bounded by age only", backoff.Policy{Strategy: backoff.Fixed, InitialDelay: s, MaxAge: h}},
		{"schedule without initial delay", backoff.Policy{Strategy: backoff.Schedule, Schedule: []time.Duration{s, m}, MaxAttempts: 3}},
		{"factor at its maximum of 10", backoff.Policy{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: 10_000, MaxAttempts: 3}},
		{"factor just above 1", backoff.Policy{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: 1001, MaxAttempts: 3}},
		{"jitter at 100%", backoff.Policy{Strategy: backoff.Fixed, InitialDelay: s, JitterPercent: 100, MaxAttempts: 3}},
		{"durations beyond MaxDuration", backoff.Policy{Strategy: backoff.Fixed, InitialDelay: math.MaxInt64, MaxAge: math.MaxInt64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.policy.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*backoff.Policy)
		field  string
	}{
		{"an empty strategy", func(p *backoff.Policy) { p.Strategy = "" }, "strategy"},
		{"an unknown strategy", func(p *backoff.Policy) { p.Strategy = "Quadratic" }, "strategy"},
		{"no horizon at all", func(p *backoff.Policy) { p.MaxAttempts, p.MaxAge = 0, 0 }, "maxAttempts"},
		{"negative maxAttempts", func(p *backoff.Policy) { p.MaxAttempts = -1 }, "maxAttempts"},
		{"negative maxAge", func(p *backoff.Policy) { p.MaxAge = -s }, "maxAge"},
		{"strategy Schedule without a schedule", func(p *backoff.Policy) { p.Strategy, p.FactorMilli = backoff.Schedule, 0 }, "schedule"},
		{"a schedule with another strategy", func(p *backoff.Policy) { p.Schedule = []time.Duration{s} }, "schedule"},
		{"a zero schedule entry", func(p *backoff.Policy) {
			p.Strategy, p.FactorMilli, p.Schedule = backoff.Schedule, 0, []time.Duration{s, 0}
		}, "schedule[1]"},
		{"a negative schedule entry", func(p *backoff.Policy) {
			p.Strategy, p.FactorMilli, p.Schedule = backoff.Schedule, 0, []time.Duration{-s}
		}, "schedule[0]"},
		{"zero initialDelay", func(p *backoff.Policy) { p.InitialDelay = 0 }, "initialDelay"},
		{"negative initialDelay for Schedule", func(p *backoff.Policy) {
			p.Strategy, p.FactorMilli, p.Schedule, p.InitialDelay = backoff.Schedule, 0, []time.Duration{s}, -s
		}, "initialDelay"},
		{"exponential without factor", func(p *backoff.Policy) { p.FactorMilli = 0 }, "factor"},
		{"factor of exactly 1", func(p *backoff.Policy) { p.FactorMilli = 1000 }, "factor"},
		{"factor below 1", func(p *backoff.Policy) { p.FactorMilli = 500 }, "factor"},
		{"factor above 10", func(p *backoff.Policy) { p.FactorMilli = 10_001 }, "factor"},
		{"factor with another strategy", func(p *backoff.Policy) { p.Strategy = backoff.Linear }, "factor"},
		{"negative jitter", func(p *backoff.Policy) { p.JitterPercent = -1 }, "jitterPercent"},
		{"jitter above 100", func(p *backoff.Policy) { p.JitterPercent = 101 }, "jitterPercent"},
		{"negative maxDelay", func(p *backoff.Policy) { p.MaxDelay = -s }, "maxDelay"},
		{"negative attemptTimeout", func(p *backoff.Policy) { p.AttemptTimeout = -s }, "attemptTimeout"},
		{"negative retryAfterCap", func(p *backoff.Policy) { p.RetryAfterCap = -s }, "retryAfterCap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validExponential()
			tt.mutate(&p)
			err := p.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want an error naming %s", tt.field)
			}
			if !strings.Contains(err.Error(), tt.field+": ") {
				t.Errorf("Validate() = %q, want it to name %s", err, tt.field)
			}
			var fe *backoff.FieldError
			if !errors.As(err, &fe) {
				t.Errorf("Validate() = %v, want a *FieldError", err)
			}
			if n := len(strings.Split(err.Error(), "\n")); n != 1 {
				t.Errorf("Validate() reported %d errors for one violation: %q", n, err)
			}
		})
	}
}

func TestValidateReportsEveryViolation(t *testing.T) {
	p := backoff.Policy{Strategy: backoff.Linear, FactorMilli: 2000, JitterPercent: 200, MaxAge: -h}
	err := p.Validate()
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *backoff.FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("%v is not a *FieldError", e)
		}
		fields = append(fields, fe.Field)
	}
	want := []string{"initialDelay", "factor", "jitterPercent", "maxAge", "maxAttempts"}
	if strings.Join(fields, ",") != strings.Join(want, ",") {
		t.Errorf("Validate() fields = %v, want %v\n%v", fields, want, err)
	}
}

func TestValidateSkipsStrategyRulesForUnknownStrategy(t *testing.T) {
	p := backoff.Policy{Strategy: "Bogus", FactorMilli: 2000, Schedule: []time.Duration{s}, MaxAttempts: 3}
	err := p.Validate()
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "strategy: ") {
		t.Errorf("Validate() = %q, want only the strategy error", err)
	}
}

func TestParseFactor(t *testing.T) {
	good := []struct {
		in   string
		want int64
	}{
		{"2", 2000}, {"1.5", 1500}, {"1.25", 1250}, {"1.001", 1001}, {"9.999", 9999},
		{"10", 10_000}, {"10.000", 10_000}, {"1.1", 1100}, {"02", 2000}, {"3.50", 3500},
	}
	for _, tt := range good {
		t.Run("accepts "+tt.in, func(t *testing.T) {
			got, err := backoff.ParseFactor(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("ParseFactor(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
	bad := []string{
		"", "1", "1.0", "1.000", "0.5", "0", "10.001", "11", "100", "99999999999999999999999",
		"1e1", "+2", "-2", " 2", "2 ", "2.", ".5", "1.0001", "1,5", "1.5.0", "abc", "NaN", "Inf", "0x2", "١",
	}
	for _, in := range bad {
		t.Run("rejects "+in, func(t *testing.T) {
			got, err := backoff.ParseFactor(in)
			var fe *backoff.FieldError
			if err == nil || !errors.As(err, &fe) || fe.Field != "factor" {
				t.Errorf("ParseFactor(%q) = %d, %v; want a factor error", in, got, err)
			}
		})
	}
}

// Every factor ParseFactor accepts is one Validate accepts, and every
// three-decimal value in (1, 10] parses.
func TestParseFactorCoversTheValidRange(t *testing.T) {
	for milli := int64(1001); milli <= 10_000; milli++ {
		in := fmt.Sprintf("%d.%03d", milli/1000, milli%1000)
		got, err := backoff.ParseFactor(in)
		if err != nil || got != milli {
			t.Fatalf("ParseFactor(%q) = %d, %v; want %d", in, got, err, milli)
		}
		p := backoff.Policy{Strategy: backoff.Exponential, InitialDelay: s, FactorMilli: got, MaxAttempts: 2}
		if err := p.Validate(); err != nil {
			t.Fatalf("factor %q: Validate() = %v", in, err)
		}
	}
}
