package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// An acknowledgement that arrives while its delivery's attempt is still
// being recorded waits for the record, polling every earlyAckPoll for at
// most earlyAckWait.
const (
	earlyAckPoll = 10 * time.Millisecond
	earlyAckWait = 10 * time.Second
)

// AckSecrets returns the secrets an acknowledgement of the delivery must be
// signed with: those its endpoint signs with now (both during a rotation).
// It implements ingest.Acknowledger.
func (e *Engine) AckSecrets(ctx context.Context, deliveryID string) ([]ledger.Sensitive, error) {
	d, err := e.store.DeliveryGet(ctx, deliveryID)
	if err != nil {
		return nil, err
	}
	st, err := e.endpointFor(ctx, d.EndpointID, 0)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	secrets := signingSecrets(st.cfg.Secrets, e.opts.Clock.Now())
	e.mu.Unlock()
	return secrets, nil
}

// Acknowledge applies a receiver's acknowledgement of a Callback-mode
// delivery. It implements ingest.Acknowledger; on ErrNotAwaitingAck the
// returned delivery is the current one.
func (e *Engine) Acknowledge(ctx context.Context, params *ledger.AckRecordParams) (ledger.Delivery, error) {
	res, err := e.store.AckRecord(ctx, params)
	for wait := time.Duration(0); errors.Is(err, ledger.ErrNotAwaitingAck); {
		// A fast receiver can acknowledge before the engine has recorded
		// the 2xx that started the wait: while the delivery is still in
		// flight, give the record a moment (any replica may hold it).
		d, getErr := e.store.DeliveryGet(ctx, params.DeliveryID)
		if getErr != nil || d.State != ledger.StateInFlight || wait >= earlyAckWait {
			if getErr == nil {
				return d, err
			}
			break
		}
		select {
		case <-ctx.Done():
			return d, err
		case <-time.After(earlyAckPoll):
		}
		wait += earlyAckPoll
		res, err = e.store.AckRecord(ctx, params)
	}
	if err != nil {
		return ledger.Delivery{}, err
	}
	e.opts.Metrics.observeAck(string(params.Outcome))
	e.settled(res)
	return res.Delivery, nil
}

// settled announces an exhaustion and wakes the claim loop for a dead
// letter or a retry.
func (e *Engine) settled(res ledger.AckResult) {
	if res.DeadLetter != nil {
		e.wake()
	}
	switch res.Delivery.State {
	case ledger.StateScheduled:
		e.wakeBy(res.Delivery.DueAt)
	case ledger.StateExhausted:
		e.opts.Logger.Info("delivery exhausted", "delivery", res.Delivery.ID, "endpoint", res.Delivery.EndpointID,
			"reason", res.Delivery.ExhaustReason, "attempts", res.Delivery.Attempts)
		if e.opts.OnExhausted != nil {
			e.opts.OnExhausted(ExhaustedNotice{Delivery: res.Delivery, DeadLetter: res.DeadLetter})
		}
	}
}

// decideAckTimeout is what follows an acknowledgement that did not come in
// time: the accepted attempt counts as failed, so the delivery is retried on
// the policy's backoff until its horizon, then exhausted with AckTimeout.
func decideAckTimeout(ep *ledger.Endpoint, d *ledger.Delivery, now time.Time, rnd func() float64) ledger.Next {
	first := now
	if d.FirstAttemptAt != nil {
		first = *d.FirstAttemptAt
	}
	dec := ep.Policy.Backoff.Next(backoff.Input{Attempt: max(d.Attempts, 1), FirstAttemptAt: first, Now: now, Rand: rnd})
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
	for i := range expired {
		d := &expired[i]
		st, err := e.endpointFor(ctx, d.EndpointID, 0)
		if err != nil {
			return err
		}
		e.mu.Lock()
		cfg := st.cfg
		e.mu.Unlock()
		res, err := e.store.AckTimeoutRecord(ctx, &ledger.AckTimeoutParams{
			DeliveryID: d.ID, Next: decideAckTimeout(&cfg, d, now, e.opts.Rand), Now: now,
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

// Recover applies one recovery action to one exhausted delivery, keyed by
// the operation (a DeliveryRecovery's UID), so that repeating it changes
// nothing.
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
