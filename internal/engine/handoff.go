package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// A publish hands its new deliveries straight to this engine's workers
// when it can: the event's commit also leases them to this engine
// (EventInsertParams.LeaseTo), and their attempts start when the publish
// returns. An event then costs one commit less than when a claim finds it
// again (the claim's transaction and fsync, the due-time query, the
// claim loop's wake-up), which is most of what an event costs at low
// rates. The lease is the claim's, committed with the event, so a crash
// or shutdown treats these deliveries like claimed ones.
//
// It applies only while Run runs, with a worker free (reserved before the
// commit, so that starting never waits) and no backlog: when the last claim
// left due work behind, new events queue behind it through the claims,
// earliest due first. A claim in progress does not stop it: the claim
// holds what it may take of each endpoint's in-flight limit (claimHold),
// and a hand-off leases only to endpoints with slots beyond that, so the
// two never count on the same slot (an endpoint bounded only by its fair
// share is not held: ownLimitsLocked). (Refusing hand-offs during claims sent
// most events of a busy engine through the claims: each refused publish
// woke the claim loop, whose next claim refused the next publishes.)
//
// Which endpoints a publish leases to is decided in its commit, one
// endpoint at a time, as the ledger routes the event (Lease.Admit): an
// endpoint with a free slot is leased to and the slot reserved until the
// attempt starts or the publish ends. A publish therefore costs the same
// with ten endpoints registered or ten thousand; deciding before the
// commit, without knowing where the event goes, meant counting the slots
// of every endpoint for every publish, and each publish in progress
// against all of them (issue #26).

// running holds Run's contexts and wait group while it runs.
type running struct {
	mu              sync.RWMutex
	on              bool
	ctx, attemptCtx context.Context
	wg              *sync.WaitGroup
	// started is closed after Run's first claim round (Engine.Started),
	// once.
	started     chan struct{}
	startedOnce sync.Once
}

func (r *running) start(ctx, attemptCtx context.Context, wg *sync.WaitGroup) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on, r.ctx, r.attemptCtx, r.wg = true, ctx, attemptCtx, wg
}

// markStarted closes started, once: after the first round it costs the
// claim loop an atomic load.
func (r *running) markStarted() { r.startedOnce.Do(func() { close(r.started) }) }

// Started is closed once Run has loaded the endpoints and ended its first
// claim round: from then on publishes are handed off (unless that round
// left a backlog). Before, they are accepted and wait for the claims.
func (e *Engine) Started() <-chan struct{} { return e.running.started }

// isOn reports whether Run runs.
func (r *running) isOn() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.on
}

// stop waits for hand-offs in progress; later ones release their
// deliveries instead of starting them.
func (r *running) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
}

// handoff is one publish's hand-off, from offerLease to handOff: the
// endpoints whose slots its commit reserved.
type handoff struct {
	e *Engine
	// reserved and ended are guarded by e.mu.
	reserved []*endpointState
	ended    bool
}

// admit is the publish's Lease.Admit: it leases the delivery to endpoint
// id, and reserves one of its slots, when the endpoint has one free
// beyond the attempts in flight, the other publishes' reservations and
// what a claim in progress may take. Endpoints without a free slot keep
// their deliveries scheduled: leased, they would only be released again.
// An endpoint this engine has not loaded yet is leased to unreserved
// (start loads it and checks its limit). After handOff nothing is leased:
// a publish whose caller gave up may still be committed.
func (h *handoff) admit(id string) bool {
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if h.ended {
		return false
	}
	st, ok := e.endpoints[id]
	if !ok {
		return true
	}
	if slices.Contains(h.reserved, st) {
		return true // asked again: the store retried the transaction
	}
	if e.freeSlotsLocked(st, e.opts.Clock.Now(), e.claim) <= 0 {
		return false
	}
	e.reserveLocked(st, 1)
	h.reserved = append(h.reserved, st)
	return true
}

// end gives back the slots the publish reserved: its attempts have
// started (and count in flight) or never will.
func (h *handoff) end() {
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	h.ended = true
	for _, st := range h.reserved {
		e.reserveLocked(st, -1)
	}
	h.reserved = nil
}

// offerLease returns the params to commit and, when the deliveries may be
// handed to this engine, the hand-off that leases them (with a worker
// slot reserved); params unchanged and nil otherwise.
func (e *Engine) offerLease(params *ledger.EventInsertParams) (*ledger.EventInsertParams, *handoff) {
	if e.backlogOf(params.Namespace) || !e.running.isOn() || e.workers.reserve(1) == 0 {
		return params, nil
	}
	h := &handoff{e: e}
	p := *params
	p.LeaseTo = &ledger.Lease{Owner: e.opts.Owner, Until: e.opts.Clock.Now().Add(e.leaseFor()), Admit: h.admit}
	return &p, h
}

// claimView is what a claim may take: the endpoints it must skip and the
// free slots of the others that are limited, what is left of each
// namespace's share of the workers (namespaceShare for a namespace that
// holds nothing; atShare those with none left), and whether retries are at
// theirs (fairshare.go).
type claimView struct {
	full              []string
	slots             map[string]int
	namespaceSlots    map[string]int
	namespaceShare    int
	atShare           []string
	firstAttemptsOnly bool
}

