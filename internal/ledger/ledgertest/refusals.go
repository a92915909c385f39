package ledgertest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The refusals of RecoveryApply, and the hook with which a driver checks
// them on events its own Settlement damaged (ExerciseRecoveryRefusals).

// testRecoveryRefusals covers AlreadyResolved, the replay window, and the
// errors that record nothing.
func testRecoveryRefusals(t *testing.T, f *fixture) {
	const ep = "shop/orders"
	orders := endpoint("shop", "orders", "order.*")
	orders.Policy.ReplayWindow = time.Hour
	f.upsert(orders, t0)

	// Not exhausted: scheduled, delivered.
	live := f.publish("shop", "order.created", t0).Deliveries[0]
	if got := f.apply("op-live", live.ID, ledger.RecoveryRetry, t0); got.Outcome != ledger.OutcomeRefused || got.Reason != ledger.RefusedAlreadyResolved {
		t.Fatalf("retry of a scheduled delivery: %+v", got)
	}
	f.attemptAll(at(time.Second), ledger.Next{State: ledger.StateDelivered})
	if got := f.apply("op-done", live.ID, ledger.RecoveryDismiss, at(time.Second)); got.Outcome != ledger.OutcomeRefused || got.Reason != ledger.RefusedAlreadyResolved {
		t.Fatalf("dismissal of a delivered delivery: %+v", got)
	}
	if d := f.delivery(live.ID); d.Resolution != ledger.ResolutionNone || d.ResolvedBy != "" {
		t.Fatalf("a refused recovery resolved the delivery: %+v", d)
	}

	// The replay window runs from the event's first attempt.
	f.publish("shop", "order.created", at(time.Minute))
	f.publish("shop", "order.created", at(time.Minute))
	exhausted := f.exhaustAll(at(time.Minute))
	d1, d2 := exhausted[0], exhausted[1]
	edge := d1.FirstAttemptAt.Add(time.Hour)
	if got := f.apply("op-w", d1.ID, ledger.RecoveryRetry, edge.Add(time.Microsecond)); got.Outcome != ledger.OutcomeRefused || got.Reason != ledger.RefusedReplayWindowExceeded {
		t.Fatalf("retry past the replay window: %+v", got)
	}
	if got := f.apply("op-w", d2.ID, ledger.RecoveryRetry, edge); got.Outcome != ledger.OutcomeRetried {
		t.Fatalf("retry at the end of the replay window: %+v", got)
	}
	// Reissue and Dismiss are not bounded by the window.
	if got := f.apply("op-w2", d1.ID, ledger.RecoveryDismiss, edge.Add(time.Hour)); got.Outcome != ledger.OutcomeDismissed {
		t.Fatalf("dismissal past the replay window: %+v", got)
	}
	f.wantCounts(ep, counts{Pending: 1, Delivered: 1})

	// A recorded refusal stands even once the policy would allow it.
	d3ID := f.publish("shop", "order.created", at(2*time.Hour)).Deliveries[0].ID
	f.exhaustAll(at(2 * time.Hour)) // and the retry above
	d3 := f.delivery(d3ID)
	late := at(4 * time.Hour)
	p := recoveryParams("op-x", d3.ID, ledger.RecoveryRetry, late)
	refused := f.applyP(p)
	if refused.Outcome != ledger.OutcomeRefused || refused.Reason != ledger.RefusedReplayWindowExceeded {
		t.Fatalf("retry past the replay window: %+v", refused)
	}
	orders.Policy.ReplayWindow = 0 // no limit
	f.upsert(orders, late)
	f.wantReplay(p, refused, ep)
	if got := f.apply("op-y", d3.ID, ledger.RecoveryRetry, late); got.Outcome != ledger.OutcomeRetried {
		t.Fatalf("retry without a replay window: %+v", got)
	}

	// Errors record nothing.
	_, err := f.s.RecoveryApply(f.ctx, recoveryParams("op-e", "dlv_unknown", ledger.RecoveryRetry, late))
	wantErr(t, "RecoveryApply of an unknown delivery", err, ledger.ErrNotFound)
	d4ID := f.publish("shop", "order.created", late).Deliveries[0].ID
	f.exhaustAll(late) // and the retry above
	d4 := f.delivery(d4ID)
	if _, err := f.s.RecoveryApply(f.ctx, recoveryParams("op-e", d4.ID, "Resend", late)); err == nil {
		t.Fatal("RecoveryApply accepted an unknown action")
	}
	if got := f.items("op-e"); len(got) != 0 {
		t.Fatalf("failed RecoveryApply calls recorded items: %+v", got)
	}
	wantEqual(t, "the delivery after an unknown action", f.delivery(d4.ID), d4)
}

