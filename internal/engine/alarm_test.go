package engine

import (
	"testing"
	"time"
)

func TestAlarm(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	rang := func(a *alarm) bool {
		select {
		case <-a.ch:
			return true
		default:
			return false
		}
	}
	type step struct {
		by       time.Duration // announce t0+by; zero: none
		asleep   time.Duration // plan a sleep of this long at t0 first; zero: awake
		wantRing bool
		wantWait time.Duration // the next plan's wait, asked for a second at t0
	}
	for _, tc := range []struct {
		name string
		step
	}{
		{"nothing announced sleeps the whole wait", step{wantWait: time.Second}},
		{"due announced while awake cuts the next sleep", step{by: 200 * time.Millisecond, wantWait: 200 * time.Millisecond}},
		{"past due announced while awake skips the next sleep", step{by: -time.Millisecond, wantWait: 0}},
		{"due after the wait announced while awake keeps it", step{by: 2 * time.Second, wantWait: time.Second}},
		{"due before the sleep's end rings", step{asleep: time.Second, by: 200 * time.Millisecond, wantRing: true, wantWait: 200 * time.Millisecond}},
		{"due after the sleep's end does not ring", step{asleep: time.Second, by: 2 * time.Second, wantWait: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAlarm()
			if tc.asleep > 0 {
				if got := a.plan(t0, tc.asleep); got != tc.asleep {
					t.Fatalf("plan with nothing announced = %v, want %v", got, tc.asleep)
				}
			}
			if tc.by != 0 {
				a.by(t0.Add(tc.by))
			}
			if got := rang(a); got != tc.wantRing {
				t.Errorf("rang = %v, want %v", got, tc.wantRing)
			}
			a.woke()
			if got := a.plan(t0, time.Second); got != tc.wantWait {
				t.Errorf("next plan's wait = %v, want %v", got, tc.wantWait)
			}
			a.woke()
			if got := a.plan(t0, time.Second); got != time.Second {
				t.Errorf("a due time cut a second sleep too: wait %v, want 1s", got)
			}
		})
	}
}

// TestAlarmNeverMissesADueTime races announcements against the loop's
// plan: whichever comes first, a due time before the planned sleep's end
// either rings or cuts the sleep.
func TestAlarmNeverMissesADueTime(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	due := t0.Add(100 * time.Millisecond)
	for range 2000 {
		a := newAlarm()
		done := make(chan struct{})
		go func() {
			defer close(done)
			a.by(due)
		}()
		wait := a.plan(t0, time.Second)
		<-done
		select {
		case <-a.ch:
		default:
			if wait > 100*time.Millisecond {
				t.Fatalf("due time missed: neither rang nor cut the sleep (wait %v)", wait)
			}
		}
	}
}
