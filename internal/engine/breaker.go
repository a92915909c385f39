package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The circuit breaker (docs/adr/0033). Its state lives in the ledger
// (ledger.Breakers) so that every engine holds and probes an endpoint
// alike; each engine keeps a copy, refreshed every sweep, and its own
// streak of failures. The decisions are the pure functions below.

// signal is what one attempt says about its receiver.
type signal int

const (
	// neutral: the receiver answered, but not about itself (a 4xx about
	// the event, a 429 asking to slow down): the streak neither grows nor
	// ends.
	neutral signal = iota
	// up: a 2xx.
	up
	// down: no answer (network error, timeout) or a 5xx.
	down
	// gone: 410, a statement about the URL.
	gone
)

// signalOf classifies an attempt's result for the breaker.
func signalOf(res *dispatch.Result) signal {
	switch {
	case res.Class == dispatch.Canceled, res.Class == dispatch.InvalidRequest, res.Class == dispatch.ForbiddenDestination:
		return neutral // nothing was learnt about the receiver
	case res.StatusCode == 0:
		return down
	case res.StatusCode == 410:
		return gone
	case res.StatusCode >= 500:
		return down
	case res.StatusCode >= 200 && res.StatusCode <= 299:
		return up
	}
	return neutral
}

// streak is one engine's run of failed attempts to an endpoint.
type streak struct {
	failures int
	since    time.Time // the first failure of the run
	last     string    // the last failure, described
}

// observe returns the streak after an attempt at now with signal s.
func (k streak) observe(s signal, now time.Time, failure string) streak {
	switch s {
	case up:
		return streak{}
	case down:
		if k.failures == 0 {
			k.since = now
		}
		k.failures++
		k.last = failure
	}
	return k
}

// trips reports whether the streak opens a breaker under p: enough
// failures in a row, over at least MinDuration (so that a short blip of
// many concurrent failures does not).
func (k streak) trips(p ledger.BreakerPolicy, now time.Time) bool {
	return !p.Disabled && p.Failures > 0 && k.failures >= p.Failures && now.Sub(k.since) >= p.MinDuration
}

// firstProbe is when a breaker opened at now for reason probes first, and
// the wait after that probe if it fails; nil: no automatic probe.
func firstProbe(p ledger.BreakerPolicy, reason ledger.BreakerReason, now time.Time) (*time.Time, time.Duration) {
	interval := p.ProbeInterval
	if reason == ledger.BreakerGone {
		interval = p.GoneProbeInterval
	}
	if interval <= 0 {
		return nil, 0
	}
	at := now.Add(interval)
	return &at, nextInterval(p, reason, interval)
}

// nextInterval is the wait after a failed probe that waited interval: it
// doubles up to MaxProbeInterval; Gone keeps its own pace.
func nextInterval(p ledger.BreakerPolicy, reason ledger.BreakerReason, interval time.Duration) time.Duration {
	if reason == ledger.BreakerGone {
		return p.GoneProbeInterval
	}
	next := 2 * interval
	if p.MaxProbeInterval > 0 && next > p.MaxProbeInterval {
		next = p.MaxProbeInterval
	}
	return next
}

// probeSucceeded reports whether a probe's result closes the breaker: the
// receiver answered and is neither down, gone, nor asking to slow down.
func probeSucceeded(res *dispatch.Result) bool {
	s := signalOf(res)
	return s == up || (s == neutral && res.StatusCode != 0 && res.StatusCode != 429 && res.StatusCode != 408)
}

// rampSlots is how many attempts an endpoint whose breaker closed at
// closedAt may have in flight at now, out of limit: one at first, growing
// linearly to limit over ramp. capped is false once the ramp is over.
func rampSlots(closedAt, now time.Time, ramp time.Duration, limit int) (slots int, capped bool) {
	elapsed := now.Sub(closedAt)
	if ramp <= 0 || elapsed >= ramp || limit <= 1 {
		return limit, false
	}
	slots = int(int64(limit) * int64(max(elapsed, 0)) / int64(ramp))
	return max(slots, 1), true
}

