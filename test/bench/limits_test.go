package main

import (
	"testing"
	"time"
)

func TestBusiestWindow(t *testing.T) {
	ms := func(xs ...int) []int64 {
		out := make([]int64, len(xs))
		for i, x := range xs {
			out[i] = int64(x) * int64(time.Millisecond)
		}
		return out
	}
	for _, c := range []struct {
		name     string
		arrivals []int64
		most     int
		from     int64
	}{
		{"none", nil, 0, 0},
		{"one", ms(5), 1, ms(5)[0]},
		// A window is [t, t+1s): an arrival exactly 1 s later is in the next.
		{"a second apart", ms(0, 1000, 2000), 1, 0},
		{"just inside", ms(0, 999, 2000), 2, 0},
		// The busiest window straddles clock seconds: 2 in [0,1s), 2 in
		// [1s,2s), 4 in [600ms, 1.6s).
		{"across clock seconds", ms(100, 600, 900, 1100, 1500, 2700), 4, ms(600)[0]},
		{"later is busier", ms(0, 3000, 3001, 3002, 3999, 4000), 4, ms(3000)[0]},
		{"equal arrivals", ms(10, 10, 10, 1010), 3, ms(10)[0]},
	} {
		most, from := busiestWindow(c.arrivals, time.Second)
		if most != c.most || from != c.from {
			t.Errorf("%s: busiestWindow = %d from %d, want %d from %d", c.name, most, from, c.most, c.from)
		}
	}
}

// TestBusiestWindowEvenlySpaced: sends spaced exactly 1/perSecond apart put
// perSecond in the busiest window, not perSecond+1: the window is half-open.
func TestBusiestWindowEvenlySpaced(t *testing.T) {
	var at []int64
	for i := range 1000 {
		at = append(at, int64(i)*int64(10*time.Millisecond)+int64(time.Microsecond))
	}
	if most, _ := busiestWindow(at, time.Second); most != 100 {
		t.Errorf("10 ms apart: %d in the busiest second, want 100", most)
	}
}

func TestLimitsRunMeets(t *testing.T) {
	for _, c := range []struct {
		busiest, inFlight, requests int
		want                        bool
	}{
		{101, limitsMaxInFlight, 6000, true},
		{102, limitsMaxInFlight, 6000, false},
		{100, limitsMaxInFlight + 1, 6000, false},
		{0, 0, 0, false},
	} {
		r := limitsRun{busiest: c.busiest, mostInFlight: c.inFlight, requests: c.requests}
		if got := r.meets(); got != c.want {
			t.Errorf("busiest %d, in flight %d: meets = %v, want %v", c.busiest, c.inFlight, got, c.want)
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 54321: "54,321", 1234567: "1,234,567", -1200: "-1,200"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestLimitsRunReachedRate(t *testing.T) {
	// The ceiling is 100/1.03 = 97.09/s; 90% of it 87.38/s.
	for rate, want := range map[float64]bool{99.5: true, 90: true, 87.5: true, 87.3: false, 21: false} {
		r := limitsRun{meanRate: rate}
		if got := r.reachedRate(); got != want {
			t.Errorf("mean %.1f/s: reachedRate = %v, want %v", rate, got, want)
		}
	}
}
