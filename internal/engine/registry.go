package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/hookkeeper/hookkeeper/internal/credential"
	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// defaultAttemptTimeout applies when an endpoint's policy sets none.
const defaultAttemptTimeout = 30 * time.Second

// RegisterEndpoint stores an endpoint's configuration durably (so that a
// restart never delivers to a stale one) and applies it to this engine.
// Pausing is registering with Paused set: deliveries keep accumulating.
// A configuration that could never be sent (its URL or a static header
// breaks a rule of package wire) is refused, and the error wraps
// ErrInvalidEndpoint.
func (e *Engine) RegisterEndpoint(ctx context.Context, ep ledger.Endpoint) (ledger.Endpoint, error) {
	if ep.ID == "" {
		ep.ID = ledger.EndpointID(ep.Namespace, ep.Name)
	}
	if err := checkWire(&ep); err != nil {
		return ledger.Endpoint{}, fmt.Errorf("registering endpoint %s: %w: %w", ep.ID, ErrInvalidEndpoint, err)
	}
	prevURL := e.registeredURL(ctx, ep.ID)
	stored, err := e.store.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{Endpoint: ep, Now: e.opts.Clock.Now()})
	if err != nil {
		return ledger.Endpoint{}, fmt.Errorf("registering endpoint %s: %w", ep.ID, err)
	}
	e.apply(stored)
	if prevURL != "" && prevURL != stored.URL {
		// A new URL is a new receiver: what the breaker learnt of the old
		// one (a streak, a 410) says nothing about it.
		b, err := e.store.BreakerClose(ctx, stored.ID, ledger.BreakerURLChanged, e.opts.Clock.Now())
		if err != nil {
			return ledger.Endpoint{}, fmt.Errorf("registering endpoint %s: closing its breaker for the new URL: %w", ep.ID, err)
		}
		e.setBreaker(b)
	}
	e.wake()
	return stored, nil
}

// registeredURL is the URL endpoint id is registered with, "" when it is
// not (or the ledger cannot say: the breaker then keeps its state).
func (e *Engine) registeredURL(ctx context.Context, id string) string {
	e.mu.Lock()
	st, ok := e.endpoints[id]
	e.mu.Unlock()
	if ok {
		return st.cfg.URL
	}
	ep, err := e.store.EndpointGet(ctx, id)
	if err != nil {
		return ""
	}
	return ep.URL
}

// ErrInvalidEndpoint: RegisterEndpoint refused a configuration that could
// never be sent.
var ErrInvalidEndpoint = errors.New("invalid endpoint configuration")

// checkWire checks the URL, the static headers (package wire) and the
// credentials (dispatch.CheckCredentials), the checks the sender applies
// to every attempt, so that an endpoint is refused once instead of
// failing every delivery. Its errors name fields, never values.
func checkWire(ep *ledger.Endpoint) error {
	if err := wire.CheckURL(ep.URL); err != nil {
		return err
	}
	var hs wire.HeaderSet
	for _, h := range ep.Headers {
		if err := hs.Add(h.Name, h.Value); err != nil {
			return err
		}
	}
	return dispatch.CheckCredentials(ep.URL, ep.Headers, ep.Credentials)
}

// RemoveEndpoint deletes an endpoint: its pending deliveries are cancelled
// and keep their history. It returns how many were cancelled; removing an
// unknown endpoint is not an error.
func (e *Engine) RemoveEndpoint(ctx context.Context, id string) (int, error) {
	n, err := e.store.EndpointDelete(ctx, &ledger.EndpointDeleteParams{ID: id, Now: e.opts.Clock.Now()})
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return 0, fmt.Errorf("removing endpoint %s: %w", id, err)
	}
	e.mu.Lock()
	e.forgetLocked(id)
	e.mu.Unlock()
	// The sender's token and HTTPS client for the endpoint go with it.
	if f, ok := e.opts.Sender.(interface{ Forget(endpoint string) }); ok {
		f.Forget(id)
	}
	return n, nil
}

// EndpointStats returns an endpoint's counters from the ledger; the cost
// does not grow with the size of the ledger.
func (e *Engine) EndpointStats(ctx context.Context, id string) (ledger.EndpointStats, error) {
	return e.store.EndpointStats(ctx, id)
}

