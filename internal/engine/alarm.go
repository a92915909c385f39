package engine

import (
	"math"
	"sync/atomic"
	"time"
)

// alarm is how the claim loop sleeps without missing work. A ring makes
// it look now. A due time announced while it sleeps wakes it if it plans
// to sleep past that time; one announced while it is awake (between its
// look at the ledger and its sleep, when the look may have missed the
// commit that announced it) shortens its next sleep.
type alarm struct {
	ch chan struct{}
	// sleepUntil is when the sleeping loop plans to look again (unix
	// nanoseconds); 0 while it is awake.
	sleepUntil atomic.Int64
	// earliest is the earliest due time announced since the loop last
	// planned a sleep; math.MaxInt64 when none was.
	earliest atomic.Int64
}

func newAlarm() *alarm {
	a := &alarm{ch: make(chan struct{}, 1)}
	a.earliest.Store(math.MaxInt64)
	return a
}

// ring makes the loop look now, or as soon as it is done looking.
func (a *alarm) ring() {
	select {
	case a.ch <- struct{}{}:
	default:
	}
}

// by makes the loop look again by t.
func (a *alarm) by(t time.Time) {
	n := t.UnixNano()
	for {
		cur := a.earliest.Load()
		if n >= cur || a.earliest.CompareAndSwap(cur, n) {
			break
		}
	}
	// earliest is written before sleepUntil is read, and plan writes
	// sleepUntil before it takes earliest: either plan sees t, or this
	// sees the sleep planned past it.
	if n < a.sleepUntil.Load() {
		a.ring()
	}
}

// plan is called by the loop before it sleeps for wait: it returns wait
// cut to the earliest due time announced since the last plan (zero when
// that is due already). Call woke after the sleep.
func (a *alarm) plan(now time.Time, wait time.Duration) time.Duration {
	a.sleepUntil.Store(now.Add(wait).UnixNano())
	if t := a.earliest.Swap(math.MaxInt64); t != math.MaxInt64 {
		wait = min(wait, max(time.Duration(t-now.UnixNano()), 0))
		a.sleepUntil.Store(now.Add(wait).UnixNano())
	}
	return wait
}

// woke is called by the loop when it stops sleeping.
func (a *alarm) woke() { a.sleepUntil.Store(0) }
