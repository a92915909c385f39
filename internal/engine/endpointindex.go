package engine

import (
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// What every claim round and sweep asks of all the endpoints (whose slots
// are limited, whose probes are due, the longest lease any attempt needs)
// is kept as endpoints change, under Engine.mu, so that an idle round
// costs what is limited or broken instead of what is registered: walking
// 10,000 idle endpoints four times a round was a quarter of an idle
// manager's CPU (issue #26).

// watchedEndpoint reports whether a claim round must count endpoint st:
// it has an in-flight limit, or a breaker that is open (it holds the
// endpoint but for its probes) or closed within its ramp (ClosedAt set
// until refreshBreakers forgets it).
func watchedEndpoint(st *endpointState) bool {
	return st.cfg.MaxInFlight > 0 || st.breaker.Open || st.breaker.ClosedAt != nil
}

// indexLocked files endpoint id, whose configuration or breaker just
// changed, where the rounds look. e.mu is held.
func (e *Engine) indexLocked(id string, st *endpointState) {
	if watchedEndpoint(st) {
		e.watched[id] = st
	} else {
		delete(e.watched, id)
	}
}

// forgetLocked removes endpoint id from the engine and its index. e.mu is
// held.
func (e *Engine) forgetLocked(id string) {
	if st, ok := e.endpoints[id]; ok {
		e.countConfigLocked(&st.cfg, -1)
		delete(e.endpoints, id)
		delete(e.watched, id)
	}
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