// loadEndpoints fills the cache from the ledger at start.
func (e *Engine) loadEndpoints(ctx context.Context) error {
	eps, err := e.store.EndpointList(ctx)
	if err != nil {
		return fmt.Errorf("loading endpoints: %w", err)
	}
	for _, ep := range eps {
		e.apply(ep)
	}
	return nil
}

// apply installs a configuration unless the cache already holds a newer
// one, keeping the in-flight count and, when the limit is unchanged, the
// rate limiter's state.
func (e *Engine) apply(ep ledger.Endpoint) *endpointState {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, ok := e.endpoints[ep.ID]
	if ok && st.cfg.Version >= ep.Version {
		return st
	}
	if !ok {
		st = &endpointState{}
		e.endpoints[ep.ID] = st
	} else {
		e.countConfigLocked(&st.cfg, -1)
	}
	if !ok || st.cfg.RateLimit != ep.RateLimit {
		st.limiter = newLimiter(ep.RateLimit)
	}
	st.cfg = ep
	st.creds = e.prepareCredentials(&ep)
	e.countConfigLocked(&st.cfg, 1)
	e.indexLocked(ep.ID, st)
	return st
}

// credentialPreparer is a Sender that makes an endpoint's credentials
// ready once per version of the endpoint (*dispatch.Sender does), so that
// its attempts only apply them. A Sender without it gets none.
type credentialPreparer interface {
	Prepare(endpoint, rawURL string, static []wire.Header, set *credential.Set) *dispatch.Credentials
}

// prepareCredentials makes ep's credentials ready for its attempts: once
// for each version apply installs, under e.mu (a new Set costs parsing
// its TLS values; the same values again cost a digest).
func (e *Engine) prepareCredentials(ep *ledger.Endpoint) *dispatch.Credentials {
	p, ok := e.opts.Sender.(credentialPreparer)
	if !ok {
		return nil
	}
	return p.Prepare(ep.ID, ep.URL, ep.Headers, ep.Credentials)
}

func newLimiter(rl ledger.RateLimit) *rate.Limiter {
	if rl.PerSecond <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Every(ledger.RateInterval(rl)), ledger.RateBurst(rl))
}

// endpointFor returns the cached state of an endpoint, reloading it from
// the ledger when the claim saw a newer version (another process, or a
// registration racing the claim).
func (e *Engine) endpointFor(ctx context.Context, id string, version int64) (*endpointState, error) {
	e.mu.Lock()
	st, ok := e.endpoints[id]
	e.mu.Unlock()
	if ok && st.cfg.Version >= version {
		return st, nil
	}
	ep, err := e.store.EndpointGet(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("loading endpoint %s: %w", id, err)
	}
	return e.apply(ep), nil
}

// fullEndpoints lists the endpoints at their in-flight limit, which the
// next claim skips.
func (e *Engine) fullEndpoints() []string {
	full, _ := e.endpointSlots()
	return full
}

// endpointSlots returns the endpoints at their in-flight limit and the free
// slots of the others that have one: a claim takes no more of an endpoint's
// deliveries than it can start.
func (e *Engine) endpointSlots() (full []string, slots map[string]int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.endpointSlotsLocked(nil)
}

