package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The preambles of the acknowledgement methods, run once for both
// drivers: params are checked and turned into an AckTransition here, and a
// driver implements only the transaction that applies or holds it
// (AckStatements). These are write paths: the driver is passed as a
// pointer-shaped value and AckApplyParams by value, so that going through
// package ledger costs no allocation.

// AckApplyParams is one acknowledgement, or its timeout, to apply.
type AckApplyParams struct {
	// Op names the operation in errors.
	Op         string
	DeliveryID string
	Transition AckTransition
	// Timeout: apply only once the delivery's AckDeadline is at or before
	// Now (AckTimeoutRecord).
	Timeout bool
	Now     time.Time
}

// AckStatements are the transactions of the acknowledgement methods.
type AckStatements interface {
	// AckApply moves a delivery awaiting its acknowledgement through
	// p.Transition, with its counters, dead letter and secrets, in one
	// transaction: ErrNotAwaitingAck (nothing changes) when it is in
	// another state or, with p.Timeout, its deadline is after p.Now;
	// ErrNotFound when it does not exist.
	AckApply(ctx context.Context, p AckApplyParams) (AckResult, error)
	// AckHoldInsert keeps p, in one transaction ordered with the
	// attempt's record, when the delivery is in flight to a Callback-mode
	// endpoint, and reports whether it did; it returns the delivery as it
	// is, or ErrNotFound.
	AckHoldInsert(ctx context.Context, op string, p *AckRecordParams) (d Delivery, held bool, err error)
}

// AckRecord implements Settlement.AckRecord over st.
func AckRecord(ctx context.Context, st AckStatements, p *AckRecordParams) (AckResult, error) {
	if p == nil {
		return AckResult{}, errors.New("acknowledge delivery: nil params")
	}
	tr, err := p.Transition()
	return applyAck(ctx, st, AckApplyParams{Op: "acknowledge delivery " + p.DeliveryID, DeliveryID: p.DeliveryID, Transition: tr, Now: p.Now}, err)
}

// AckTimeoutRecord implements Settlement.AckTimeoutRecord over st.
func AckTimeoutRecord(ctx context.Context, st AckStatements, p *AckTimeoutParams) (AckResult, error) {
	if p == nil {
		return AckResult{}, errors.New("acknowledgement timeout: nil params")
	}
	tr, err := p.Transition()
	return applyAck(ctx, st, AckApplyParams{
		Op: "acknowledgement timeout of delivery " + p.DeliveryID, DeliveryID: p.DeliveryID, Transition: tr, Timeout: true, Now: p.Now,
	}, err)
}

// applyAck applies a, unless its transition could not be made (invalid).
func applyAck(ctx context.Context, st AckStatements, a AckApplyParams, invalid error) (AckResult, error) {
	if invalid != nil {
		return AckResult{}, fmt.Errorf("%s: %w", a.Op, invalid)
	}
	return st.AckApply(ctx, a)
}

// AckHold implements HeldAcks.AckHold over st: an acknowledgement that
// could not be held is ErrNotInFlight, with the delivery as it is.
func AckHold(ctx context.Context, st AckStatements, p *AckRecordParams) (Delivery, error) {
	if p == nil {
		return Delivery{}, errors.New("hold acknowledgement: nil params")
	}
	op := "hold acknowledgement of delivery " + p.DeliveryID
	if _, err := p.Transition(); err != nil {
		return Delivery{}, fmt.Errorf("%s: %w", op, err)
	}
	d, held, err := st.AckHoldInsert(ctx, op, p)
	if err != nil {
		return Delivery{}, err
	}
	if !held {
		return d, fmt.Errorf("%s (state %s): %w", op, d.State, ErrNotInFlight)
	}
	return d, nil
}