// beginClaim returns the claim's view of the endpoints' slots for a claim
// of at most limit deliveries, and holds what it may take of each
// limited endpoint (the lesser of limit and its free slots) from
// hand-offs until endClaim.
func (e *Engine) beginClaim(limit int) claimView {
	e.mu.Lock()
	defer e.mu.Unlock()
	var v claimView
	v.full, v.slots = e.endpointSlotsLocked(nil)
	v.namespaceSlots, v.namespaceShare, v.atShare = e.claimSharesLocked()
	v.firstAttemptsOnly = e.firstAttemptsOnlyLocked()
	e.claim = &claimHold{slots: e.ownLimitsLocked(v.slots), limit: limit}
	return v
}

// ownLimitsLocked keeps of a claim's endpoint slots those of endpoints
// with a limit of their own (maxInFlight, a rate, a breaker's ramp), which
// the claim holds from hand-offs. An endpoint bounded only by its fair
// share is not held: holding it refused a busy endpoint's hand-offs during
// every claim, and a neighbour whose failing receivers keep the claims
// busy sent a share of its new events through the claims, behind the
// ledger's writer (issue #43). What a claim takes beyond a share is
// released where it starts (fair_share). e.mu is held.
func (e *Engine) ownLimitsLocked(slots map[string]int) map[string]int {
	var own map[string]int
	for id, n := range slots {
		if e.watched[id] == nil {
			continue
		}
		if own == nil {
			own = make(map[string]int, len(slots))
		}
		own[id] = n
	}
	return own
}

// setBacklog records whether the last claim left due work (backlog: it
// took a full batch, or could take none), and of which namespaces: those
// of what it claimed and those at their share (nil: every namespace).
func (e *Engine) setBacklog(backlog bool, claimed []ledger.ClaimedDelivery, atShare []string) {
	e.behind.Store(backlog)
	if !backlog {
		e.backlog.Store(false)
		e.backlogged.Store(nil)
		return
	}
	ns := make(map[string]bool, len(atShare)+1)
	for _, n := range atShare {
		ns[n] = true
	}
	for i := range claimed {
		ns[ledger.NamespaceOf(claimed[i].Delivery.EndpointID)] = true
	}
	e.backlogged.Store(&ns)
	e.backlog.Store(true)
}

// backlogOf reports whether a publish to namespace ns queues behind a
// backlog the last claim left.
func (e *Engine) backlogOf(ns string) bool {
	if !e.backlog.Load() {
		return false
	}
	m := e.backlogged.Load()
	return m == nil || (*m)[ns]
}

// endClaim ends what beginClaim began; calling it twice is harmless.
func (e *Engine) endClaim() {
	e.mu.Lock()
	e.claim = nil
	e.mu.Unlock()
}

// handOff starts the attempts of the deliveries res leased to this engine,
// using the worker slot offerLease reserved for the first and a free one
// for each other; one that finds no free worker, or Run stopped, is
// released to the claims. A publish whose outcome is unknown (err) leaves
// anything it may have leased to the lease's expiry, like a crash. The
// slots h reserved are given back once the attempts count in flight.
func (e *Engine) handOff(h *handoff, res *ledger.EventInsertResult, err error) {
	defer h.end()
	e.running.mu.RLock()
	defer e.running.mu.RUnlock()
	slot := true
	if err == nil && res.Err == nil && !res.Duplicate {
		for i := range res.Leased {
			c := &res.Leased[i]
			if !e.running.on {
				e.release(c, c.Delivery.DueAt, "shutdown")
				continue
			}
			if !slot && e.workers.reserve(1) == 0 {
				e.release(c, c.Delivery.DueAt, "workers_busy")
				continue
			}
			slot = false
			e.start(e.running.ctx, e.running.attemptCtx, e.running.wg, c, false)
		}
	}
	if slot {
		e.workers.free(1)
	}
}

// While the claims leave due work behind, ingest and delivery take turns:
// a publish waits, before it commits, for the claim loop to end its next
// round (a claim of up to a batch, or finding it cannot take any). Ingest
// that the ledger accepts faster than the engine delivers would otherwise
// queue deliveries without bound behind it; so did PostgreSQL at
// saturation, where an insert costs the server a third of a record (ADR
// 0026). Full endpoints do not count: one endpoint at its in-flight limit
// must not slow everyone's ingest. The wait is bounded by IdleWait and by
// the publisher's context.

// rounds tells waiting publishes that a claim round ended.
type rounds struct {
	mu sync.Mutex
	ch chan struct{} // closed at the end of the round in progress
}

// next returns a channel closed when the current claim round ends.
func (r *rounds) next() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ch == nil {
		r.ch = make(chan struct{})
	}
	return r.ch
}

// end ends the current round.
func (r *rounds) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ch != nil {
		close(r.ch)
		r.ch = nil
	}
}

// yield waits for the next claim round while Run runs.
func (e *Engine) yield(ctx context.Context) {
	if !e.running.isOn() {
		return
	}
	e.opts.Metrics.observeYield()
	round := e.rounds.next()
	e.wake()
	t := time.NewTimer(e.opts.IdleWait)
	defer t.Stop()
	select {
	case <-round:
	case <-ctx.Done():
	case <-t.C:
	}
}