// testRecoveryPayloadExpired prunes an event's data (Settlement.Prune) and
// checks that it can no longer be retried or copied, only requested.
func testRecoveryPayloadExpired(t *testing.T, f *fixture) {
	const ep = "shop/orders"
	orders := endpoint("shop", "orders", "order.*")
	orders.Policy.PayloadRetention = time.Minute
	orders.Policy.EvidenceRetention = 30 * 24 * time.Hour
	f.upsert(orders, t0)
	ev := f.publish("shop", "order.created", t0)
	orig := f.exhaustAll(at(time.Second))[0]

	now := at(time.Hour)
	if _, err := f.s.Prune(f.ctx, &ledger.PruneParams{
		Now: now, DefaultPayloadRetention: time.Minute, DefaultEvidenceRetention: 30 * 24 * time.Hour,
	}); err != nil {
		t.Fatalf("Prune: %v", err)
	}
	pruned, err := f.s.EventGet(f.ctx, ev.Event.ID)
	if err != nil {
		t.Fatalf("EventGet after Prune: %v", err)
	}
	if len(pruned.Data) != 0 || pruned.PayloadPrunedAt == nil {
		t.Fatalf("Prune kept the payload of an event terminal for longer than its retention: %+v", pruned)
	}
	listed := f.exhausted(ledger.ExhaustedListParams{EndpointID: ep})
	if len(listed) != 1 || !listed[0].PayloadPruned || listed[0].SecretsScrubbed {
		t.Fatalf("ExhaustedList of a pruned event: %+v", listed)
	}
	if got := f.apply("op-p", orig.ID, ledger.RecoveryRetry, now); got.Outcome != ledger.OutcomeRefused || got.Reason != ledger.RefusedPayloadExpired {
		t.Fatalf("retry of a pruned event: %+v", got)
	}
	// Nothing to copy, and nobody to ask.
	if got := f.apply("op-q", orig.ID, ledger.RecoveryReissue, now); got.Outcome != ledger.OutcomeRefused || got.Reason != ledger.RefusedNoReissueHandler {
		t.Fatalf("reissue of a pruned event without a handler: %+v", got)
	}
	f.upsert(endpoint("shop", "producer", ledger.ReissueRequestedEventType), now)
	if got := f.apply("op-r", orig.ID, ledger.RecoveryReissue, now); got.Outcome != ledger.OutcomeAwaitingReissue {
		t.Fatalf("reissue of a pruned event: %+v", got)
	}
	f.wantCounts(ep, counts{ExhaustedUnresolved: 1})
}

// Simulation stands in for the Settlement of a driver in
// ExerciseRecoveryRefusals: it removes, directly in the driver's tables,
// what scrubbing and pruning remove.
type Simulation struct {
	// ScrubSecrets removes the event's secrets (SecretNames stay).
	ScrubSecrets func(t *testing.T, s ledger.Store, eventID string)
	// PrunePayload removes the event's data.
	PrunePayload func(t *testing.T, s ledger.Store, eventID string)
}

