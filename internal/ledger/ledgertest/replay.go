package ledgertest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The replay part of the suite: ReplayList and ReplayApply. It pins,
// beyond the doc comments:
//   - A replay item has Action Replay and no DeliveryID, whatever its
//     outcome; its new delivery (Replayed) takes NewDeliveryID, is due at
//     Now, and is of the same event (the same webhook-id).
//   - Only the event's unresolved exhausted delivery to the endpoint is
//     linked (RetryOf) and resolved; delivered, cancelled and other
//     endpoints' deliveries never change.
//   - An event that reached no endpoint when it was published is, once
//     replayed, aged by its deliveries: Prune's default retention for
//     undelivered events no longer removes it.
//   - Concurrent replays of one event to one endpoint create one delivery:
//     the others are Skipped (AlreadyPending), or replayed items of the
//     same operation.

func exerciseReplay(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"ListByWindowAndTypes":        testReplayList,
		"ListPagesPastNonMatching":    testReplayListPages,
		"ToAnEndpointCreatedLater":    testReplayNewEndpoint,
		"PendingDeliveredExhausted":   testReplayExisting,
		"RefusalsAndReissues":         testReplayRefusals,
		"ErrorsRecordNothing":         testReplayErrors,
		"OneDeliveryUnderConcurrency": testReplayConcurrent,
	})
}

// replayParams returns ReplayApply params with fresh new IDs.
func replayParams(op, eventID, endpointID string, fb ledger.ReplayFallback, now time.Time) *ledger.ReplayApplyParams {
	return &ledger.ReplayApplyParams{
		OperationKey: op, EventID: eventID, EndpointID: endpointID, OnUnreplayable: fb,
		NewEventID: ledger.NewID("evt", now), NewDeliveryID: ledger.NewID("dlv", now), Now: now,
	}
}

// replayP applies p and fails on error.
func (f *fixture) replayP(p *ledger.ReplayApplyParams) ledger.RecoveryItem {
	f.t.Helper()
	it, err := f.s.ReplayApply(f.ctx, p)
	if err != nil {
		f.t.Fatalf("ReplayApply(%s, %s, %s): %v", p.OperationKey, p.EventID, p.EndpointID, err)
	}
	return it
}

// replay applies a replay of event to endpoint for op at now.
func (f *fixture) replay(op, eventID, endpointID string, fb ledger.ReplayFallback, now time.Time) ledger.RecoveryItem {
	f.t.Helper()
	return f.replayP(replayParams(op, eventID, endpointID, fb, now))
}

// wantReplayRepeat applies p again (fresh new IDs, a second later) and
// checks that it returns first with Replayed set and changes nothing.
func (f *fixture) wantReplayRepeat(p *ledger.ReplayApplyParams, first ledger.RecoveryItem, endpoints ...string) {
	f.t.Helper()
	before := f.snapshot(endpoints...)
	again := *p
	again.NewEventID, again.NewDeliveryID = ledger.NewID("evt", p.Now), ledger.NewID("dlv", p.Now)
	again.Now = p.Now.Add(time.Second)
	got := f.replayP(&again)
	want := first
	want.Replayed = true
	want.NewDeliveryState = f.currentState(first.NewDeliveryID)
	wantEqual(f.t, "repeated ReplayApply", got, want)
	wantEqual(f.t, "ledger after a repeated ReplayApply", f.snapshot(endpoints...), before)
}

// candidates lists replay candidates and returns their event IDs.
func (f *fixture) candidates(p ledger.ReplayListParams) []string {
	f.t.Helper()
	got, err := f.s.ReplayList(f.ctx, &p)
	if err != nil {
		f.t.Fatalf("ReplayList(%+v): %v", p, err)
	}
	ids := make([]string, 0, len(got))
	for _, c := range got {
		ids = append(ids, c.EventID)
	}
	return ids
}