// heldHorizon is how long a held delivery may wait, from its first
// attempt (or its creation), before it is exhausted unsent: the policy's
// maxAge, else its replay window (a maxAttempts-only horizon counts no
// attempts while held, so time must bound it).
func heldHorizon(p *ledger.Policy) time.Duration {
	if p.Backoff.MaxAge > 0 {
		return p.Backoff.MaxAge
	}
	return p.ReplayWindow
}

// breakerSweepEvery paces the expiry of held deliveries: each costs a scan
// of an open endpoint's backlog, so not every sweep.
const breakerSweepEvery = 10

// Breaker returns an endpoint's breaker as the ledger holds it (Open false
// when it never opened).
func (e *Engine) Breaker(ctx context.Context, endpointID string) (ledger.Breaker, error) {
	b, err := e.store.BreakerGet(ctx, endpointID)
	if errors.Is(err, ledger.ErrNotFound) {
		return ledger.Breaker{EndpointID: endpointID}, nil
	}
	if err != nil {
		return ledger.Breaker{}, fmt.Errorf("reading the breaker of %s: %w", endpointID, err)
	}
	return b, nil
}

// ProbeNow makes an open breaker's next probe due now (an admin asked,
// `kubectl hookkeeper probe`); a closed one is returned unchanged.
func (e *Engine) ProbeNow(ctx context.Context, endpointID string) (ledger.Breaker, error) {
	b, err := e.store.BreakerProbeNow(ctx, endpointID, e.opts.Clock.Now())
	if err != nil {
		return ledger.Breaker{}, fmt.Errorf("asking for a probe of %s: %w", endpointID, err)
	}
	e.setBreaker(b)
	e.wake()
	return b, nil
}

// setBreaker installs b in the cache and announces a change.
func (e *Engine) setBreaker(b ledger.Breaker) {
	e.mu.Lock()
	st, ok := e.endpoints[b.EndpointID]
	changed := ok && breakerChanged(&st.breaker, &b)
	if ok {
		st.breaker = b
		if !b.Open {
			st.opening = false
		}
		e.indexLocked(b.EndpointID, st)
	}
	e.mu.Unlock()
	if changed {
		e.announceBreaker(b)
	}
}

// breakerChanged reports whether b differs from a in what an admin sees.
func breakerChanged(a, b *ledger.Breaker) bool {
	return a.Open != b.Open || a.Openings != b.Openings || a.Reason != b.Reason || a.Probes != b.Probes ||
		!a.UpdatedAt.Equal(b.UpdatedAt)
}

// announceBreaker tells OnBreaker of a change this engine made or saw.
func (e *Engine) announceBreaker(b ledger.Breaker) {
	if e.opts.OnBreaker != nil {
		e.opts.OnBreaker(b)
	}
}

// observeBreaker feeds a finished attempt (not a probe) to the endpoint's
// streak and opens the breaker, before the attempt's record, when the
// streak trips or the receiver said 410. It runs on the attempt's
// goroutine: opening is a transaction of its own.
func (e *Engine) observeBreaker(ep *ledger.Endpoint, res *dispatch.Result, failure string, now time.Time) {
	pol := ep.Policy.BreakerPolicyOrDefault()
	if pol.Disabled {
		return
	}
	s := signalOf(res)
	e.mu.Lock()
	st, ok := e.endpoints[ep.ID]
	if !ok {
		e.mu.Unlock()
		return
	}
	st.streak = st.streak.observe(s, now, failure)
	reason := ledger.BreakerFailing
	switch {
	case s == gone && (!st.breaker.Open || st.breaker.Reason != ledger.BreakerGone):
		reason = ledger.BreakerGone
	case st.breaker.Open || st.opening || !st.streak.trips(pol, now):
		e.mu.Unlock()
		return
	}
	st.opening = true
	k := st.streak
	e.mu.Unlock()

	next, interval := firstProbe(pol, reason, now)
	b, opened, err := e.store.BreakerOpen(context.WithoutCancel(context.Background()), &ledger.BreakerOpenParams{
		EndpointID: ep.ID, Reason: reason, Failures: k.failures, LastFailure: k.last, NextProbeAt: next, ProbeInterval: interval, Now: now,
	})
	if err != nil {
		e.mu.Lock()
		st.opening = false
		e.mu.Unlock()
		if !errors.Is(err, ledger.ErrNotFound) {
			e.opts.Logger.Error(err, "opening the circuit breaker failed; the next failure tries again", "endpoint", ep.ID)
		}
		return
	}
	if opened {
		e.opts.Logger.Info("circuit breaker opened: attempts to the endpoint stop but for probes", "endpoint", ep.ID,
			"owner", ep.Owner, "reason", reason, "failures", k.failures, "lastFailure", k.last)
	}
	e.mu.Lock()
	st.streak = streak{}
	e.mu.Unlock()
	e.setBreaker(b)
}

