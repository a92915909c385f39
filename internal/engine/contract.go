package engine

import (
	"context"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// An event carries its type's contract in the ledger (docs/adr/0038): a
// policy that replaces the endpoint's for its deliveries
// (ledger.Event.PolicyFor), and a ValidUntil past which it is never sent.
// The engine enforces the bound twice: right before an attempt (a claimed
// delivery found expired is cancelled, not sent), and in a sweep that
// cancels expired deliveries nothing would claim (paused endpoints, open
// breakers, due later). Each attempt also tells the receiver until when
// the event may come back (replayUntil).

// expire records c, leased to this engine, cancelled with reason Expired
// at now instead of sending it. If that fails, its lease expires and
// whoever claims it next finds it expired.
func (e *Engine) expire(ctx context.Context, c *ledger.ClaimedDelivery, now time.Time) {
	written, err := e.record(ctx, expiredRecord(c, e.opts.Owner, now))
	if err == nil {
		err = written.attempt.Err
	}
	if err != nil {
		e.opts.Logger.Error(err, "cancelling an expired delivery failed; its lease expires", "delivery", c.Delivery.ID)
		return
	}
	e.expired(c)
}

// expiredRecord is the record that cancels c, unsent, as Expired.
func expiredRecord(c *ledger.ClaimedDelivery, owner string, now time.Time) *ledger.AttemptRecordParams {
	return &ledger.AttemptRecordParams{DeliveryID: c.Delivery.ID, Owner: owner, Unsent: true, Leased: c,
		Next: ledger.Next{State: ledger.StateCancelled, Reason: ledger.CancelExpired}, Now: now}
}

// expired announces a committed expiry.
func (e *Engine) expired(c *ledger.ClaimedDelivery) {
	e.opts.Logger.V(1).Info("delivery expired unsent", "delivery", c.Delivery.ID, "event", c.Event.ID,
		"endpoint", c.Delivery.EndpointID, "validUntil", c.Event.ValidUntil, "attempts", c.Delivery.Attempts)
	e.opts.Metrics.observeExpired(e.ownerOf(c.Delivery.EndpointID))
}

// sweepExpired cancels, in bounded batches, the deliveries whose event's
// ValidUntil passed by now and that no claim will take (their endpoint is
// paused or held by its breaker, or they are due later), so that they end
// at their bound rather than when their endpoint comes back.
func (e *Engine) sweepExpired(ctx context.Context, now time.Time) {
	for range pruneRounds {
		held, err := e.store.DeliveryClaimExpired(ctx, &ledger.DeliveryClaimExpiredParams{
			Owner: e.opts.Owner, Now: now, LeaseFor: e.leaseFor(), Limit: sweepBatch})
		if err != nil {
			if ctx.Err() == nil {
				e.opts.Logger.Error(err, "claiming expired deliveries")
			}
			return
		}
		if len(held) == 0 {
			return
		}
		// One transaction for the batch: the records' group commit would
		// make the sweep wait for each.
		records := make([]*ledger.AttemptRecordParams, len(held))
		for i := range held {
			records[i] = expiredRecord(&held[i], e.opts.Owner, now)
		}
		results, err := e.store.AttemptRecordMany(ctx, records)
		if err != nil {
			if ctx.Err() == nil {
				e.opts.Logger.Error(err, "cancelling expired deliveries failed; their leases expire")
			}
			return
		}
		for i, r := range results {
			if r.Err != nil {
				e.opts.Logger.Error(r.Err, "cancelling an expired delivery failed", "delivery", held[i].Delivery.ID)
				continue
			}
			e.expired(&held[i])
		}
		if len(held) < sweepBatch {
			return
		}
	}
}

// replayUntil is until when the event of an attempt of d started at
// started may still come back to the receiver (Hookkeeper-Replay-Until),
// and false when nothing bounds it. It is a pure function of what the
// attempt knows:
//
//   - a recovery or a replay sends the event again only within the replay
//     window of the policy in force (pol), measured from the event's
//     earliest first attempt (ledger.ReplayFrom). That instant is not
//     later than this delivery's first attempt (this one, for a first
//     attempt), so the window's end from there is never earlier than the
//     true one: a receiver keeping its record until then never forgets an
//     event that can still come back. A window of 0 bounds nothing;
//   - nothing is sent at or after the event's ValidUntil (the engine
//     cancels instead), so it bounds the window;
//   - the payload retention ends re-sends too (PayloadExpired), but it runs
//     from the end of the event's last delivery, which no attempt knows: it
//     cannot shorten the promise without breaking it (docs/adr/0038).
//
// A request started just before that bound may still be arriving for up
// to its attempt timeout, so the timeout is added. The result is carried
// to the second, rounded up, never down.
func replayUntil(pol *ledger.Policy, ev *ledger.Event, d *ledger.Delivery, started time.Time) (time.Time, bool) {
	var (
		until time.Time
		ok    bool
	)
	if pol.ReplayWindow > 0 {
		from := started
		if d.FirstAttemptAt != nil {
			from = *d.FirstAttemptAt
		}
		until, ok = from.Add(pol.ReplayWindow), true
	}
	if ev.ValidUntil != nil && (!ok || ev.ValidUntil.Before(until)) {
		until, ok = *ev.ValidUntil, true
	}
	if !ok {
		return time.Time{}, false
	}
	until = until.Add(attemptTimeout(pol)).UTC()
	if t := until.Truncate(time.Second); !t.Equal(until) {
		until = t.Add(time.Second)
	}
	return until, true
}

// attemptTimeout is the timeout of an attempt under pol.
func attemptTimeout(pol *ledger.Policy) time.Duration {
	if pol.Backoff.AttemptTimeout > 0 {
		return pol.Backoff.AttemptTimeout
	}
	return defaultAttemptTimeout
}