func testReplayList(t *testing.T, f *fixture) {
	a := f.publish("shop", "order.created", t0).Event
	b := f.publish("shop", "invoice.paid", at(time.Minute)).Event
	c := f.publish("shop", "order.updated", at(2*time.Minute)).Event
	f.publish("shop", "hookkeeper.test", at(3*time.Minute))
	e := f.publish("shop", "order.created", at(4*time.Minute)).Event
	f.publish("other", "order.created", at(time.Minute))

	got, err := f.s.ReplayList(f.ctx, &ledger.ReplayListParams{
		Namespace: "shop", EventTypes: []string{"order.*"}, Since: t0, Until: at(4 * time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "order.* in [t0, t0+4m)", got, []ledger.ReplayCandidate{
		{EventID: a.ID, Type: "order.created", CreatedAt: t0},
		{EventID: c.ID, Type: "order.updated", CreatedAt: at(2 * time.Minute)},
	})
	all := ledger.ReplayListParams{Namespace: "shop", EventTypes: []string{"*"}, Since: t0, Until: at(time.Hour)}
	wantEqual(t, "* (the engine's own events left out)", f.candidates(all), []string{a.ID, b.ID, c.ID, e.ID})
	all.Limit = 2
	wantEqual(t, "the oldest two", f.candidates(all), []string{a.ID, b.ID})
	wantEqual(t, "since is inclusive, until exclusive", f.candidates(ledger.ReplayListParams{
		Namespace: "shop", EventTypes: []string{"order.created", "invoice.*"}, Since: at(time.Minute), Until: at(4*time.Minute + time.Microsecond),
	}), []string{b.ID, e.ID})
	wantEqual(t, "no since", f.candidates(ledger.ReplayListParams{
		Namespace: "shop", EventTypes: []string{"order.created"}, Until: at(time.Minute),
	}), []string{a.ID})
	wantEqual(t, "an empty namespace", f.candidates(ledger.ReplayListParams{
		Namespace: "empty", EventTypes: []string{"*"}, Until: at(time.Hour),
	}), []string{})
	if _, err := f.s.ReplayList(f.ctx, &ledger.ReplayListParams{Namespace: "shop", Until: at(time.Hour)}); err == nil {
		t.Fatal("ReplayList without event types was accepted")
	}
}

// testReplayListPages finds two matching events behind more than a page
// of others.
func testReplayListPages(t *testing.T, f *fixture) {
	var batch []*ledger.EventInsertParams
	for i := range ledger.ExhaustedTypedPage + 44 {
		batch = append(batch, event("shop", "invoice.paid", at(time.Duration(i)*time.Millisecond)))
	}
	f.insert(batch...)
	x := f.publish("shop", "order.created", at(time.Second)).Event
	y := f.publish("shop", "order.created", at(2*time.Second)).Event
	wantEqual(t, "order.* behind 300 others", f.candidates(ledger.ReplayListParams{
		Namespace: "shop", EventTypes: []string{"order.*"}, Since: t0, Until: at(time.Hour), Limit: 5,
	}), []string{x.ID, y.ID})
}

// testReplayNewEndpoint replays to an endpoint created after the events:
// one that went to another endpoint, and one that reached none.
func testReplayNewEndpoint(t *testing.T, f *fixture) {
	const billing = "shop/billing"
	f.upsert(withPolicy(endpoint("shop", "orders", "order.*"), 0, 30*24*time.Hour, 30*24*time.Hour), t0)
	delivered := f.publish("shop", "order.created", t0)
	f.deliverAll(at(time.Second))
	unrouted := f.publish("shop", "invoice.paid", at(2*time.Second))
	if len(unrouted.Deliveries) != 0 {
		t.Fatalf("an event nobody subscribes to has deliveries: %v", idsOf(unrouted.Deliveries))
	}
	ordersDelivery := f.delivery(delivered.Deliveries[0].ID)

	now := at(time.Hour)
	f.upsert(endpoint("shop", "billing", "order.*", "invoice.*"), now)
	p := replayParams("op-1", delivered.Event.ID, billing, ledger.ReplayRefuse, now)
	it := f.replayP(p)
	wantEqual(t, "replay item", it, ledger.RecoveryItem{
		OperationKey: "op-1", EventID: delivered.Event.ID, Action: ledger.RecoveryReplay, Outcome: ledger.OutcomeReplayed,
		NewDeliveryID: p.NewDeliveryID, NewDeliveryState: ledger.StateScheduled, CreatedAt: now,
	})
	wantEqual(t, "the replayed delivery", f.delivery(p.NewDeliveryID), ledger.Delivery{
		ID: p.NewDeliveryID, EventID: delivered.Event.ID, EndpointID: billing, State: ledger.StateScheduled, DueAt: now, CreatedAt: now,
		Resend: true, // it pays for itself from the retry budget (ADR 0035)
	})
	wantEqual(t, "the other endpoint's delivery", f.delivery(ordersDelivery.ID), ordersDelivery)
	f.wantCounts(billing, counts{Pending: 1})
	f.wantReplayRepeat(p, it, billing, "shop/orders")

	q := replayParams("op-1", unrouted.Event.ID, billing, ledger.ReplayRefuse, now)
	if got := f.replayP(q); got.Outcome != ledger.OutcomeReplayed || got.NewDeliveryID != q.NewDeliveryID {
		t.Fatalf("replay of an event that reached no endpoint: %+v", got)
	}
	f.wantCounts(billing, counts{Pending: 2})
	// Once replayed, the default retention of events that reached no
	// endpoint no longer applies to it.
	f.prune(now.Add(2*time.Hour), 0, time.Minute, time.Hour)
	if ev := f.getEvent(unrouted.Event.ID); len(ev.Data) == 0 {
		t.Fatalf("Prune removed the payload of a replayed event with a pending delivery: %+v", ev)
	}

	// The same identity goes out, and the items follow it.
	claimed := f.claim("w", now, time.Minute, 10)
	sent := map[string]string{}
	for _, c := range claimed {
		sent[c.Delivery.ID] = c.Event.ID
		f.mustRecord(attempt(c.Delivery.ID, "w", now.Add(time.Second), 200, ledger.Next{State: ledger.StateDelivered}))
	}
	wantEqual(t, "claimed replays (delivery → event)", sent, map[string]string{
		p.NewDeliveryID: delivered.Event.ID, q.NewDeliveryID: unrouted.Event.ID,
	})
	items := f.items("op-1")
	if len(items) != 2 || items[0].EventID != delivered.Event.ID || items[1].EventID != unrouted.Event.ID {
		t.Fatalf("items of op-1 in the order applied: %+v", items)
	}
	for _, it := range items {
		if it.NewDeliveryState != ledger.StateDelivered || it.DeliveryID != "" || it.Action != ledger.RecoveryReplay {
			t.Fatalf("item after its replay was delivered: %+v", it)
		}
	}
	f.wantCounts(billing, counts{Delivered: 2})
}

// testReplayExisting replays events the endpoint already had: pending
// ones are skipped, delivered ones sent again, an exhausted one retried
// and resolved.
func testReplayExisting(t *testing.T, f *fixture) {
	const billing = "shop/billing"
	f.upsert(endpoint("shop", "billing", "order.*"), t0)
	first := f.publish("shop", "order.created", t0)
	second := f.publish("shop", "order.created", t0)
	claimed := f.claim("w", t0, time.Minute, 10)
	if len(claimed) != 2 {
		t.Fatalf("claimed %d deliveries, want 2", len(claimed))
	}
	byEvent := map[string]string{claimed[0].Event.ID: claimed[0].Delivery.ID, claimed[1].Event.ID: claimed[1].Delivery.ID}
	delivered := f.mustRecord(attempt(byEvent[first.Event.ID], "w", at(time.Second), 200, ledger.Next{State: ledger.StateDelivered}))
	exhausted := f.mustRecord(attempt(byEvent[second.Event.ID], "w", at(time.Second), 503,
		ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustMaxAttempts}))
	pending := f.publish("shop", "order.created", at(time.Minute))
	f.wantCounts(billing, counts{Pending: 1, Delivered: 1, ExhaustedUnresolved: 1})

	now := at(time.Hour)
	before := f.snapshot(billing)
	skip := f.replay("op-1", pending.Event.ID, billing, ledger.ReplayRefuse, now)
	wantEqual(t, "replay of an event on its way", skip, ledger.RecoveryItem{
		OperationKey: "op-1", EventID: pending.Event.ID, Action: ledger.RecoveryReplay, Outcome: ledger.OutcomeSkipped,
		Reason: ledger.SkippedAlreadyPending, CreatedAt: now,
	})
	wantEqual(t, "ledger after a skip", f.snapshot(billing), before)

	p := replayParams("op-1", first.Event.ID, billing, ledger.ReplayRefuse, now)
	if got := f.replayP(p); got.Outcome != ledger.OutcomeReplayed {
		t.Fatalf("replay of a delivered event: %+v", got)
	}
	if d := f.delivery(p.NewDeliveryID); d.RetryOf != "" || d.EventID != first.Event.ID {
		t.Fatalf("replay of a delivered event: %+v", d)
	}
	wantEqual(t, "the delivered original", f.delivery(delivered.ID), delivered)

	q := replayParams("op-1", second.Event.ID, billing, ledger.ReplayRefuse, now)
	if got := f.replayP(q); got.Outcome != ledger.OutcomeReplayed || got.DeliveryID != "" {
		t.Fatalf("replay of an exhausted event: %+v", got)
	}
	if d := f.delivery(q.NewDeliveryID); d.RetryOf != exhausted.ID || d.EventID != second.Event.ID {
		t.Fatalf("replay of an exhausted event: %+v", d)
	}
	resolved := exhausted
	resolved.Resolution, resolved.ResolvedBy = ledger.ResolutionRetried, "op-1"
	wantEqual(t, "the exhausted original after its replay", f.delivery(exhausted.ID), resolved)
	f.wantCounts(billing, counts{Pending: 3, Delivered: 1})
	if got := f.exhausted(ledger.ExhaustedListParams{EndpointID: billing}); len(got) != 0 {
		t.Fatalf("a replayed delivery is still listed as exhausted: %v", exhaustedIDs(got))
	}

	// Another operation finds the replays on their way.
	if got := f.replay("op-2", first.Event.ID, billing, ledger.ReplayRefuse, now); got.Outcome != ledger.OutcomeSkipped {
		t.Fatalf("a second replay while the first is on its way: %+v", got)
	}
	wantEqual(t, "outcomes of op-1", outcomesOf(f.items("op-1")), []ledger.RecoveryOutcome{
		ledger.OutcomeSkipped, ledger.OutcomeReplayed, ledger.OutcomeReplayed,
	})
}

// testReplayRefusals refuses what a Retry refuses, and reissues it with
// the Reissue fallback: a copy to the endpoint only, or a request whose
// replacement completes the item.
func testReplayRefusals(t *testing.T, f *fixture) {
	const (
		billing  = "shop/billing"
		archive  = "shop/archive"
		producer = "shop/producer"
	)
	f.upsert(withPolicy(endpoint("shop", "orders", "order.*"), 0, time.Minute, 30*24*time.Hour), t0)
	b := endpoint("shop", "billing", "order.*")
	b.Policy.ReplayWindow = time.Hour
	f.upsert(b, t0)
	f.upsert(endpoint("shop", "archive", "invoice.*"), t0) // no window
	secret := f.insert(tokenEvent("shop", "order.created", t0, "tok_1"))[0]
	old := f.publish("shop", "order.created", t0)
	pruned := f.publish("shop", "order.created", t0)
	f.deliverAll(at(time.Second)) // to orders and billing; the secrets go
	f.wantSecrets(secret.Event.ID, false, ptr(at(time.Second)), nil)

	within := at(30 * time.Minute)
	before := f.snapshot(billing, archive)
	if got := f.replay("op-r", secret.Event.ID, billing, ledger.ReplayRefuse, within); got.Outcome != ledger.OutcomeRefused ||
		got.Reason != ledger.RefusedReissueRequired {
		t.Fatalf("replay of scrubbed secrets: %+v", got)
	}
	late := at(2 * time.Hour)
	p := replayParams("op-r", old.Event.ID, billing, ledger.ReplayRefuse, late)
	refused := f.replayP(p)
	if refused.Outcome != ledger.OutcomeRefused || refused.Reason != ledger.RefusedReplayWindowExceeded || refused.NewDeliveryID != "" {
		t.Fatalf("replay past the window: %+v", refused)
	}
	wantEqual(t, "ledger after refusals", f.snapshot(billing, archive), before)
	f.wantReplayRepeat(p, refused, billing)

	// Reissued instead: past the window, a copy for billing alone.
	cp := replayParams("op-x", old.Event.ID, billing, ledger.ReplayReissue, late)
	if got := f.replayP(cp); got.Outcome != ledger.OutcomeReissued || got.NewEventID != cp.NewEventID || got.NewDeliveryID != cp.NewDeliveryID {
		t.Fatalf("reissue past the window: %+v", got)
	}
	copied := canonEvent(t, f.getEvent(cp.NewEventID))
	wantEqual(t, "the copy", copied, ledger.Event{ID: cp.NewEventID, Namespace: "shop", Type: "order.created",
		Data: canon(t, old.Event.Data), ReissueOf: old.Event.ID, CreatedAt: late})
	wantEqual(t, "the copy's deliveries", endpointsOf(f.list(ledger.DeliveryBrowseParams{EventID: cp.NewEventID})), []string{billing})

	// Scrubbed secrets: nobody to ask, then the producer.
	if got := f.replay("op-x", secret.Event.ID, billing, ledger.ReplayReissue, late); got.Outcome != ledger.OutcomeRefused ||
		got.Reason != ledger.RefusedNoReissueHandler {
		t.Fatalf("reissue without a handler: %+v", got)
	}
	f.upsert(endpoint("shop", "producer", ledger.ReissueRequestedEventType), late)
	rq := replayParams("op-y", secret.Event.ID, billing, ledger.ReplayReissue, late)
	asked := f.replayP(rq)
	if asked.Outcome != ledger.OutcomeAwaitingReissue || asked.NewEventID != rq.NewEventID {
		t.Fatalf("reissue of scrubbed secrets: %+v", asked)
	}
	var data ledger.ReissueRequestData
	if err := json.Unmarshal(f.getEvent(rq.NewEventID).Data, &data); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "request data", data, ledger.ReissueRequestData{
		OriginalEventID: secret.Event.ID, EventType: "order.created", Endpoint: billing, Operation: "op-y",
		SecretNames: []string{"confirmToken"},
	})
	f.wantCounts(producer, counts{Pending: 1})
	// The producer addresses the replacement to the endpoint named.
	repl := tokenEvent("shop", "order.created", late, "tok_2")
	repl.ReissueOf, repl.Endpoint = secret.Event.ID, billing
	r := f.insert(repl)[0]
	if r.Err != nil {
		t.Fatalf("replacement: %v", r.Err)
	}
	wantEqual(t, "op-y after the replacement", f.items("op-y"), []ledger.RecoveryItem{{
		OperationKey: "op-y", EventID: secret.Event.ID, Action: ledger.RecoveryReplay, Outcome: ledger.OutcomeReissued,
		NewEventID: r.Event.ID, NewDeliveryID: deliveryTo(t, r, billing), NewDeliveryState: ledger.StateScheduled, CreatedAt: late,
	}})

	// A pruned payload, to an endpoint without a window.
	f.prune(late, 0, time.Minute, 30*24*time.Hour)
	if ev := f.getEvent(pruned.Event.ID); ev.PayloadPrunedAt == nil {
		t.Fatalf("Prune kept the payload: %+v", ev)
	}
	if got := f.replay("op-r", pruned.Event.ID, archive, ledger.ReplayRefuse, late); got.Outcome != ledger.OutcomeRefused ||
		got.Reason != ledger.RefusedPayloadExpired {
		t.Fatalf("replay of a pruned payload: %+v", got)
	}
	f.wantCounts(archive, counts{})
}

