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

// newIndexEngine is an engine with what the endpoint index needs, and no
// store: the tests below drive its registry directly.
func newIndexEngine() *Engine {
	return &Engine{
		opts:        Options{Clock: realClock{}, Workers: 8},
		endpoints:   map[string]*endpointState{},
		watched:     map[string]*endpointState{},
		broken:      map[string]*endpointState{},
		timeouts:    durationCounts{},
		ramps:       durationCounts{},
		filtered:    map[string]map[string]*endpointState{},
		overruns:    map[string]*overruns{},
		byNamespace: map[string]map[string]*endpointState{},
		shares:      newFairShares(),
	}
}

// TestEndpointIndexFollowsChanges applies random registrations, breaker
// changes, attempts starting and ending, hand-offs, claims and removals
// to an engine's endpoints and checks after each one that what the rounds
// read (watched, broken, the longest attempt timeout and breaker ramp, the
// free slots, cached or not) is what a walk of every endpoint finds.
func TestEndpointIndexFollowsChanges(t *testing.T) {
	e := newIndexEngine()
	rng := rand.New(rand.NewPCG(26, 5))
	pick := func(vs ...time.Duration) time.Duration { return vs[rng.IntN(len(vs))] }
	versions := map[string]int64{}
	// A breaker closed an hour ago is past every ramp; one closed now
	// ramps, and makes the slots depend on the time.
	closedLongAgo, closedNow := time.Now().Add(-time.Hour), time.Now()
	cacheable := 0          // steps whose count may come from the cache
	var handoffs []*handoff // publishes in progress
	for step := range 5000 {
		id := fmt.Sprintf("shop/ep-%d", rng.IntN(40))
		var op string
		switch r := rng.IntN(16); {
		case r < 5:
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
		case r < 8:
			op = "breaker"
			b := ledger.Breaker{EndpointID: id, Open: rng.IntN(3) == 0}
			if !b.Open {
				switch r := rng.IntN(100); {
				case r < 25:
					b.ClosedAt = &closedLongAgo
				case r < 26: // rare: a ramp voids the cache while it lasts
					b.ClosedAt = &closedNow
				}
			}
			e.setBreaker(b)
		case r < 12:
			op = "attempt"
			e.mu.Lock()
			if st, ok := e.endpoints[id]; ok {
				if st.inFlight > 0 && rng.IntN(2) == 0 {
					e.addInFlightLocked(st, -1)
				} else {
					e.addInFlightLocked(st, 1)
				}
			}
			e.mu.Unlock()
		case r < 13:
			op = "hand-off"
			if n := len(handoffs); n > 0 && rng.IntN(2) == 0 {
				i := rng.IntN(n)
				handoffs[i].end()
				handoffs = slices.Delete(handoffs, i, i+1)
			} else {
				h := &handoff{e: e}
				h.admit(id)
				h.admit(fmt.Sprintf("shop/ep-%d", rng.IntN(40)))
				handoffs = append(handoffs, h)
			}
		case r < 14:
			op = "claim"
			if e.claim != nil {
				e.endClaim()
			} else if rng.IntN(3) == 0 {
				e.beginClaim(1 + rng.IntN(8))
			}
		default:
			op = "remove"
			e.mu.Lock()
			e.forgetLocked(id)
			e.mu.Unlock()
		}
		var watched, broken []string
		var timeout, ramp time.Duration
		for id, st := range e.endpoints {
			if st.cfg.MaxInFlight > 0 || st.breaker.Open || st.breaker.ClosedAt != nil {
				watched = append(watched, id)
			}
			if st.breaker.Open || st.breaker.ClosedAt != nil {
				broken = append(broken, id)
			}
			timeout = max(timeout, attemptTimeout(&st.cfg.Policy))
			ramp = max(ramp, st.cfg.Policy.BreakerPolicyOrDefault().Ramp)
		}
		slices.Sort(watched)
		slices.Sort(broken)
		if got := slices.Sorted(maps.Keys(e.watched)); !slices.Equal(got, watched) {
			t.Fatalf("step %d (%s %s): watched = %v, want %v", step, op, id, got, watched)
		}
		if got := slices.Sorted(maps.Keys(e.broken)); !slices.Equal(got, broken) {
			t.Fatalf("step %d (%s %s): broken = %v, want %v", step, op, id, got, broken)
		}
		// The count as a claim or a hand-off reads it, then afresh.
		e.mu.Lock()
		if !e.rampingLocked() {
			cacheable++
		}
		full, slots := e.endpointSlotsLocked(nil)
		heldFull, heldSlots := e.endpointSlotsLocked(e.claim)
		e.slots.valid = false
		wantFull, wantSlots := e.endpointSlotsLocked(nil)
		e.slots.valid = false
		wantHeldFull, wantHeldSlots := e.endpointSlotsLocked(e.claim)
		e.mu.Unlock()
		if !slices.Equal(slices.Sorted(slices.Values(full)), slices.Sorted(slices.Values(wantFull))) || !maps.Equal(slots, wantSlots) {
			t.Fatalf("step %d (%s %s): slots = %v %v, afresh %v %v", step, op, id, full, slots, wantFull, wantSlots)
		}
		if !slices.Equal(slices.Sorted(slices.Values(heldFull)), slices.Sorted(slices.Values(wantHeldFull))) || !maps.Equal(heldSlots, wantHeldSlots) {
			t.Fatalf("step %d (%s %s): slots held by the claim = %v %v, afresh %v %v", step, op, id, heldFull, heldSlots, wantHeldFull, wantHeldSlots)
		}
		if got := e.timeouts.max(); got != timeout {
			t.Fatalf("step %d (%s %s): longest timeout = %v, want %v", step, op, id, got, timeout)
		}
		if got := e.ramps.max(); got != ramp {
			t.Fatalf("step %d (%s %s): longest ramp = %v, want %v", step, op, id, got, ramp)
		}
	}
	if cacheable < 1000 {
		t.Errorf("%d of 5000 steps could read the cached count, want at least 1000: the test does not exercise the cache", cacheable)
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

// TestHandoffAdmitsWithinTheLimits checks a publish's Lease.Admit one
// endpoint at a time: it leases while a slot is free beyond the attempts
// in flight, the other publishes' reservations and a claim's hold, and
// reserves it until the publish ends.
func TestHandoffAdmitsWithinTheLimits(t *testing.T) {
	e := newIndexEngine()
	e.apply(ledger.Endpoint{ID: "shop/two", Version: 1, MaxInFlight: 2})
	e.apply(ledger.Endpoint{ID: "shop/any", Version: 1})
	e.apply(ledger.Endpoint{ID: "shop/open", Version: 1, MaxInFlight: 5})
	e.setBreaker(ledger.Breaker{EndpointID: "shop/open", Open: true})
	reserved := func(id string) int {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.endpoints[id].reserved
	}
	want := func(step string, got, want bool) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: admitted %v, want %v", step, got, want)
		}
	}

	a, b, c := &handoff{e: e}, &handoff{e: e}, &handoff{e: e}
	want("first publish to a limit of 2", a.admit("shop/two"), true)
	want("the same publish asked again (a retried transaction)", a.admit("shop/two"), true)
	if got := reserved("shop/two"); got != 1 {
		t.Fatalf("asked twice, reserved %d slots, want 1", got)
	}
	want("second publish", b.admit("shop/two"), true)
	want("third publish: both slots reserved", c.admit("shop/two"), false)
	a.end()
	want("third publish once the first ended", c.admit("shop/two"), true)

	e.mu.Lock()
	e.addInFlightLocked(e.endpoints["shop/two"], 1) // b's attempt started
	e.mu.Unlock()
	b.end()
	c.end()
	d := &handoff{e: e}
	want("one in flight, none reserved", d.admit("shop/two"), true)
	want("unlimited endpoint", d.admit("shop/any"), true)
	want("open breaker", d.admit("shop/open"), false)
	want("endpoint not loaded yet", d.admit("shop/new"), true)
	d.end()
	want("after the publish ended", d.admit("shop/any"), false)

	// A claim in progress holds the free slot: hand-offs leave it alone.
	e.beginClaim(10)
	want("during a claim that may take the last slot", (&handoff{e: e}).admit("shop/two"), false)
	e.endClaim()
	for _, id := range []string{"shop/two", "shop/any", "shop/open"} {
		if got := reserved(id); got != 0 {
			t.Errorf("%s: %d slots still reserved after every publish ended", id, got)
		}
	}
}