// ExerciseRecoveryRefusals checks ReissueRequired and PayloadExpired, and
// ExhaustedList's flags, on events damaged by sim, so that the recovery
// rules are tested independently of the driver's Settlement.
func ExerciseRecoveryRefusals(t *testing.T, newStore func(t *testing.T) ledger.Store, sim Simulation) {
	t.Helper()
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"ScrubbedSecretsRequireAReissue": func(t *testing.T, f *fixture) {
			const ep = "shop/orders"
			f.upsert(endpoint("shop", "orders", "order.*"), t0)
			ev := f.insert(secretEvent("shop", "order.created", t0, "tok"))[0]
			orig := f.exhaustAll(at(time.Second))[0]
			sim.ScrubSecrets(t, f.s, ev.Event.ID)
			listed := f.exhausted(ledger.ExhaustedListParams{EndpointID: ep})
			if len(listed) != 1 || !listed[0].SecretsScrubbed || listed[0].PayloadPruned {
				t.Fatalf("ExhaustedList: %+v", listed)
			}
			p := recoveryParams("op", orig.ID, ledger.RecoveryRetry, at(time.Minute))
			it := f.applyP(p)
			if it.Outcome != ledger.OutcomeRefused || it.Reason != ledger.RefusedReissueRequired {
				t.Fatalf("retry of a scrubbed event: %+v", it)
			}
			f.wantReplay(p, it, ep)
			f.wantCounts(ep, counts{ExhaustedUnresolved: 1})
		},
		"PrunedPayloadExpires": func(t *testing.T, f *fixture) {
			const ep = "shop/orders"
			f.upsert(endpoint("shop", "orders", "order.*"), t0)
			ev := f.publish("shop", "order.created", t0)
			orig := f.exhaustAll(at(time.Second))[0]
			sim.PrunePayload(t, f.s, ev.Event.ID)
			listed := f.exhausted(ledger.ExhaustedListParams{EndpointID: ep})
			if len(listed) != 1 || !listed[0].PayloadPruned || listed[0].SecretsScrubbed {
				t.Fatalf("ExhaustedList: %+v", listed)
			}
			if got := f.apply("op", orig.ID, ledger.RecoveryRetry, at(time.Minute)); got.Outcome != ledger.OutcomeRefused || got.Reason != ledger.RefusedPayloadExpired {
				t.Fatalf("retry of a pruned event: %+v", got)
			}
			if got := f.apply("op2", orig.ID, ledger.RecoveryReissue, at(time.Minute)); got.Outcome != ledger.OutcomeRefused || got.Reason != ledger.RefusedNoReissueHandler {
				t.Fatalf("reissue of a pruned event without a handler: %+v", got)
			}
			f.upsert(endpoint("shop", "producer", ledger.ReissueRequestedEventType), at(time.Minute))
			it := f.apply("op3", orig.ID, ledger.RecoveryReissue, at(time.Minute))
			if it.Outcome != ledger.OutcomeAwaitingReissue {
				t.Fatalf("reissue of a pruned event: %+v", it)
			}
			req, err := f.s.EventGet(f.ctx, it.NewEventID)
			if err != nil {
				t.Fatalf("EventGet of the request: %v", err)
			}
			var data ledger.ReissueRequestData
			if err := json.Unmarshal(req.Data, &data); err != nil || data.OriginalEventID != ev.Event.ID || len(data.SecretNames) != 0 {
				t.Fatalf("request data %s: %+v, %v", req.Data, data, err)
			}
			f.wantCounts(ep, counts{ExhaustedUnresolved: 1})
			f.wantCounts("shop/producer", counts{Pending: 1})
		},
		"ScrubbedSecretsOutrankTheReplayWindow": func(t *testing.T, f *fixture) {
			orders := endpoint("shop", "orders", "order.*")
			orders.Policy.ReplayWindow = time.Minute
			f.upsert(orders, t0)
			ev := f.insert(secretEvent("shop", "order.created", t0, "tok"))[0]
			orig := f.exhaustAll(at(time.Second))[0]
			sim.ScrubSecrets(t, f.s, ev.Event.ID)
			sim.PrunePayload(t, f.s, ev.Event.ID)
			if got := f.apply("op", orig.ID, ledger.RecoveryRetry, at(time.Hour)); got.Reason != ledger.RefusedReissueRequired {
				t.Fatalf("retry of a scrubbed, pruned event past its window: %+v, want %s", got, ledger.RefusedReissueRequired)
			}
		},
	})
}
