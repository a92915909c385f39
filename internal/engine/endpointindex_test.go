package engine

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// TestEndpointIndexFollowsChanges applies random registrations, breaker
// changes and removals to an engine's endpoints and checks after each one
// that what the rounds read (watched, the longest attempt timeout and
// breaker ramp) is what a walk of every endpoint finds.
func TestEndpointIndexFollowsChanges(t *testing.T) {
	e := &Engine{
		opts:      Options{Clock: realClock{}, Workers: 8},
		endpoints: map[string]*endpointState{},
		watched:   map[string]*endpointState{},
		timeouts:  durationCounts{},
		ramps:     durationCounts{},
	}
	rng := rand.New(rand.NewPCG(26, 5))
	pick := func(vs ...time.Duration) time.Duration { return vs[rng.IntN(len(vs))] }
	versions := map[string]int64{}
	closedAt := time.Date(2026, 12, 3, 4, 0, 0, 0, time.UTC)
	for step := range 5000 {
		id := fmt.Sprintf("shop/ep-%d", rng.IntN(40))
		var op string
		switch r := rng.IntN(10); {
		case r < 6:
			op = "register"
			versions[id]++
			ep := ledger.Endpoint{ID: id, Version: versions[id], MaxInFlight: []int{0, 0, 0, 3}[rng.IntN(4)]}
			ep.Policy.Backoff.AttemptTimeout = pick(0, 5*time.Second, 90*time.Second)
			if ramp := pick(0, time.Minute, 10*time.Minute); ramp > 0 {
				bp := ledger.DefaultBreakerPolicy
				bp.Ramp = ramp
				ep.Policy.Breaker = &bp
			}
			e.apply(ep)
		case r < 9:
			op = "breaker"
			b := ledger.Breaker{EndpointID: id, Open: rng.IntN(3) == 0}
			if !b.Open && rng.IntN(2) == 0 {
				b.ClosedAt = &closedAt
			}
			e.setBreaker(b)
		default:
			op = "remove"
			e.mu.Lock()
			e.forgetLocked(id)
			e.mu.Unlock()
		}
		var watched []string
		var timeout, ramp time.Duration
		for id, st := range e.endpoints {
			if st.cfg.MaxInFlight > 0 || st.breaker.Open || st.breaker.ClosedAt != nil {
				watched = append(watched, id)
			}
			timeout = max(timeout, attemptTimeout(&st.cfg.Policy))
			ramp = max(ramp, st.cfg.Policy.BreakerPolicyOrDefault().Ramp)
		}
		slices.Sort(watched)
		if got := slices.Sorted(maps.Keys(e.watched)); !slices.Equal(got, watched) {
			t.Fatalf("step %d (%s %s): watched = %v, want %v", step, op, id, got, watched)
		}
		if got := e.timeouts.max(); got != timeout {
			t.Fatalf("step %d (%s %s): longest timeout = %v, want %v", step, op, id, got, timeout)
		}
		if got := e.ramps.max(); got != ramp {
			t.Fatalf("step %d (%s %s): longest ramp = %v, want %v", step, op, id, got, ramp)
		}
	}
}

func TestDurationCounts(t *testing.T) {
	c := durationCounts{}
	for _, tc := range []struct {
		d     time.Duration
		delta int
		want  time.Duration
	}{
		{time.Second, 1, time.Second},
		{time.Minute, 1, time.Minute},
		{time.Minute, 1, time.Minute},
		{time.Minute, -1, time.Minute}, // one of two left
		{time.Minute, -1, time.Second},
		{time.Second, -1, 0},
	} {
		c.add(tc.d, tc.delta)
		if got := c.max(); got != tc.want {
			t.Fatalf("after add(%v, %d): max = %v, want %v", tc.d, tc.delta, got, tc.want)
		}
	}
	if len(c) != 0 {
		t.Errorf("counts at zero kept: %v", c)
	}
}
