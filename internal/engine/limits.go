package engine

import (
	"context"
	"sync"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// An endpoint's rateLimit and maxInFlight are what its receiver sees,
// whatever the replica count (ADR 0047). On a ledger that several
// processes share (Options.SharedLimits), every send of a rate-limited
// endpoint is taken from the ledger's schedule, and an engine starts no
// more attempts to an endpoint than the in-flight slots it leases from
// the ledger (ledger.Limits). On the embedded ledger, which serves one
// process, the in-memory limiter and count are already the whole truth.

const (
	// slotLeaseTTL is how long a slot lease lasts in the ledger: a dead
	// engine's slots are free again after it.
	slotLeaseTTL = 10 * time.Second
	// slotLeaseMargin is how much sooner this engine stops counting on a
	// lease than the ledger frees it, for the renewal to land.
	slotLeaseMargin = 3 * time.Second
)

// slotLease is this engine's lease of an endpoint's in-flight slots.
type slotLease struct {
	granted int
	// until is when this engine stops counting on it (the ledger's end
	// less slotLeaseMargin); zero before the first lease.
	until time.Time
	// wanted is the last time an attempt wanted a slot: the lease is
	// renewed, wanting every slot, until slotLeaseTTL after it.
	wanted time.Time
	// asked is when the last lease was asked on demand, which is asked at
	// most every slotAskEvery.
	asked time.Time
}

// slotAskEvery bounds how often an attempt that finds no slot asks the
// ledger for more, beside the renewals of every sweep.
const slotAskEvery = 250 * time.Millisecond

// slotLimitLocked is how many attempts to st this engine may have in
// flight at now: its maxInFlight, within the slots it leases when limits
// are shared. Without a lease it is 1, so that a claim may take a delivery
// whose start then leases (ensureSlots). e.mu is held.
func (e *Engine) slotLimitLocked(st *endpointState, now time.Time) int {
	limit := st.cfg.MaxInFlight
	if !e.opts.SharedLimits || limit <= 0 {
		return limit
	}
	if st.slots.until.IsZero() || !now.Before(st.slots.until) {
		return 1
	}
	return min(limit, st.slots.granted)
}

// ensureSlots leases st's slots now unless this engine holds a live lease
// or asked lately, and reports whether an attempt may start (one fewer
// than the slot limit is in flight). It marks the endpoint wanted.
func (e *Engine) ensureSlots(ctx context.Context, st *endpointState, now time.Time) bool {
	e.mu.Lock()
	st.slots.wanted = now
	live := !st.slots.until.IsZero() && now.Before(st.slots.until)
	room := st.inFlight < min(st.cfg.MaxInFlight, st.slots.granted)
	if (live && room) || now.Sub(st.slots.asked) < slotAskEvery {
		e.mu.Unlock()
		return live && room
	}
	st.slots.asked = now
	ask := e.slotAskLocked(st, now)
	e.mu.Unlock()
	e.leaseSlots(ctx, []*endpointState{st}, []ledger.SlotAsk{ask}, now)
	e.mu.Lock()
	defer e.mu.Unlock()
	return st.inFlight < e.slotLimitLocked(st, now)
}

// slotAskLocked is what this engine asks of st's slots at now: every slot
// while attempts wanted one within slotLeaseTTL, else none but those in
// flight. e.mu is held.
func (e *Engine) slotAskLocked(st *endpointState, now time.Time) ledger.SlotAsk {
	want := 0
	if now.Sub(st.slots.wanted) < slotLeaseTTL {
		want = st.cfg.MaxInFlight
	}
	return ledger.SlotAsk{EndpointID: st.cfg.ID, Max: st.cfg.MaxInFlight, InFlight: st.inFlight + st.reserved, Want: want}
}

// renewSlots renews, in one transaction, the leases of every endpoint
// this engine holds slots of or wanted lately; a lease neither held nor
// wanted is left to expire. Run by every sweep.
func (e *Engine) renewSlots(ctx context.Context, now time.Time) {
	if !e.opts.SharedLimits {
		return
	}
	var (
		sts, gone []*endpointState
		asks      []ledger.SlotAsk
	)
	e.mu.Lock()
	for _, st := range e.endpoints {
		if st.cfg.MaxInFlight <= 0 || st.slots.until.IsZero() {
			continue
		}
		ask := e.slotAskLocked(st, now)
		if ask.Want == 0 && ask.InFlight == 0 {
			// Nothing wanted a slot lately: the share goes back to the
			// ledger (this renewal writes it held 0) and, below, this
			// engine drops the lease, so that a delivery coming due later
			// is claimed and leases again (slotLimitLocked) instead of
			// waiting behind a lease of 0 slots that nothing would raise.
			gone = append(gone, st)
		}
		sts, asks = append(sts, st), append(asks, ask)
	}
	e.mu.Unlock()
	if len(asks) == 0 {
		return
	}
	e.leaseSlots(ctx, sts, asks, now)
	if len(gone) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, st := range gone {
		if st.slots.granted == 0 && st.inFlight == 0 {
			st.slots = slotLease{}
		}
	}
	e.slots.gen++
}

// leaseSlots asks the ledger for asks (of sts) and installs the grants.
// A failed lease keeps the old grants until they lapse.
func (e *Engine) leaseSlots(ctx context.Context, sts []*endpointState, asks []ledger.SlotAsk, now time.Time) {
	granted, err := e.store.EndpointSlotsLease(ctx, &ledger.SlotsLeaseParams{
		Holder: e.opts.Owner, Asks: asks, Now: now, Until: now.Add(slotLeaseTTL),
	})
	if err != nil {
		if ctx.Err() == nil {
			e.opts.Logger.Error(err, "leasing in-flight slots; keeping the current ones until they lapse")
		}
		return
	}
	e.mu.Lock()
	for i, st := range sts {
		if st.slots.granted < granted[i] {
			defer e.wake() // slots freed: a claim may take more now
		}
		st.slots.granted, st.slots.until = granted[i], now.Add(slotLeaseTTL-slotLeaseMargin)
	}
	e.slots.gen++
	e.mu.Unlock()
}

// rateHorizon is how far ahead an attempt may be given its place on an
// endpoint's rate: it waits for it holding its worker, instead of going
// back to the ledger and being claimed again.
const rateHorizon = 100 * time.Millisecond

// rateSlots bounds what one claim takes of a rate-limited endpoint (and
// what one reservation asks): its burst and the sends of rateHorizon.
func rateSlots(l ledger.RateLimit) int {
	return ledger.RateBurst(l) + int(int64(l.PerSecond)*int64(rateHorizon)/int64(time.Second))
}

// sendTime is when an attempt to st may be sent under its rateLimit: now
// without one; within rateHorizon, from this engine's limiter or, with
// shared limits, from the places it reserved on the ledger's schedule
// (reserving, in one transaction, as many as the claim being started
// holds of the endpoint). Zero when the rate has no place that soon: next
// is then when to try again, and the claims skip the endpoint until then.
func (e *Engine) sendTime(ctx context.Context, st *endpointState, now time.Time) (sendAt, next time.Time, err error) {
	l := st.cfg.RateLimit
	if l.PerSecond <= 0 {
		return now, time.Time{}, nil
	}
	e.mu.Lock()
	if !e.opts.SharedLimits {
		defer e.mu.Unlock()
		if st.limiter == nil {
			return now, time.Time{}, nil
		}
		r := st.limiter.ReserveN(now, 1)
		delay := r.DelayFrom(now)
		if !r.OK() || delay > rateHorizon {
			r.CancelAt(now)
			e.throttleLocked(st, now.Add(delay-rateHorizon))
			return time.Time{}, st.throttledUntil, nil
		}
		return now.Add(delay), time.Time{}, nil
	}
	// A place reserved earlier and not yet passed (a late send would
	// come closer than 1/perSecond to the next replica's).
	for len(st.sends) > 0 {
		at := st.sends[0]
		st.sends = st.sends[1:]
		if !at.Before(now.Add(-time.Millisecond)) {
			e.mu.Unlock()
			return at, time.Time{}, nil
		}
	}
	n := min(1+st.claimedAhead, rateSlots(l))
	e.mu.Unlock()
	answer, err := e.store.EndpointRateTake(ctx, &ledger.RateTakeParams{
		EndpointID: st.cfg.ID, Limit: l, Now: now, N: n, Horizon: rateHorizon,
	})
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !answer.Taken {
		e.throttleLocked(st, answer.NextAt)
		return time.Time{}, answer.NextAt, nil
	}
	st.sends = append(st.sends, answer.Sends[1:]...)
	return answer.Sends[0], time.Time{}, nil
}

// throttleLocked holds st from the claims until its rate has a place
// within rateHorizon (freeSlotsLocked). e.mu is held.
func (e *Engine) throttleLocked(st *endpointState, until time.Time) {
	st.throttledUntil = until
	if until.After(e.throttledUntil) {
		e.throttledUntil = until
	}
	e.slots.gen++
}

// noteClaimed counts, for the reservations of sendTime, the deliveries of
// each rate-limited endpoint a claim is about to start.
func (e *Engine) noteClaimed(claimed []ledger.ClaimedDelivery) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range claimed {
		if st := e.endpoints[claimed[i].Delivery.EndpointID]; st != nil && st.cfg.RateLimit.PerSecond > 0 {
			st.claimedAhead++
		}
	}
}

// waitingEvery is how stale the throttled backlog the controllers read may
// be: one read of every due delivery serves every endpoint's status.
const waitingEvery = 10 * time.Second

// waitingCache is the last WaitingList, by endpoint.
type waitingCache struct {
	mu   sync.Mutex
	at   time.Time
	byID map[string]ledger.Waiting
}

// Waiting returns endpoint id's deliveries due and not sent (its throttled
// backlog), as of a read of the whole ledger's at most waitingEvery old.
func (e *Engine) Waiting(ctx context.Context, id string) (ledger.Waiting, error) {
	c := &e.waiting
	c.mu.Lock()
	defer c.mu.Unlock()
	now := e.opts.Clock.Now()
	if c.byID == nil || now.Sub(c.at) >= waitingEvery || now.Before(c.at) {
		ws, err := e.store.WaitingList(ctx, now)
		if err != nil {
			return ledger.Waiting{}, err
		}
		c.byID, c.at = make(map[string]ledger.Waiting, len(ws)), now
		for _, w := range ws {
			c.byID[w.EndpointID] = w
		}
	}
	return c.byID[id], nil
}
