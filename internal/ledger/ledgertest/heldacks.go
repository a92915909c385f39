package ledgertest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// exerciseHeldAcks covers ledger.HeldAcks: an acknowledgement that
// overtakes its attempt's record is kept while the delivery is in flight,
// taken exactly once, and refused in every other state.
func exerciseHeldAcks(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"HeldWhileInFlightAndTakenOnce": testHeldWhileInFlight,
		"HoldRefusedOutsideFlight":      testHoldRefused,
		"LaterHoldReplaces":             testHoldReplaces,
		"ConcurrentTakesSeeItOnce":      testHeldTakenOnce,
	})
}

// inFlight publishes one event to a Callback-mode endpoint and claims its
// delivery.
func (f *fixture) inFlight() ledger.Delivery {
	f.t.Helper()
	f.upsert(callbackEndpoint("shop", "cb", "order.*"), t0)
	f.insert(event("shop", "order.created", t0))
	return f.claimOne("w", t0).Delivery
}

func (f *fixture) hold(p *ledger.AckRecordParams) ledger.Delivery {
	f.t.Helper()
	d, err := f.s.AckHold(f.ctx, p)
	if err != nil {
		f.t.Fatalf("AckHold(%s): %v", p.DeliveryID, err)
	}
	return d
}

func (f *fixture) take(ids ...string) []ledger.AckRecordParams {
	f.t.Helper()
	held, err := f.s.AckHeldTake(f.ctx, ids)
	if err != nil {
		f.t.Fatalf("AckHeldTake(%v): %v", ids, err)
	}
	return held
}

// testHeldWhileInFlight holds an acknowledgement before the attempt is
// recorded, checks that nothing else changed, and applies what is taken
// once the attempt lands.
func testHeldWhileInFlight(t *testing.T, f *fixture) {
	d := f.inFlight()
	long := strings.Repeat("x", ledger.MaxAckReason+10)
	p := &ledger.AckRecordParams{DeliveryID: d.ID, Outcome: ledger.AckRejected, Reason: long, Now: at(time.Second)}
	got := f.hold(p)
	wantEqual(t, "state of the held delivery", got.State, ledger.StateInFlight)
	wantEqual(t, "delivery after the hold", f.delivery(d.ID), got)
	if _, err := f.s.AckRecord(f.ctx, p); !errors.Is(err, ledger.ErrNotAwaitingAck) {
		t.Fatalf("AckRecord of an in-flight delivery = %v, want ErrNotAwaitingAck", err)
	}
	if held := f.take("dlv_other"); len(held) != 0 {
		t.Fatalf("AckHeldTake of another delivery = %+v, want none", held)
	}

	f.mustRecord(attempt(d.ID, "w", at(2*time.Second), 202, ledger.Next{State: ledger.StateAwaitingAck, AckDeadline: at(time.Hour)}))
	held := f.take(d.ID, "dlv_other")
	want := ledger.AckRecordParams{DeliveryID: d.ID, Outcome: ledger.AckRejected, Reason: ledger.TruncateAckReason(long), Now: at(time.Second)}
	if len(held) != 1 {
		t.Fatalf("AckHeldTake = %+v, want the one held acknowledgement", held)
	}
	wantEqual(t, "held acknowledgement", held[0], want)
	if again := f.take(d.ID); len(again) != 0 {
		t.Fatalf("second AckHeldTake = %+v, want none: an acknowledgement is taken once", again)
	}
	res := f.ack(&held[0])
	if res.Delivery.State != ledger.StateExhausted || res.Delivery.ExhaustReason != ledger.ExhaustAckRejected {
		t.Fatalf("applying the held rejection: %+v", res.Delivery)
	}
}

// testHoldRefused: only an in-flight delivery of a Callback-mode endpoint
// holds an acknowledgement; otherwise nothing is kept.
func testHoldRefused(t *testing.T, f *fixture) {
	ack := func(id string) *ledger.AckRecordParams {
		return &ledger.AckRecordParams{DeliveryID: id, Outcome: ledger.AckProcessed, Now: t0}
	}
	refused := func(what, id string, wantState ledger.DeliveryState) {
		t.Helper()
		d, err := f.s.AckHold(f.ctx, ack(id))
		if !errors.Is(err, ledger.ErrNotInFlight) || d.State != wantState {
			t.Fatalf("AckHold of %s = %s, %v; want ErrNotInFlight with state %s", what, d.State, err, wantState)
		}
		if held := f.take(id); len(held) != 0 {
			t.Fatalf("AckHold of %s kept %+v", what, held)
		}
	}
	if _, err := f.s.AckHold(f.ctx, ack("dlv_unknown")); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("AckHold of an unknown delivery = %v, want ErrNotFound", err)
	}
	if _, err := f.s.AckHold(f.ctx, &ledger.AckRecordParams{DeliveryID: "dlv_x", Outcome: "maybe", Now: t0}); err == nil {
		t.Fatal("AckHold accepted an unknown outcome")
	}

	f.upsert(callbackEndpoint("shop", "cb", "order.*"), t0)
	f.upsert(endpoint("shop", "plain", "invoice.*"), t0)
	cb := deliveryTo(t, f.insert(event("shop", "order.created", t0))[0], "shop/cb")
	refused("a scheduled delivery", cb, ledger.StateScheduled)
	f.claim("w", t0, time.Minute, 1, "shop/plain")
	f.mustRecord(attempt(cb, "w", t0, 202, ledger.Next{State: ledger.StateAwaitingAck, AckDeadline: at(time.Hour)}))
	refused("a delivery awaiting its acknowledgement", cb, ledger.StateAwaitingAck)
	f.ack(ack(cb))
	refused("a delivered delivery", cb, ledger.StateDelivered)

	plain := deliveryTo(t, f.insert(event("shop", "invoice.paid", t0))[0], "shop/plain")
	f.claimOne("w", t0)
	refused("an in-flight delivery of a Response-mode endpoint", plain, ledger.StateInFlight)
}

// testHoldReplaces: a receiver that acknowledges twice before the record
// is held to its last word.
func testHoldReplaces(t *testing.T, f *fixture) {
	d := f.inFlight()
	f.hold(&ledger.AckRecordParams{DeliveryID: d.ID, Outcome: ledger.AckRejected, Reason: "first", Now: t0})
	f.hold(&ledger.AckRecordParams{DeliveryID: d.ID, Outcome: ledger.AckProcessed, Now: at(time.Second)})
	held := f.take(d.ID)
	if len(held) != 1 || held[0].Outcome != ledger.AckProcessed || held[0].Reason != "" || !held[0].Now.Equal(at(time.Second)) {
		t.Fatalf("AckHeldTake = %+v, want only the later processed acknowledgement", held)
	}
}

// testHeldTakenOnce: replicas that take the same acknowledgement at once
// get it once between them.
func testHeldTakenOnce(t *testing.T, f *fixture) {
	d := f.inFlight()
	f.hold(&ledger.AckRecordParams{DeliveryID: d.ID, Outcome: ledger.AckProcessed, Now: t0})
	const takers = 8
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
		errs  []error
	)
	for range takers {
		wg.Go(func() {
			held, err := f.s.AckHeldTake(f.ctx, []string{d.ID})
			mu.Lock()
			defer mu.Unlock()
			total += len(held)
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if total != 1 || len(errs) != 0 {
		t.Fatalf("%d concurrent takes got %d acknowledgements (errors %v), want 1", takers, total, errs)
	}
}
