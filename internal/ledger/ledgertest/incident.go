package ledgertest

import (
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The incident the Recovery suite replays end to end (CrowdRelay).

// testCrowdRelay replays the incident at store level: a confirmation whose
// one-time token was scrubbed after the delivery exhausted cannot be
// retried; a reissue asks the producer, whose replacement (a new event with
// a fresh token) completes the operation, and the original stays history.
func testCrowdRelay(t *testing.T, f *fixture) {
	const (
		ep       = "crowd/fans"
		producer = "crowd/producer"
	)
	fans := endpoint("crowd", "fans", "fan.*")
	fans.Policy.ReplayWindow = 24 * time.Hour
	fans.Policy.SecretGracePeriod = 0
	f.upsert(fans, t0)
	f.upsert(endpoint("crowd", "producer", ledger.ReissueRequestedEventType), t0)

	p := secretEvent("crowd", "fan.confirmation_requested", t0, "tok_first")
	p.IdempotencyKey = "fan-42-confirmation"
	ev := f.insert(p)[0]
	id := ev.Deliveries[0].ID
	f.claimOne("dispatcher", t0)
	f.mustRecord(attempt(id, "dispatcher", at(time.Second), 503, ledger.Next{State: ledger.StateScheduled, DueAt: at(time.Minute)}))
	f.claimOne("dispatcher", at(time.Minute))
	f.mustRecord(attempt(id, "dispatcher", at(time.Minute+time.Second), 503, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustMaxAttempts}))

	original, err := f.s.EventGet(f.ctx, ev.Event.ID)
	if err != nil {
		t.Fatalf("EventGet: %v", err)
	}
	if len(original.Secrets) != 0 || original.SecretsScrubAt == nil {
		t.Fatalf("the event's secrets were not scrubbed when its last pending delivery exhausted with a grace period of 0 "+
			"(Store contract, secret scrubbing): secrets present %v, SecretsScrubAt %v; ReissueRequired cannot be reached",
			len(original.Secrets) != 0, original.SecretsScrubAt)
	}
	wantEqual(t, "secret names after the scrub", original.SecretNames, []string{"confirmToken"})
	origDelivery := f.delivery(id)
	origAttempts, err := f.s.AttemptList(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	listed := f.exhausted(ledger.ExhaustedListParams{EndpointID: ep})
	if len(listed) != 1 || !listed[0].SecretsScrubbed || listed[0].PayloadPruned || listed[0].EventType != "fan.confirmation_requested" {
		t.Fatalf("ExhaustedList: %+v", listed)
	}

	now := at(time.Hour)
	retry := f.apply("dr-retry", id, ledger.RecoveryRetry, now)
	if retry.Outcome != ledger.OutcomeRefused || retry.Reason != ledger.RefusedReissueRequired {
		t.Fatalf("retry of a scrubbed event: %+v", retry)
	}
	f.wantCounts(ep, counts{ExhaustedUnresolved: 1})

	rp := recoveryParams("dr-reissue", id, ledger.RecoveryReissue, now)
	it := f.applyP(rp)
	if it.Outcome != ledger.OutcomeAwaitingReissue || it.NewEventID != rp.NewEventID {
		t.Fatalf("reissue of a scrubbed event: %+v", it)
	}
	req := f.claimOne("dispatcher", now)
	if req.Event.ID != rp.NewEventID || req.Delivery.EndpointID != producer || len(req.Event.Secrets) != 0 {
		t.Fatalf("the producer's request: %+v", req)
	}
	f.mustRecord(attempt(req.Delivery.ID, "dispatcher", now, 202, ledger.Next{State: ledger.StateDelivered}))

	// The producer mints a fresh token and publishes the replacement under
	// a key of its own (the original key would return the original).
	later := now.Add(time.Minute)
	replacement := secretEvent("crowd", "fan.confirmation_requested", later, "tok_fresh")
	replacement.IdempotencyKey = "fan-42-confirmation-reissue-1"
	replacement.ReissueOf = ev.Event.ID
	repl := f.insert(replacement)[0]
	if repl.Err != nil || repl.Duplicate || repl.Event.ID == ev.Event.ID {
		t.Fatalf("replacement: %+v", repl)
	}
	items := f.items("dr-reissue")
	if len(items) != 1 || items[0].Outcome != ledger.OutcomeReissued || items[0].NewEventID != repl.Event.ID ||
		items[0].NewDeliveryID != deliveryTo(t, repl, ep) || items[0].NewDeliveryState != ledger.StateScheduled {
		t.Fatalf("items after the replacement: %+v", items)
	}
	f.wantCounts(ep, counts{Pending: 1})

	// The replacement goes out with the fresh token under the new identity.
	c := f.claimOne("dispatcher", later)
	if c.Event.ID != repl.Event.ID || c.Event.ReissueOf != ev.Event.ID || string(c.Event.Secrets.Reveal()) != `{"confirmToken":"tok_fresh"}` {
		t.Fatalf("claimed replacement: %+v (secrets %q)", c.Event, c.Event.Secrets.Reveal())
	}

	// The original is history: unchanged but for the resolution.
	after, err := f.s.EventGet(f.ctx, ev.Event.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "the original event", canonEvent(t, after), canonEvent(t, original))
	resolved := origDelivery
	resolved.Resolution, resolved.ResolvedBy = ledger.ResolutionReissued, "dr-reissue"
	wantEqual(t, "the original delivery", f.delivery(id), resolved)
	atts, err := f.s.AttemptList(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "the original attempts", atts, origAttempts)
	wantEqual(t, "the original event's deliveries", idsOf(f.list(ledger.DeliveryBrowseParams{EventID: ev.Event.ID})), []string{id})
	if again := f.apply("dr-retry", id, ledger.RecoveryRetry, later); !again.Replayed || again.Reason != ledger.RefusedReissueRequired {
		t.Fatalf("repeated retry: %+v", again)
	}
}
