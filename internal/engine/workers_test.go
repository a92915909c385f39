package engine

import "testing"

// TestWorkersWakeTheClaimLoopOnAnyFreedSlot: a claim loop that found no
// free worker is woken by the next slot freed, by whichever path frees it
// (an answered attempt, an unused hand-off slot, a delivery released before
// it started: all call free), once; a slot freed while it does not wait
// wakes nobody.
func TestWorkersWakeTheClaimLoopOnAnyFreedSlot(t *testing.T) {
	wakes := 0
	w := newWorkers(2, func() { wakes++ })
	all := func() int { return w.idle() }

	if got := w.reserveOrWake(all); got != 2 {
		t.Fatalf("reserveOrWake with two free = %d, want 2", got)
	}
	w.free(1)
	if wakes != 0 {
		t.Fatalf("a slot freed while the loop was not waiting woke it (%d wakes)", wakes)
	}
	if got := w.reserve(1); got != 1 {
		t.Fatalf("reserve of the freed slot = %d, want 1", got)
	}

	if got := w.reserveOrWake(all); got != 0 {
		t.Fatalf("reserveOrWake with none free = %d, want 0", got)
	}
	w.free(1)
	if wakes != 1 {
		t.Fatalf("the first slot freed while the loop waited woke it %d times, want 1", wakes)
	}
	w.free(1)
	if wakes != 1 {
		t.Fatalf("a second slot freed woke the loop again (%d wakes): one wake is enough", wakes)
	}

	// A slot freed between the loop's two looks is found by the second.
	if got := w.reserve(2); got != 2 {
		t.Fatalf("reserve of both = %d", got)
	}
	looks := 0
	got := w.reserveOrWake(func() int {
		looks++
		if looks == 1 {
			w.free(1) // freed after the first look, before waiting is set
			return 0
		}
		return w.idle()
	})
	if got != 1 {
		t.Fatalf("reserveOrWake with a slot freed between its looks = %d, want 1", got)
	}
	w.free(1)
	if wakes != 1 {
		t.Fatalf("a loop that found its slot was woken again (%d wakes)", wakes)
	}
}
