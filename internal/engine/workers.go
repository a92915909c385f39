package engine

import "sync/atomic"

// workers holds a slot per attempt sending (Options.Workers). A claim that
// finds none free is woken by the next slot freed, whatever frees it: an
// attempt answered, a hand-off that leased nothing, a delivery released
// before its attempt started. (Waking only when an answered attempt found
// every slot taken missed the others, and the claim loop slept its idle
// wait with work due.)
type workers struct {
	sem chan struct{}
	// waiting is set while the claim loop waits for a free slot.
	waiting atomic.Bool
	wake    func()
}

func newWorkers(n int, wake func()) *workers {
	return &workers{sem: make(chan struct{}, n), wake: wake}
}

// idle returns how many slots are free.
func (w *workers) idle() int { return cap(w.sem) - len(w.sem) }

// reserve takes up to n free slots without waiting and returns how many it
// took.
func (w *workers) reserve(n int) int {
	for i := range n {
		select {
		case w.sem <- struct{}{}:
		default:
			return i
		}
	}
	return n
}

// reserveOrWake is reserve(want()) for the claim loop: when it takes none,
// the next slot freed wakes the loop.
func (w *workers) reserveOrWake(want func() int) int {
	if n := w.reserve(want()); n > 0 {
		return n
	}
	w.waiting.Store(true)
	// waiting is written before the second look, and free frees before it
	// reads waiting: a slot freed meanwhile is either found here or wakes
	// the loop.
	n := w.reserve(want())
	if n > 0 {
		w.waiting.Store(false)
	}
	return n
}

// free returns n reserved slots, waking the claim loop if it waits for one.
func (w *workers) free(n int) {
	for range n {
		<-w.sem
	}
	if n > 0 && w.waiting.CompareAndSwap(true, false) {
		w.wake()
	}
}