// testReplayErrors: an unknown event, an endpoint that is not there, and
// another namespace are errors that record nothing.
func testReplayErrors(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "billing", "order.*"), t0)
	f.upsert(endpoint("other", "billing", "order.*"), t0)
	f.upsert(endpoint("shop", "gone", "order.*"), t0)
	ev := f.publish("shop", "order.created", t0).Event
	if _, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: "shop/gone", Now: t0}); err != nil {
		t.Fatal(err)
	}
	now := at(time.Minute)
	for _, tc := range []struct {
		name, event, endpoint string
		want                  error
	}{
		{"an unknown event", "evt_unknown", "shop/billing", ledger.ErrNotFound},
		{"an unknown endpoint", ev.ID, "shop/nobody", ledger.ErrEndpointDeleted},
		{"a deleted endpoint", ev.ID, "shop/gone", ledger.ErrEndpointDeleted},
		{"another namespace", ev.ID, "other/billing", ledger.ErrReplayNamespace},
	} {
		_, err := f.s.ReplayApply(f.ctx, replayParams("op-e", tc.event, tc.endpoint, ledger.ReplayRefuse, now))
		wantErr(t, "ReplayApply of "+tc.name, err, tc.want)
	}
	if _, err := f.s.ReplayApply(f.ctx, replayParams("op-e", ev.ID, "shop/billing", "Auto", now)); err == nil {
		t.Fatal("ReplayApply accepted an unknown fallback")
	}
	if got := f.items("op-e"); len(got) != 0 {
		t.Fatalf("failed replays recorded items: %+v", got)
	}
}

