package main

import (
	"testing"
	"time"
)

func TestSpreadOf(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want spread
	}{
		{nil, spread{}},
		{[]float64{2}, spread{2, 2, 2}},
		{[]float64{3, 1, 2}, spread{2, 1, 3}},
		{[]float64{4, 1, 3, 2}, spread{2.5, 1, 4}},
	} {
		if got := spreadOf(c.xs); got != c.want {
			t.Errorf("spreadOf(%v) = %+v, want %+v", c.xs, got, c.want)
		}
	}
}

func TestSpreadFormat(t *testing.T) {
	s := spread{1.25, 1, 2}
	if got := s.format("%.2f×", 1); got != "1.25×" {
		t.Errorf("one round: %q", got)
	}
	if got := s.format("%.2f×", 3); got != "1.25× (1.00×–2.00×)" {
		t.Errorf("three rounds: %q", got)
	}
}

// TestRelayBracketsTheRound: a round's ratios are taken against the mean
// of the relay before its stores and the one after them (the next round's,
// or the closing run), and against its own relay alone when none followed.
func TestRelayBracketsTheRound(t *testing.T) {
	relay := func(rate float64, at500, at1000 time.Duration) costRound {
		return costRound{relay: costRun{delivered: rate}, relay500: costRun{engineCPU: at500}, relay1000: costRun{engineCPU: at1000}}
	}
	closing := relay(14000, 300*time.Microsecond, 260*time.Microsecond)
	r := relay(10000, 200*time.Microsecond, 240*time.Microsecond)
	if got := r.relayRate(); got != 10000 {
		t.Errorf("alone: relayRate = %v, want 10000", got)
	}
	if got := r.relayCPU(500); got != 200*time.Microsecond {
		t.Errorf("alone: relayCPU(500) = %v, want 200µs", got)
	}
	r.next = &closing
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"saturation", r.relayRate(), 12000},
		{"500/s", float64(r.relayCPU(500)), float64(250 * time.Microsecond)},
		{"1000/s", float64(r.relayCPU(1000)), float64(250 * time.Microsecond)},
	} {
		if c.got != c.want {
			t.Errorf("bracketed %s = %v, want %v", c.name, c.got, c.want)
		}
	}
}
