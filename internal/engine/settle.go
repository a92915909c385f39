package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// AckSecrets returns the secrets an acknowledgement of the delivery must be
// signed with: those its endpoint signs with now (both during a rotation).
// It implements httpapi.Acknowledger.
//
// The endpoint is read from the ledger, not from this engine's cache: with
// several replicas only the leader registers endpoints, and another
// replica's cached copy may predate a rotation, which would refuse the new
// secret and keep accepting a retired one.
func (e *Engine) AckSecrets(ctx context.Context, deliveryID string) ([]sensitive.Bytes, error) {
	d, err := e.store.DeliveryGet(ctx, deliveryID)
	if err != nil {
		return nil, err
	}
	ep, err := e.store.EndpointGet(ctx, d.EndpointID)
	if err != nil {
		return nil, fmt.Errorf("loading endpoint %s: %w", d.EndpointID, err)
	}
	e.apply(ep) // refresh the cache for the sweeps and sends while here
	return signingSecrets(ep.Secrets, e.opts.Clock.Now()), nil
}

// Acknowledge applies a receiver's acknowledgement of a Callback-mode
// delivery. It implements httpapi.Acknowledger; on ErrNotAwaitingAck the
// returned delivery is the current one.
//
// A fast receiver can acknowledge before the 2xx that started the wait is
// recorded (by this replica or another). The ledger then holds the
// acknowledgement and the delivery is returned in flight: whoever records
// the attempt applies it (applyHeldAcks), so an acknowledgement never
// waits for the record.
func (e *Engine) Acknowledge(ctx context.Context, params *ledger.AckRecordParams) (ledger.Delivery, error) {
	res, err := e.store.AckRecord(ctx, params)
	if errors.Is(err, ledger.ErrNotAwaitingAck) {
		d, holdErr := e.store.AckHold(ctx, params)
		switch {
		case holdErr == nil:
			return d, nil
		case errors.Is(holdErr, ledger.ErrNotInFlight) && d.State == ledger.StateAwaitingAck:
			res, err = e.store.AckRecord(ctx, params) // recorded meanwhile
		case errors.Is(holdErr, ledger.ErrNotInFlight):
			return d, err
		default:
			return ledger.Delivery{}, holdErr
		}
	}
	if err != nil {
		return ledger.Delivery{}, err
	}
	e.opts.Metrics.observeAck(string(params.Outcome))
	e.settled(res)
	return res.Delivery, nil
}

// applyHeldAcks applies the acknowledgements held for deliveries of
// Callback-mode endpoints whose attempts were just recorded (or whose
// deadline passed, when a crash came between a record and this call). One
// held for a delivery that no longer awaits an acknowledgement (its
// attempt failed, so the event is sent again) is dropped.
func (e *Engine) applyHeldAcks(ctx context.Context, deliveryIDs []string) error {
	held, err := e.store.AckHeldTake(ctx, deliveryIDs)
	if err != nil {
		return fmt.Errorf("taking held acknowledgements: %w", err)
	}
	for i := range held {
		p := &held[i]
		// Applied now: the delivery ends after the attempt's record.
		if now := e.opts.Clock.Now(); now.After(p.Now) {
			p.Now = now
		}
		res, err := e.store.AckRecord(ctx, p)
		if errors.Is(err, ledger.ErrNotAwaitingAck) {
			e.opts.Logger.V(1).Info("held acknowledgement dropped: the delivery no longer awaits one", "delivery", p.DeliveryID)
			continue
		}
		if err != nil {
			return fmt.Errorf("applying the held acknowledgement of delivery %s: %w", p.DeliveryID, err)
		}
		e.opts.Metrics.observeAck(string(p.Outcome))
		e.settled(res)
	}
	return nil
}

// settled announces an exhaustion (and wakes the claim loop for its dead
// letter) or wakes it for a retry.
func (e *Engine) settled(res ledger.AckResult) {
	switch res.Delivery.State {
	case ledger.StateScheduled:
		e.wakeBy(res.Delivery.DueAt)
	case ledger.StateExhausted:
		e.exhausted(ExhaustedNotice{Delivery: res.Delivery, DeadLetter: res.DeadLetter})
	}
}

// decideAckTimeout is what follows an acknowledgement that did not come in
// time: the accepted attempt counts as failed, so the delivery is retried on
// the backoff of pol, the policy in force (the event's PolicyFor the
// endpoint's), until its horizon, then exhausted with AckTimeout.
func decideAckTimeout(pol *ledger.Policy, d *ledger.Delivery, now time.Time, rnd func() float64) ledger.Next {
	first := now
	if d.FirstAttemptAt != nil {
		first = *d.FirstAttemptAt
	}
	dec := pol.Backoff.Next(backoff.Input{Attempt: max(d.Attempts, 1), FirstAttemptAt: first, Now: now, Rand: rnd})
	if !dec.Retry {
		return ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustAckTimeout}
	}
	return ledger.Next{State: ledger.StateScheduled, DueAt: dec.At}
}

