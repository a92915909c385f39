package engine

import (
	"testing"
	"time"
)

func TestDeferralLogStreaks(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var l deferralLog
	if n, _, _ := l.streak("ns/a"); n != 0 {
		t.Fatalf("no deferral: count %d", n)
	}
	for _, d := range []time.Duration{0, 30 * time.Second, 2*time.Minute + 30*time.Second} { // each within the window of the last
		l.note("ns/a", t0.Add(d))
	}
	l.note("ns/b", t0)
	if n, first, last := l.streak("ns/a"); n != 3 || !first.Equal(t0) || !last.Equal(t0.Add(150*time.Second)) {
		t.Errorf("streak = %d %v %v", n, first, last)
	}
	// A gap longer than the window starts a new streak.
	later := t0.Add(150*time.Second + BudgetDeferralWindow + time.Second)
	l.note("ns/a", later)
	if n, first, _ := l.streak("ns/a"); n != 1 || !first.Equal(later) {
		t.Errorf("after a gap: %d from %v, want 1 from %v", n, first, later)
	}
	if n, _, _ := l.streak("ns/b"); n != 1 {
		t.Errorf("ns/b = %d, want its own 1", n)
	}
}
