package backoff

import (
	"math"
	"testing"
	"time"
)

func TestSatArithmetic(t *testing.T) {
	tests := []struct {
		name      string
		got, want int64
	}{
		{"add below the limit", satAdd(2, 3), 5},
		{"add saturates", satAdd(math.MaxInt64-1, 2), saturated},
		{"mul below the limit", satMul(6, 7), 42},
		{"mul by zero stays zero even with a saturated operand", satMul(0, saturated), 0},
		{"mul saturates", satMul(1<<32, 1<<32), saturated},
		{"tri of zero and negatives is zero", tri(0) + tri(-5), 0},
		{"tri of odd k", tri(5), 15},
		{"tri of even k", tri(6), 21},
		{"tri of MaxInt64 saturates without overflowing k+1", tri(math.MaxInt64), saturated},
		{"spread is floor(d*j/100)", int64(spread(199, 33)), 199 * 33 / 100},
		{"spread of MaxDuration at 100% does not overflow", int64(spread(MaxDuration, 100)), int64(MaxDuration)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %d, want %d", tt.got, tt.want)
			}
		})
	}
}

func TestFloorSum100MatchesBruteForce(t *testing.T) {
	for _, a := range []int64{0, 1, 37, 99, 100, 101, 4950, 9900} {
		var brute int64
		for k := int64(0); k <= 1000; k++ {
			if k > 0 {
				brute += a * k / 100
			}
			if got := floorSum100(a, k); got != brute {
				t.Fatalf("floorSum100(%d, %d) = %d, want %d", a, k, got, brute)
			}
		}
	}
	if got := floorSum100(9900, math.MaxInt64); got != saturated {
		t.Errorf("floorSum100(9900, MaxInt64) = %d, want saturated", got)
	}
}

// The closed forms behind Plan must equal summing Delay and DelayBounds one
// attempt at a time, including the floor rounding of the jitter spread.
func TestSeriesSumsMatchIteration(t *testing.T) {
	var policies []Policy
	for _, j := range []int32{0, 7, 33, 100} {
		for _, maxDelay := range []time.Duration{0, 1000, 12345} {
			for _, initial := range []time.Duration{1, 99, 137, time.Second + 37} {
				policies = append(policies,
					Policy{Strategy: Linear, InitialDelay: initial, MaxDelay: maxDelay, JitterPercent: j},
					Policy{Strategy: Fixed, InitialDelay: initial, MaxDelay: maxDelay, JitterPercent: j},
					Policy{Strategy: Exponential, InitialDelay: initial, FactorMilli: 1337, MaxDelay: maxDelay, JitterPercent: j},
				)
			}
			policies = append(policies, Policy{Strategy: Schedule, Schedule: []time.Duration{5000, 3, 777}, MaxDelay: maxDelay, JitterPercent: j})
		}
	}
	for _, p := range policies {
		s := p.series()
		var nominal, upper int64
		for k := int64(0); k <= 2500; k++ {
			if k > 0 {
				_, hi := p.DelayBounds(int(k) + 1)
				nominal = satAdd(nominal, int64(p.Delay(int(k)+1)))
				upper = satAdd(upper, int64(hi))
			}
			if got := s.nominal(k); got != nominal {
				t.Fatalf("%+v: nominal(%d) = %d, want %d", p, k, got, nominal)
			}
			if got := s.upper(k); got != upper {
				t.Fatalf("%+v: upper(%d) = %d, want %d", p, k, got, upper)
			}
		}
	}
}