// sweepAckTimeouts moves on every delivery whose acknowledgement is overdue.
func (e *Engine) sweepAckTimeouts(ctx context.Context) error {
	now := e.opts.Clock.Now()
	expired, err := e.store.AckExpiredList(ctx, now, sweepBatch)
	if err != nil {
		return fmt.Errorf("listing overdue acknowledgements: %w", err)
	}
	if len(expired) == 0 {
		return nil
	}
	// An acknowledgement held when the process that recorded the attempt
	// died before applying it is applied now, before any timeout.
	ids := make([]string, len(expired))
	for i := range expired {
		ids[i] = expired[i].ID
	}
	if err := e.applyHeldAcks(ctx, ids); err != nil {
		return err
	}
	// Policies are read from the ledger once per sweep, for the reason
	// AckSecrets gives: this replica's cache may be older than the leader's
	// last registration.
	endpoints := map[string]*ledger.Endpoint{}
	for i := range expired {
		d := &expired[i]
		ep, ok := endpoints[d.EndpointID]
		if !ok {
			loaded, err := e.store.EndpointGet(ctx, d.EndpointID)
			if err != nil {
				return fmt.Errorf("loading endpoint %s: %w", d.EndpointID, err)
			}
			e.apply(loaded)
			ep, endpoints[d.EndpointID] = &loaded, &loaded
		}
		// The event's contract may replace the endpoint's policy: read it
		// (an acknowledgement timeout is rare enough for one read each).
		ev, err := e.store.EventGet(ctx, d.EventID)
		if err != nil {
			return fmt.Errorf("loading event %s: %w", d.EventID, err)
		}
		res, err := e.store.AckTimeoutRecord(ctx, &ledger.AckTimeoutParams{
			DeliveryID: d.ID, Next: decideAckTimeout(ev.PolicyFor(&ep.Policy), d, now, e.opts.Rand), Now: now,
		})
		if errors.Is(err, ledger.ErrNotAwaitingAck) {
			continue // acknowledged meanwhile: the ack won
		}
		if err != nil {
			return fmt.Errorf("recording an acknowledgement timeout: %w", err)
		}
		e.opts.Metrics.observeAck("timeout")
		e.settled(res)
	}
	return nil
}

// RecoveryStart records a recovery operation's first start and returns
// that record ever after (ledger.Recovery.RecoveryOperationStart).
func (e *Engine) RecoveryStart(ctx context.Context, operationKey, specHash, objectUID string) (ledger.RecoveryOperation, error) {
	op, err := e.store.RecoveryOperationStart(ctx, &ledger.RecoveryOperationParams{
		Key: operationKey, SpecHash: specHash, ObjectUID: objectUID, Now: e.opts.Clock.Now(),
	})
	if err != nil {
		return ledger.RecoveryOperation{}, fmt.Errorf("starting recovery operation %s: %w", operationKey, err)
	}
	return op, nil
}

// Recover applies one recovery action to one exhausted delivery, keyed by
// the operation (ledger.RecoveryOperationKey), so that repeating it
// changes nothing.
func (e *Engine) Recover(ctx context.Context, operationKey, deliveryID string, action ledger.RecoveryAction) (ledger.RecoveryItem, error) {
	now := e.opts.Clock.Now()
	item, err := e.store.RecoveryApply(ctx, &ledger.RecoveryApplyParams{
		OperationKey: operationKey, DeliveryID: deliveryID, Action: action,
		NewEventID: ledger.NewID("evt", now), NewDeliveryID: ledger.NewID("dlv", now), Now: now,
	})
	if err != nil {
		return ledger.RecoveryItem{}, fmt.Errorf("recovering delivery %s: %w", deliveryID, err)
	}
	if !item.Replayed {
		e.opts.Metrics.observeRecovery(item)
		if item.Outcome == ledger.OutcomeRetried || item.Outcome == ledger.OutcomeReissued || item.Outcome == ledger.OutcomeAwaitingReissue {
			e.wake()
		}
	}
	return item, nil
}

// ExhaustedList lists an endpoint's unresolved exhausted deliveries.
func (e *Engine) ExhaustedList(ctx context.Context, params *ledger.ExhaustedListParams) ([]ledger.ExhaustedDelivery, error) {
	return e.store.ExhaustedList(ctx, params)
}

// RecoveryItems returns an operation's items and how they stand.
func (e *Engine) RecoveryItems(ctx context.Context, operationKey string) ([]ledger.RecoveryItem, error) {
	return e.store.RecoveryItemsList(ctx, operationKey)
}

// ReplayList lists the events a replay considers (ledger.Recovery.ReplayList).
func (e *Engine) ReplayList(ctx context.Context, params *ledger.ReplayListParams) ([]ledger.ReplayCandidate, error) {
	return e.store.ReplayList(ctx, params)
}

// Replay sends one event to one endpoint for a replay operation, keyed by
// the operation and the event, so that repeating it changes nothing
// (ledger.Recovery.ReplayApply).
func (e *Engine) Replay(ctx context.Context, operationKey, eventID, endpointID string, onUnreplayable ledger.ReplayFallback) (ledger.RecoveryItem, error) {
	now := e.opts.Clock.Now()
	item, err := e.store.ReplayApply(ctx, &ledger.ReplayApplyParams{
		OperationKey: operationKey, EventID: eventID, EndpointID: endpointID, OnUnreplayable: onUnreplayable,
		NewEventID: ledger.NewID("evt", now), NewDeliveryID: ledger.NewID("dlv", now), Now: now,
	})
	if err != nil {
		return ledger.RecoveryItem{}, fmt.Errorf("replaying event %s to %s: %w", eventID, endpointID, err)
	}
	if !item.Replayed {
		e.opts.Metrics.observeRecovery(item)
		switch item.Outcome {
		case ledger.OutcomeReplayed, ledger.OutcomeReissued, ledger.OutcomeAwaitingReissue:
			e.wake()
		}
	}
	return item, nil
}
