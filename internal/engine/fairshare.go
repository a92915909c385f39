package engine

import "github.com/hookkeeper/hookkeeper/internal/ledger"

// Fair share of the workers (issue #43, ADR 0046). One engine serves every
// namespace; without shares, one namespace whose receivers hang holds every
// worker, and its backlog, due earlier, is claimed first. In the spirit of
// Kubernetes' API Priority and Fairness, but without queues of our own (the
// ledger is the queue):
//
//   - A namespace holds at most its share of the workers: the workers
//     divided among the namespaces holding attempts plus one, so that a
//     namespace arriving always finds room. An endpoint holds at most its
//     share of its namespace's, divided the same way among the namespace's
//     endpoints holding attempts plus one. A namespace (or endpoint) at its
//     share is excluded from the claims, whose reads then skip its backlog
//     (the ledger reads each other endpoint's earliest), and a publish does
//     not hand it its deliveries; it gets more as its attempts end.
//   - Retries hold at most the workers less a reserved fifth: past that,
//     claims take first attempts only.
//   - An open breaker or a throttled endpoint holds no worker: the breaker
//     keeps its deliveries out of the claims, a rate limit releases them
//     with the time they may go (start).
//   - A claim reads the shares before it runs, and publishes may hand off
//     meanwhile: a claimed delivery whose namespace or endpoint has reached
//     its share by the time it starts is released (reason fair_share), and
//     the next claim skips it. The shares hold at every start, not only at
//     every read.
//   - A publish hands its deliveries to the workers itself (handoff.go)
//     unless its own namespace was left with due work by the last claim:
//     one namespace's backlog does not hold another's new events back.
//
// The shares are this engine's, over its own workers: every replica holds
// each namespace to its share of that replica's workers.

// share divides total among holders, plus one for whoever comes next; at
// least 1.
func share(total, holders int) int {
	return max(1, total/(holders+1))
}

// retryWorkers is how many of workers retries may hold: all but the fifth
// reserved for first attempts (none reserved below 5 workers, but one).
func retryWorkers(workers int) int {
	return max(1, workers-max(1, workers/5))
}

// holdLocked counts delta more attempts held by endpoint st (in flight or
// reserved by a hand-off) in its namespace's shares. e.mu is held.
func (e *Engine) holdLocked(st *endpointState, delta int) {
	ns := st.cfg.Namespace
	before := st.inFlight + st.reserved
	after := before + delta
	switch {
	case before == 0 && after > 0:
		e.shares.busy[st.cfg.ID] = st
		e.shares.busyEndpoints[ns]++
	case before > 0 && after == 0:
		delete(e.shares.busy, st.cfg.ID)
		if e.shares.busyEndpoints[ns]--; e.shares.busyEndpoints[ns] <= 0 {
			delete(e.shares.busyEndpoints, ns)
		}
	}
	if n := e.shares.held[ns] + delta; n > 0 {
		e.shares.held[ns] = n
	} else {
		delete(e.shares.held, ns)
	}
}

// fairShares is what the engine holds per namespace, for the shares.
type fairShares struct {
	// held counts the attempts each namespace holds; busyEndpoints the
	// endpoints of each namespace that hold any, busy those endpoints.
	held          map[string]int
	busyEndpoints map[string]int
	busy          map[string]*endpointState
	// retries counts the attempts in flight that are retries.
	retries int
}

func newFairShares() fairShares {
	return fairShares{held: map[string]int{}, busyEndpoints: map[string]int{}, busy: map[string]*endpointState{}}
}

// namespaceShareLocked is the most attempts one namespace may hold now.
// e.mu is held.
func (e *Engine) namespaceShareLocked() int {
	return share(e.opts.Workers, len(e.shares.held))
}

// shareFreeLocked is what endpoint st may start now within its fair
// share: the lesser of what is left of its own share and of its
// namespace's. e.mu is held.
func (e *Engine) shareFreeLocked(st *endpointState) int {
	ns := st.cfg.Namespace
	nsShare := e.namespaceShareLocked()
	busy := e.shares.busyEndpoints[ns]
	if st.inFlight+st.reserved > 0 {
		busy-- // its own share is among those counted
	}
	epShare := share(nsShare, busy)
	return min(epShare-st.inFlight-st.reserved, nsShare-e.shares.held[ns])
}

// claimSharesLocked returns what a claim may take per namespace (what is
// left of the share of each namespace that holds attempts; for the
// others, the share they will have once they hold some, one holder more)
// and the namespaces at their share, whose endpoints it must exclude.
// e.mu is held.
func (e *Engine) claimSharesLocked() (slots map[string]int, def int, atShare []string) {
	nsShare := e.namespaceShareLocked()
	def = share(e.opts.Workers, len(e.shares.held)+1)
	for ns, n := range e.shares.held {
		free := nsShare - n
		if free <= 0 {
			atShare = append(atShare, ns)
			continue
		}
		if slots == nil {
			slots = map[string]int{}
		}
		slots[ns] = free
	}
	return slots, def, atShare
}

// firstAttemptsOnlyLocked reports whether the retries in flight hold all
// the workers retries may: the next claim takes first attempts only.
// e.mu is held.
func (e *Engine) firstAttemptsOnlyLocked() bool {
	return e.shares.retries >= retryWorkers(e.opts.Workers)
}

// isRetry reports whether an attempt of d counts against the retries'
// workers.
func isRetry(d *ledger.Delivery) bool { return d.Attempts > 0 }