// probeDone records the outcome of a probe attempt, after its record.
func (e *Engine) probeDone(ep *ledger.Endpoint, c *ledger.ClaimedDelivery, res *dispatch.Result, failure string, now time.Time) {
	pol := ep.Policy.BreakerPolicyOrDefault()
	e.mu.Lock()
	var cur ledger.Breaker
	if st, ok := e.endpoints[ep.ID]; ok {
		cur = st.breaker
	}
	e.mu.Unlock()
	p := &ledger.BreakerProbeDoneParams{EndpointID: ep.ID, DeliveryID: c.Delivery.ID, Owner: e.opts.Owner,
		Success: probeSucceeded(res), Result: failure, Now: now}
	if !p.Success {
		reason := cur.Reason
		if signalOf(res) == gone {
			reason = ledger.BreakerGone
		}
		interval := cur.ProbeInterval
		if interval > 0 {
			at := now.Add(interval)
			p.NextProbeAt, p.ProbeInterval = &at, nextInterval(pol, reason, interval)
		}
		if p.Result == "" {
			p.Result = describe(res)
		}
	}
	b, changed, err := e.store.BreakerProbeDone(context.WithoutCancel(context.Background()), p)
	if err != nil {
		e.opts.Logger.Error(err, "recording a probe failed; its lease expires and another probe follows", "endpoint", ep.ID, "delivery", c.Delivery.ID)
		return
	}
	if !changed {
		return
	}
	e.opts.Metrics.observeProbe(p.Success)
	if !b.Open {
		e.opts.Logger.Info("circuit breaker closed: the probe succeeded; the backlog ramps up", "endpoint", ep.ID, "owner", ep.Owner,
			"probes", b.Probes, "ramp", pol.Ramp)
	}
	e.setBreaker(b)
	e.wake()
}

// probeDue lists the endpoints whose breaker may lease a probe at now, and
// when the next one that may not yet comes due (zero: none).
func (e *Engine) probeDue(now time.Time) (due []string, next time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, st := range e.broken {
		b := &st.breaker
		if !b.Open || b.NextProbeAt == nil || st.cfg.Paused {
			continue
		}
		switch at := *b.NextProbeAt; {
		case b.ProbeDue(now):
			due = append(due, id)
		case b.Probing(now):
			if next.IsZero() || b.ProbeUntil.Before(next) {
				next = *b.ProbeUntil
			}
		case next.IsZero() || at.Before(next):
			next = at
		}
	}
	return due, next
}

// startProbes leases and starts the due probes, one worker each.
func (e *Engine) startProbes(ctx, attemptCtx context.Context, run startFunc, now time.Time) time.Time {
	due, next := e.probeDue(now)
	for _, id := range due {
		if e.workers.reserve(1) == 0 {
			e.wake() // a freed worker comes back for the rest
			break
		}
		leaseFor := e.leaseFor()
		claimed, err := e.store.BreakerProbe(ctx, &ledger.BreakerProbeParams{EndpointID: id, Owner: e.opts.Owner, Now: now, LeaseFor: leaseFor})
		if err != nil || len(claimed) == 0 {
			e.workers.free(1)
			if err != nil && ctx.Err() == nil {
				e.opts.Logger.Error(err, "leasing a probe failed; retrying", "endpoint", id)
			}
			continue
		}
		e.mu.Lock()
		e.probes[claimed[0].Delivery.ID] = true
		if st, ok := e.endpoints[id]; ok {
			until := now.Add(leaseFor)
			st.breaker.ProbeDelivery, st.breaker.ProbeOwner, st.breaker.ProbeUntil = claimed[0].Delivery.ID, e.opts.Owner, &until
		}
		e.mu.Unlock()
		if !run(ctx, attemptCtx, &claimed[0]) {
			e.mu.Lock()
			delete(e.probes, claimed[0].Delivery.ID)
			e.mu.Unlock()
		}
	}
	return next
}