// testReplayConcurrent replays one event to one endpoint from several
// operations at once, and another from one operation several times.
func testReplayConcurrent(t *testing.T, f *fixture) {
	const billing = "shop/billing"
	one := f.publish("shop", "order.created", t0).Event
	two := f.publish("shop", "order.created", t0).Event
	f.upsert(endpoint("shop", "billing", "order.*"), t0)
	now := at(time.Minute)
	const n = 6
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		outs = map[ledger.RecoveryOutcome]int{}
		same = map[string]int{}
	)
	for i := range n {
		wg.Go(func() {
			a, errA := f.s.ReplayApply(f.ctx, replayParams(fmt.Sprintf("op-%d", i), one.ID, billing, ledger.ReplayRefuse, now))
			b, errB := f.s.ReplayApply(f.ctx, replayParams("op-same", two.ID, billing, ledger.ReplayRefuse, now))
			mu.Lock()
			defer mu.Unlock()
			if errA != nil || errB != nil {
				errs = append(errs, errA, errB)
				return
			}
			outs[a.Outcome]++
			same[b.NewDeliveryID]++
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent replays: %v", errs)
	}
	wantEqual(t, "outcomes of concurrent operations", outs, map[ledger.RecoveryOutcome]int{
		ledger.OutcomeReplayed: 1, ledger.OutcomeSkipped: n - 1,
	})
	if len(same) != 1 {
		t.Fatalf("one operation replayed one event as %v", same)
	}
	for _, ev := range []string{one.ID, two.ID} {
		if got := f.list(ledger.DeliveryBrowseParams{EventID: ev}); len(got) != 1 {
			t.Fatalf("deliveries of %s: %v, want one", ev, idsOf(got))
		}
	}
	f.wantCounts(billing, counts{Pending: 2})
}
