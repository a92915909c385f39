package engine

import (
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// What every claim round and sweep asks of all the endpoints (their free
// slots, whose probes are due, the longest lease any attempt needs) is
// kept as endpoints change, under Engine.mu, so that an idle round costs
// what changed or is broken instead of what is registered: walking
// 10,000 idle endpoints five times a round and a sweep was half of an
// idle manager's CPU (issue #26).

// watchedEndpoint reports whether a claim round must count endpoint st:
// it has an in-flight limit, or a breaker that is open (it holds the
// endpoint but for its probes) or closed within its ramp (ClosedAt set
// until refreshBreakers forgets it).
func watchedEndpoint(st *endpointState) bool {
	return st.cfg.MaxInFlight > 0 || st.cfg.RateLimit.PerSecond > 0 || brokenEndpoint(st)
}

// brokenEndpoint reports whether endpoint st's breaker holds it (open) or
// ramps it up (closed lately): probes, the breaker sweep and the ramp's
// slots look at these alone.
func brokenEndpoint(st *endpointState) bool {
	return st.breaker.Open || st.breaker.ClosedAt != nil
}

// indexLocked files endpoint id, whose configuration or breaker just
// changed, where the rounds look, and voids the slot count. e.mu is held.
func (e *Engine) indexLocked(id string, st *endpointState) {
	file := func(m map[string]*endpointState, in bool) {
		if in {
			m[id] = st
		} else {
			delete(m, id)
		}
	}
	file(e.watched, watchedEndpoint(st))
	file(e.broken, brokenEndpoint(st))
	e.fileFilterLocked(id, st)
	m := e.byNamespace[st.cfg.Namespace]
	if m == nil {
		m = map[string]*endpointState{}
		e.byNamespace[st.cfg.Namespace] = m
	}
	m[id] = st
	e.slots.gen++
}

// forgetLocked removes endpoint id from the engine and its index. e.mu is
// held.
func (e *Engine) forgetLocked(id string) {
	if st, ok := e.endpoints[id]; ok {
		e.countConfigLocked(&st.cfg, -1)
		delete(e.endpoints, id)
		delete(e.watched, id)
		delete(e.broken, id)
		e.unfileFilterLocked(id, st.cfg.Namespace)
		if m := e.byNamespace[st.cfg.Namespace]; m != nil {
			if delete(m, id); len(m) == 0 {
				delete(e.byNamespace, st.cfg.Namespace)
			}
		}
		e.slots.gen++
	}
}

// addInFlightLocked counts delta more attempts in flight to st, which
// voids the slot count. e.mu is held.
func (e *Engine) addInFlightLocked(st *endpointState, delta int) {
	e.holdLocked(st, delta)
	st.inFlight += delta
	e.slots.gen++
}

// reserveLocked counts delta more slots of st reserved by publishes
// handing off (handoff.go), which voids the slot count. e.mu is held.
func (e *Engine) reserveLocked(st *endpointState, delta int) {
	e.holdLocked(st, delta)
	st.reserved += delta
	e.slots.gen++
}

// countConfigLocked adds (delta 1) or removes (-1) a configuration's
// attempt timeout and breaker ramp from the counts leaseFor and
// longestRamp read. e.mu is held.
func (e *Engine) countConfigLocked(ep *ledger.Endpoint, delta int) {
	e.timeouts.add(attemptTimeout(&ep.Policy), delta)
	e.ramps.add(ep.Policy.BreakerPolicyOrDefault().Ramp, delta)
}

// durationCounts is a multiset of durations that knows its largest: the
// endpoints' configurations share a handful of distinct values, so the
// largest is found among those, not among the endpoints.
type durationCounts map[time.Duration]int

// add counts d delta more times; a count that reaches zero is dropped.
func (c durationCounts) add(d time.Duration, delta int) {
	if n := c[d] + delta; n > 0 {
		c[d] = n
	} else {
		delete(c, d)
	}
}

// max is the largest duration counted, 0 when none is.
func (c durationCounts) max() time.Duration {
	var m time.Duration
	for d := range c {
		m = max(m, d)
	}
	return m
}

// slotCache is endpointSlotsLocked's last count made with nothing held:
// valid while at equals gen, which every change of an endpoint's
// configuration, breaker or in-flight count bumps. Its map and slice are
// shared with their readers, and never changed: a new count makes new ones.
type slotCache struct {
	gen, at uint64
	valid   bool
	full    []string
	slots   map[string]int
}

// claimHold is what a claim in progress may take of each limited
// endpoint's free slots (the lesser of its free slots and the claim's
// limit): hand-offs leave those to it (handoff.go).
type claimHold struct {
	slots map[string]int
	limit int
}

// take is what the claim may take of endpoint id's slots; 0 without a claim.
func (h *claimHold) take(id string) int {
	if h == nil {
		return 0
	}
	if free, ok := h.slots[id]; ok {
		return min(free, h.limit)
	}
	return 0
}

// rampingLocked reports whether a breaker of some endpoint is ramping up
// after closing, which makes its slots depend on the time. e.mu is held.
func (e *Engine) rampingLocked() bool {
	now := e.opts.Clock.Now()
	for _, st := range e.broken {
		if at := st.breaker.ClosedAt; at != nil && now.Sub(*at) < st.cfg.Policy.BreakerPolicyOrDefault().Ramp {
			return true
		}
	}
	return false
}