// startFunc is Engine.start bound to the claim loop's WaitGroup.
type startFunc func(ctx, attemptCtx context.Context, c *ledger.ClaimedDelivery) bool

// isProbe reports, once, whether delivery id was leased as a probe.
func (e *Engine) isProbe(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.probes[id] {
		delete(e.probes, id)
		return true
	}
	return false
}

// refreshBreakers reloads the breakers that are open or ramping from the
// ledger (another engine may have opened, probed or closed one) and, every
// breakerSweepEvery rounds, exhausts unsent the deliveries an open breaker
// held past their horizon.
func (e *Engine) refreshBreakers(ctx context.Context, now time.Time, expire bool) {
	list, err := e.store.BreakerList(ctx, now.Add(-e.longestRamp()))
	if err != nil {
		if ctx.Err() == nil {
			e.opts.Logger.Error(err, "reading the circuit breakers")
		}
		return
	}
	seen := make(map[string]bool, len(list))
	for _, b := range list {
		seen[b.EndpointID] = true
		e.setBreaker(b)
	}
	var stale []ledger.Breaker
	e.mu.Lock()
	for id, st := range e.broken {
		if !seen[id] {
			stale = append(stale, ledger.Breaker{EndpointID: id, Openings: st.breaker.Openings, UpdatedAt: now})
		}
	}
	e.mu.Unlock()
	for _, b := range stale {
		e.setBreaker(b) // closed and past its ramp, or forgotten
	}
	if !expire {
		return
	}
	for _, b := range list {
		if b.Open {
			e.expireHeld(ctx, b.EndpointID, now)
		}
	}
}

// longestRamp is the longest ramp of any endpoint's policy.
func (e *Engine) longestRamp() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return max(ledger.DefaultBreakerPolicy.Ramp, e.ramps.max())
}

// expireHeld exhausts, unsent, with reason CircuitOpen, the deliveries of
// endpointID that its open breaker held past their horizon: the horizon
// keeps counting while a breaker is open (docs/adr/0033), and what passes
// it is surfaced as unresolved work like any exhaustion.
func (e *Engine) expireHeld(ctx context.Context, endpointID string, now time.Time) {
	e.mu.Lock()
	st, ok := e.endpoints[endpointID]
	var horizon time.Duration
	if ok {
		horizon = heldHorizon(&st.cfg.Policy)
	}
	e.mu.Unlock()
	if !ok || horizon <= 0 {
		return
	}
	held, err := e.store.BreakerExpire(ctx, &ledger.BreakerExpireParams{EndpointID: endpointID, Owner: e.opts.Owner,
		StartedBefore: now.Add(-horizon), Limit: sweepBatch, Now: now, LeaseFor: e.leaseFor()})
	if err != nil {
		if ctx.Err() == nil {
			e.opts.Logger.Error(err, "expiring held deliveries", "endpoint", endpointID)
		}
		return
	}
	for i := range held {
		c := &held[i]
		written, err := e.record(ctx, &ledger.AttemptRecordParams{DeliveryID: c.Delivery.ID, Owner: e.opts.Owner, Unsent: true, Leased: c,
			Next: ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustCircuitOpen}, Now: now})
		if err != nil || written.attempt.Err != nil {
			e.opts.Logger.Error(errors.Join(err, written.attempt.Err), "exhausting a held delivery failed; its lease expires", "delivery", c.Delivery.ID)
			continue
		}
		e.exhausted(ExhaustedNotice{Delivery: written.attempt.Delivery, DeadLetter: written.attempt.DeadLetter})
	}
}
