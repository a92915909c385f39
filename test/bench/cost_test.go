package main

import "testing"

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