// endpointSlotsLocked is endpointSlots with e.mu held, less the slots held
// for a claim in progress and those reserved by publishes handing off
// their deliveries (handoff.go).
func (e *Engine) endpointSlotsLocked(held *claimHold) (full []string, slots map[string]int) {
	// Without a claim or a breaker ramping up, the count depends on
	// nothing but the endpoints and their in-flight and reserved counts,
	// which bump slots.gen: an idle engine counts again only what changed.
	cacheable := held == nil && !e.rampingLocked() && !e.opts.Clock.Now().Before(e.throttledUntil)
	if cacheable && e.slots.valid && e.slots.at == e.slots.gen {
		return e.slots.full, e.slots.slots
	}
	defer func() {
		if cacheable {
			e.slots.full, e.slots.slots, e.slots.at, e.slots.valid = full, slots, e.slots.gen, true
		}
	}()
	now := e.opts.Clock.Now()
	count := func(id string, st *endpointState) {
		switch free := e.freeSlotsLocked(st, now, held); {
		case free <= 0:
			full = append(full, id)
		default:
			if slots == nil {
				slots = map[string]int{}
			}
			slots[id] = free
		}
	}
	// The endpoints with a limit of their own, those holding attempts
	// (their fair share limits them), and every endpoint of a namespace
	// at its share (fairshare.go).
	for id, st := range e.watched {
		count(id, st)
	}
	for id, st := range e.shares.busy {
		if e.watched[id] == nil {
			count(id, st)
		}
	}
	nsShare := e.namespaceShareLocked()
	for ns, n := range e.shares.held {
		if n < nsShare {
			continue
		}
		for id := range e.byNamespace[ns] {
			if e.watched[id] == nil && e.shares.busy[id] == nil {
				full = append(full, id)
			}
		}
	}
	return full, slots
}

// freeSlotsLocked is what endpoint st may start now beyond its attempts in
// flight, the slots publishes reserved and what a claim in progress
// (held) may take, within its fair share (fairshare.go). An open
// breaker holds it but for its probe (breaker.go); one closed lately ramps
// its backlog up instead of landing it at once. e.mu is held.
func (e *Engine) freeSlotsLocked(st *endpointState, now time.Time, held *claimHold) int {
	if st.breaker.Open {
		return 0
	}
	if now.Before(st.throttledUntil) {
		return 0 // its rate's next send is later (limits.go)
	}
	limit, bounded := e.slotLimitLocked(st, now), st.cfg.MaxInFlight > 0
	if st.breaker.ClosedAt != nil {
		lim := limit
		if !bounded {
			lim = e.opts.Workers
		}
		if n, capped := rampSlots(*st.breaker.ClosedAt, now, st.cfg.Policy.BreakerPolicyOrDefault().Ramp, lim); capped {
			limit, bounded = n, true
		}
	}
	// Within its fair share, always; within its own limit when it has one;
	// a claim takes no more of a rate-limited endpoint than its rate sends
	// soon (limits.go).
	free := e.shareFreeLocked(st)
	if bounded {
		free = min(free, limit-st.inFlight-st.reserved)
	}
	if st.cfg.RateLimit.PerSecond > 0 {
		free = min(free, rateSlots(st.cfg.RateLimit))
	}
	return free - held.take(st.cfg.ID)
}

// leaseFor is the lease of a claim: the longest attempt timeout of any
// endpoint plus the margin, so that a lease never expires under a live
// attempt.
func (e *Engine) leaseFor() time.Duration {
	e.mu.Lock()
	longest := e.timeouts.max()
	e.mu.Unlock()
	if longest == 0 {
		longest = defaultAttemptTimeout
	}
	return max(longest, time.Duration(e.longestOverride.Load())) + e.opts.LeaseMargin
}

// attemptTimeout is the timeout of an attempt of d under pol, the policy
// in force, started at started. An event type's policy may set a longer
// one than any endpoint's, which the lease taken before the event was
// read did not cover: the attempt is cut to end within the lease (less
// its margin, so that it is recorded before another engine may claim the
// delivery), and later leases cover it (longestOverride).
func (e *Engine) attemptTimeout(pol *ledger.Policy, d *ledger.Delivery, started time.Time) time.Duration {
	timeout := attemptTimeout(pol)
	for {
		seen := e.longestOverride.Load()
		if int64(timeout) <= seen || e.longestOverride.CompareAndSwap(seen, int64(timeout)) {
			break
		}
	}
	if d.LeaseUntil != nil {
		if left := d.LeaseUntil.Sub(started) - e.opts.LeaseMargin; left > 0 && left < timeout {
			return left
		}
	}
	return timeout
}

// ownerOf is the owner of endpoint id as this process knows it ("" when it
// does not hold the endpoint), for the exhaustion metric's label.
func (e *Engine) ownerOf(id string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st, ok := e.endpoints[id]; ok {
		return st.cfg.Owner
	}
	return ""
}
