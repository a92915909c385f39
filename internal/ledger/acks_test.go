package ledger

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeAcks records what the preambles hand to the driver.
type fakeAcks struct {
	applied []AckApplyParams
	held    bool
	state   DeliveryState
	err     error
	holds   int
}

func (f *fakeAcks) AckApply(_ context.Context, p AckApplyParams) (AckResult, error) {
	f.applied = append(f.applied, p)
	return AckResult{Delivery: Delivery{ID: p.DeliveryID, State: p.Transition.State}}, f.err
}

func (f *fakeAcks) AckHoldInsert(_ context.Context, _ string, p *AckRecordParams) (Delivery, bool, error) {
	f.holds++
	return Delivery{ID: p.DeliveryID, State: f.state}, f.held, f.err
}

func TestAckPreambles(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f := &fakeAcks{}

	res, err := AckRecord(ctx, f, &AckRecordParams{DeliveryID: "dlv_1", Outcome: AckRejected, Reason: "no", Now: now})
	if err != nil || res.Delivery.State != StateExhausted {
		t.Fatalf("AckRecord: %+v, %v", res, err)
	}
	a := f.applied[0]
	if a.Timeout || a.DeliveryID != "dlv_1" || a.Op != "acknowledge delivery dlv_1" || a.Transition.Reason != ExhaustAckRejected || !a.Now.Equal(now) {
		t.Errorf("AckRecord applied %+v", a)
	}

	next := Next{State: StateScheduled, DueAt: now.Add(time.Minute)}
	if _, err := AckTimeoutRecord(ctx, f, &AckTimeoutParams{DeliveryID: "dlv_2", Next: next, Now: now}); err != nil {
		t.Fatal(err)
	}
	a = f.applied[1]
	if !a.Timeout || a.Op != "acknowledgement timeout of delivery dlv_2" || !a.Transition.DueAt.Equal(next.DueAt) {
		t.Errorf("AckTimeoutRecord applied %+v", a)
	}

	// Refused before the driver is asked.
	for name, call := range map[string]func() error{
		"nil ack": func() error { _, err := AckRecord(ctx, f, nil); return err },
		"unknown outcome": func() error {
			_, err := AckRecord(ctx, f, &AckRecordParams{DeliveryID: "d", Outcome: "maybe"})
			return err
		},
		"nil timeout": func() error { _, err := AckTimeoutRecord(ctx, f, nil); return err },
		"timeout to delivered": func() error {
			_, err := AckTimeoutRecord(ctx, f, &AckTimeoutParams{DeliveryID: "d", Next: Next{State: StateDelivered}})
			return err
		},
		"nil hold": func() error { _, err := AckHold(ctx, f, nil); return err },
		"hold bad outcome": func() error {
			_, err := AckHold(ctx, f, &AckRecordParams{DeliveryID: "d", Outcome: "maybe"})
			return err
		},
	} {
		if err := call(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if len(f.applied) != 2 || f.holds != 0 {
		t.Errorf("refused params reached the driver: %d applies, %d holds", len(f.applied), f.holds)
	}
}

func TestAckHold(t *testing.T) {
	ctx := context.Background()
	p := &AckRecordParams{DeliveryID: "dlv_1", Outcome: AckProcessed}

	d, err := AckHold(ctx, &fakeAcks{held: true, state: StateInFlight}, p)
	if err != nil || d.State != StateInFlight {
		t.Errorf("held: %+v, %v", d, err)
	}
	// Not held: ErrNotInFlight with the delivery as it is, so that the
	// caller can apply an acknowledgement whose record landed meanwhile.
	d, err = AckHold(ctx, &fakeAcks{state: StateAwaitingAck}, p)
	if !errors.Is(err, ErrNotInFlight) || d.State != StateAwaitingAck {
		t.Errorf("not held: %+v, %v", d, err)
	}
	_, err = AckHold(ctx, &fakeAcks{err: ErrNotFound}, p)
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotInFlight) {
		t.Errorf("unknown delivery: %v", err)
	}
}
