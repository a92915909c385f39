package ledgertest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// The Recovery part of the suite: retry budgets (budgets.go), ExhaustedList
// (exhausted.go), recovery operations (here), their refusals (refusals.go)
// and the incident replayed end to end (incident.go). It pins, beyond the
// doc comments:
//   - A Retry item has no NewEventID (the event is the same); a Reissue
//     request item's NewEventID is the request event until the replacement
//     arrives, then the replacement; its NewDeliveryID is empty until then.
//   - The request event's deliveries get store-generated IDs; the copy's one
//     delivery and a retry's delivery take NewDeliveryID.
//   - A retry's and a reissued copy's delivery, and every delivery of an
//     event published with ReissueOf, are re-sends (Resend); a reissue
//     request's are not. A re-send's first attempt is no first attempt
//     for the retry budget.
//   - Refusals are recorded: a repeat returns the same refusal even when
//     the conditions changed since.
//   - Reissue copies only an event that never carried secrets and still
//     has its data; any other event gets a reissue request.
//   - Several items waiting for a replacement of one event all complete
//     with the first replacement inserted; later ones change nothing.
//   - A pair already applied returns its item whatever the action asked
//     the second time.
//   - Unknown deliveries are ErrNotFound, unknown actions an error, and a
//     Retry or Reissue of a deleted endpoint's delivery
//     ledger.ErrEndpointDeleted (Dismiss works); nothing is recorded then.

func exerciseRecovery(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"BudgetArithmeticAndMinutes":           testBudgetArithmetic,
		"BudgetSpentOnceUnderConcurrency":      testBudgetConcurrent,
		"BudgetPacedOverTheMinute":             testBudgetPaced,
		"BudgetNotRaisedByResends":             testBudgetNotRaisedByResends,
		"ExhaustedListFilters":                 testExhaustedListFilters,
		"ExhaustedListPagesPastNonMatching":    testExhaustedListPages,
		"Retry":                                testRecoveryRetry,
		"ReissueCopy":                          testRecoveryReissueCopy,
		"ReissueRequestCompletedByReplacement": testRecoveryReissueRequest,
		"ReissueRequestWithoutHandler":         testRecoveryNoHandler,
		"Dismiss":                              testRecoveryDismiss,
		"DeletedEndpoint":                      testRecoveryDeletedEndpoint,
		"Refusals":                             testRecoveryRefusals,
		"EveryActionTwiceHasOneEffect":         testRecoveryTwice,
		"CrowdRelay":                           testCrowdRelay,
		"PayloadExpired":                       testRecoveryPayloadExpired,
		"OperationFirstStartWins":              testOperationFirstStartWins,
		"OperationStartOnceUnderConcurrency":   testOperationStartConcurrent,
	})
}

// exhaustAll claims every due delivery at now and exhausts each with one
// failed attempt (HTTP 503, MaxAttempts) at now, in one batch; it returns
// the exhausted deliveries in claim order.
func (f *fixture) exhaustAll(now time.Time) []ledger.Delivery {
	f.t.Helper()
	return f.attemptAll(now, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustMaxAttempts})
}

// attemptAll claims every due delivery at now and records one attempt of
// each at now, moving it to next (HTTP 503 unless next is delivered).
func (f *fixture) attemptAll(now time.Time, next ledger.Next) []ledger.Delivery {
	f.t.Helper()
	claimed := f.claim("w", now, time.Minute, 1000)
	status := 503
	if next.State == ledger.StateDelivered {
		status = 200
	}
	ps := make([]*ledger.AttemptRecordParams, len(claimed))
	for i, c := range claimed {
		ps[i] = attempt(c.Delivery.ID, "w", now, status, next)
	}
	res, err := f.s.AttemptRecordMany(f.ctx, ps)
	if err != nil {
		f.t.Fatalf("AttemptRecordMany: %v", err)
	}
	out := make([]ledger.Delivery, len(res))
	for i, r := range res {
		if r.Err != nil {
			f.t.Fatalf("AttemptRecordMany item %d: %v", i, r.Err)
		}
		out[i] = r.Delivery
	}
	return out
}

// recoveryParams returns RecoveryApply params with fresh new IDs.
func recoveryParams(op, deliveryID string, action ledger.RecoveryAction, now time.Time) *ledger.RecoveryApplyParams {
	return &ledger.RecoveryApplyParams{
		OperationKey: op, DeliveryID: deliveryID, Action: action,
		NewEventID: ledger.NewID("evt", now), NewDeliveryID: ledger.NewID("dlv", now), Now: now,
	}
}

// applyP applies p and fails on error.
func (f *fixture) applyP(p *ledger.RecoveryApplyParams) ledger.RecoveryItem {
	f.t.Helper()
	it, err := f.s.RecoveryApply(f.ctx, p)
	if err != nil {
		f.t.Fatalf("RecoveryApply(%s, %s, %s): %v", p.OperationKey, p.DeliveryID, p.Action, err)
	}
	return it
}

// apply applies action to a delivery for operation op at now.
func (f *fixture) apply(op, deliveryID string, action ledger.RecoveryAction, now time.Time) ledger.RecoveryItem {
	f.t.Helper()
	return f.applyP(recoveryParams(op, deliveryID, action, now))
}

// wantReplay applies p again (with fresh new IDs) and checks that it
// returns first with Replayed set and changes no delivery, event or
// counter of the endpoints.
func (f *fixture) wantReplay(p *ledger.RecoveryApplyParams, first ledger.RecoveryItem, endpoints ...string) {
	f.t.Helper()
	before := f.snapshot(endpoints...)
	again := *p
	again.NewEventID, again.NewDeliveryID = ledger.NewID("evt", p.Now), ledger.NewID("dlv", p.Now)
	again.Now = p.Now.Add(time.Second)
	got := f.applyP(&again)
	want := first
	want.Replayed = true
	want.NewDeliveryState = f.currentState(first.NewDeliveryID)
	wantEqual(f.t, "repeated RecoveryApply", got, want)
	wantEqual(f.t, "ledger after a repeated RecoveryApply", f.snapshot(endpoints...), before)
	if _, err := f.s.EventGet(f.ctx, again.NewEventID); err == nil {
		f.t.Fatalf("a repeated RecoveryApply inserted event %s", again.NewEventID)
	}
}

// currentState is the state of delivery id, "" for none.
func (f *fixture) currentState(id string) ledger.DeliveryState {
	f.t.Helper()
	if id == "" {
		return ""
	}
	return f.delivery(id).State
}

// ledgerSnapshot is every delivery and the counters of some endpoints.
type ledgerSnapshot struct {
	Deliveries []ledger.Delivery
	Counts     map[string]counts
}

func (f *fixture) snapshot(endpoints ...string) ledgerSnapshot {
	f.t.Helper()
	s := ledgerSnapshot{Deliveries: f.list(ledger.DeliveryBrowseParams{Limit: ledger.MaxListLimit}), Counts: map[string]counts{}}
	for _, ep := range endpoints {
		st := f.stats(ep)
		s.Counts[ep] = counts{st.Pending, st.InFlight, st.AwaitingAck, st.Delivered, st.ExhaustedUnresolved, st.Cancelled}
	}
	return s
}

// items lists an operation's items.
func (f *fixture) items(op string) []ledger.RecoveryItem {
	f.t.Helper()
	got, err := f.s.RecoveryItemsList(f.ctx, op)
	if err != nil {
		f.t.Fatalf("RecoveryItemsList(%s): %v", op, err)
	}
	return got
}

// secretEvent is an event of type typ carrying one-time secrets.
func secretEvent(ns, typ string, now time.Time, token string) *ledger.EventInsertParams {
	p := event(ns, typ, now)
	p.Secrets = sensitive.Bytes(`{"confirmToken":"` + token + `"}`)
	p.SecretNames = []string{"confirmToken"}
	return p
}

// testRecoveryRetry retries an exhausted delivery and follows the new one
// to delivered.
func testRecoveryRetry(t *testing.T, f *fixture) {
	const ep = "shop/orders"
	f.upsert(endpoint("shop", "orders", "order.*"), t0)
	ev := f.publish("shop", "order.created", t0)
	orig := f.exhaustAll(at(time.Second))[0]
	f.wantCounts(ep, counts{ExhaustedUnresolved: 1})

	now := at(time.Minute)
	p := recoveryParams("op-1", orig.ID, ledger.RecoveryRetry, now)
	it := f.applyP(p)
	wantEqual(t, "retry item", it, ledger.RecoveryItem{
		OperationKey: "op-1", DeliveryID: orig.ID, EventID: ev.Event.ID, Action: ledger.RecoveryRetry,
		Outcome: ledger.OutcomeRetried, NewDeliveryID: p.NewDeliveryID, NewDeliveryState: ledger.StateScheduled, CreatedAt: now,
	})
	wantEqual(t, "the retry", f.delivery(p.NewDeliveryID), ledger.Delivery{
		ID: p.NewDeliveryID, EventID: ev.Event.ID, EndpointID: ep, State: ledger.StateScheduled,
		DueAt: now, CreatedAt: now, RetryOf: orig.ID, Resend: true,
	})
	resolved := orig
	resolved.Resolution, resolved.ResolvedBy = ledger.ResolutionRetried, "op-1"
	wantEqual(t, "the original after the retry", f.delivery(orig.ID), resolved)
	f.wantCounts(ep, counts{Pending: 1})
	if got := f.exhausted(ledger.ExhaustedListParams{EndpointID: ep}); len(got) != 0 {
		t.Fatalf("a retried delivery is still listed as exhausted: %v", exhaustedIDs(got))
	}

	f.wantReplay(p, it, ep)
	wantEqual(t, "items", f.items("op-1"), []ledger.RecoveryItem{it})

	// The retry resends the same event identity, and the item follows it.
	c := f.claimOne("w", now)
	if c.Delivery.ID != p.NewDeliveryID || c.Event.ID != ev.Event.ID {
		t.Fatalf("claimed delivery %s of event %s, want the retry %s of %s", c.Delivery.ID, c.Event.ID, p.NewDeliveryID, ev.Event.ID)
	}
	if got := f.items("op-1"); len(got) != 1 || got[0].NewDeliveryState != ledger.StateInFlight {
		t.Fatalf("items while the retry is in flight: %+v", got)
	}
	f.mustRecord(attempt(p.NewDeliveryID, "w", now.Add(time.Second), 204, ledger.Next{State: ledger.StateDelivered}))
	if got := f.items("op-1"); len(got) != 1 || got[0].NewDeliveryState != ledger.StateDelivered {
		t.Fatalf("items after the retry was delivered: %+v", got)
	}
	f.wantCounts(ep, counts{Delivered: 1})
	wantEqual(t, "the original after its retry was delivered", f.delivery(orig.ID), resolved)
	if atts, err := f.s.AttemptList(f.ctx, orig.ID); err != nil || len(atts) != 1 {
		t.Fatalf("attempts of the original: %v, %v; want its one attempt", atts, err)
	}
	if got := f.items("op-unknown"); len(got) != 0 {
		t.Fatalf("items of an unknown operation: %+v", got)
	}
}

// testRecoveryReissueCopy reissues a complete event without secrets: a
// copy with one delivery to the same endpoint.
func testRecoveryReissueCopy(t *testing.T, f *fixture) {
	const ep = "shop/orders"
	f.upsert(endpoint("shop", "orders", "order.*"), t0)
	f.upsert(endpoint("shop", "other", "order.created"), t0)
	ev := f.publish("shop", "order.created", t0)
	f.exhaustAll(at(time.Second))
	orig := f.delivery(deliveryTo(t, ev, ep))

	now := at(time.Minute)
	p := recoveryParams("op-c", orig.ID, ledger.RecoveryReissue, now)
	it := f.applyP(p)
	wantEqual(t, "reissue item", it, ledger.RecoveryItem{
		OperationKey: "op-c", DeliveryID: orig.ID, EventID: ev.Event.ID, Action: ledger.RecoveryReissue,
		Outcome: ledger.OutcomeReissued, NewEventID: p.NewEventID, NewDeliveryID: p.NewDeliveryID,
		NewDeliveryState: ledger.StateScheduled, CreatedAt: now,
	})
	cp, err := f.s.EventGet(f.ctx, p.NewEventID)
	if err != nil {
		t.Fatalf("EventGet of the copy: %v", err)
	}
	wantEqual(t, "the copy", canonEvent(t, cp), ledger.Event{
		ID: p.NewEventID, Namespace: "shop", Type: "order.created", Data: canon(t, ev.Event.Data),
		ReissueOf: ev.Event.ID, CreatedAt: now,
	})
	wantEqual(t, "the copy's deliveries (one, to the same endpoint)", f.list(ledger.DeliveryBrowseParams{EventID: p.NewEventID}), []ledger.Delivery{{
		ID: p.NewDeliveryID, EventID: p.NewEventID, EndpointID: ep, State: ledger.StateScheduled, DueAt: now, CreatedAt: now,
		Resend: true,
	}})
	resolved := orig
	resolved.Resolution, resolved.ResolvedBy = ledger.ResolutionReissued, "op-c"
	wantEqual(t, "the original after the reissue", f.delivery(orig.ID), resolved)
	f.wantCounts(ep, counts{Pending: 1})
	f.wantCounts("shop/other", counts{ExhaustedUnresolved: 1})
	f.wantReplay(p, it, ep, "shop/other")
}

// testRecoveryReissueRequest reissues events that cannot be copied: the
// producer is asked, and its replacement completes every waiting item.
func testRecoveryReissueRequest(t *testing.T, f *fixture) {
	const (
		ep       = "shop/orders"
		producer = "shop/producer"
		audit    = "shop/audit"
	)
	f.upsert(endpoint("shop", "orders", "order.*"), t0)
	f.upsert(endpoint("shop", "producer", ledger.ReissueRequestedEventType), t0)
	f.upsert(endpoint("shop", "audit", "*"), t0) // receives the requests too
	ev := f.insert(secretEvent("shop", "order.created", t0, "tok_1"))[0]
	f.exhaustAll(at(time.Second))
	orig := f.delivery(deliveryTo(t, ev, ep))
	origAudit := f.delivery(deliveryTo(t, ev, audit))

	now := at(time.Minute)
	p := recoveryParams("op-r", orig.ID, ledger.RecoveryReissue, now)
	it := f.applyP(p)
	wantEqual(t, "reissue request item", it, ledger.RecoveryItem{
		OperationKey: "op-r", DeliveryID: orig.ID, EventID: ev.Event.ID, Action: ledger.RecoveryReissue,
		Outcome: ledger.OutcomeAwaitingReissue, NewEventID: p.NewEventID, CreatedAt: now,
	})
	req, err := f.s.EventGet(f.ctx, p.NewEventID)
	if err != nil {
		t.Fatalf("EventGet of the request: %v", err)
	}
	if req.Type != ledger.ReissueRequestedEventType || req.Namespace != "shop" || len(req.Secrets) != 0 ||
		len(req.SecretNames) != 0 || req.ReissueOf != "" || req.IdempotencyKey != "" || !req.CreatedAt.Equal(now) {
		t.Fatalf("reissue request event: %+v", req)
	}
	var data ledger.ReissueRequestData
	if err := json.Unmarshal(req.Data, &data); err != nil {
		t.Fatalf("request data %s: %v", req.Data, err)
	}
	wantEqual(t, "request data", data, ledger.ReissueRequestData{
		OriginalEventID: ev.Event.ID, EventType: "order.created", DeliveryID: orig.ID, Endpoint: ep,
		Operation: "op-r", SecretNames: []string{"confirmToken"},
	})
	reqDeliveries := f.list(ledger.DeliveryBrowseParams{EventID: req.ID})
	wantEqual(t, "the request's subscribers", endpointsOf(reqDeliveries), []string{audit, producer})
	for _, d := range reqDeliveries {
		// A question to the producer, sent once: not a re-send.
		if d.State != ledger.StateScheduled || !d.DueAt.Equal(now) || d.Resend {
			t.Fatalf("request delivery: %+v", d)
		}
	}
	wantEqual(t, "the original while the reissue is awaited", f.delivery(orig.ID), orig)
	f.wantCounts(ep, counts{ExhaustedUnresolved: 1})
	f.wantCounts(producer, counts{Pending: 1})
	f.wantCounts(audit, counts{Pending: 1, ExhaustedUnresolved: 1})
	f.wantReplay(p, it, ep, producer, audit)

	// A second operation asks for the audit delivery of the same event.
	pa := recoveryParams("op-a", origAudit.ID, ledger.RecoveryReissue, now)
	if got := f.applyP(pa); got.Outcome != ledger.OutcomeAwaitingReissue {
		t.Fatalf("second reissue request: %+v", got)
	}
	f.wantCounts(producer, counts{Pending: 2})
	f.wantCounts(audit, counts{Pending: 2, ExhaustedUnresolved: 1})

	// The producer publishes the replacement with fresh secrets.
	later := at(2 * time.Minute)
	rp := secretEvent("shop", "order.created", later, "tok_2")
	rp.ReissueOf = ev.Event.ID
	repl := f.insert(rp)[0]
	if repl.Err != nil || repl.Duplicate {
		t.Fatalf("replacement: %+v", repl)
	}
	wantEqual(t, "op-r after the replacement", f.items("op-r"), []ledger.RecoveryItem{{
		OperationKey: "op-r", DeliveryID: orig.ID, EventID: ev.Event.ID, Action: ledger.RecoveryReissue,
		Outcome: ledger.OutcomeReissued, NewEventID: repl.Event.ID, NewDeliveryID: deliveryTo(t, repl, ep),
		NewDeliveryState: ledger.StateScheduled, CreatedAt: now,
	}})
	wantEqual(t, "op-a after the replacement", f.items("op-a"), []ledger.RecoveryItem{{
		OperationKey: "op-a", DeliveryID: origAudit.ID, EventID: ev.Event.ID, Action: ledger.RecoveryReissue,
		Outcome: ledger.OutcomeReissued, NewEventID: repl.Event.ID, NewDeliveryID: deliveryTo(t, repl, audit),
		NewDeliveryState: ledger.StateScheduled, CreatedAt: now,
	}})
	for _, d := range repl.Deliveries {
		if !d.Resend {
			t.Fatalf("a delivery of the replacement is not a re-send: %+v", d)
		}
	}
	resolved := orig
	resolved.Resolution, resolved.ResolvedBy = ledger.ResolutionReissued, "op-r"
	wantEqual(t, "the original after the replacement", f.delivery(orig.ID), resolved)
	resolvedAudit := origAudit
	resolvedAudit.Resolution, resolvedAudit.ResolvedBy = ledger.ResolutionReissued, "op-a"
	wantEqual(t, "the audit original after the replacement", f.delivery(origAudit.ID), resolvedAudit)
	f.wantCounts(ep, counts{Pending: 1})
	f.wantCounts(producer, counts{Pending: 2})
	f.wantCounts(audit, counts{Pending: 3})

	// A repeat returns the completed item; a second replacement changes
	// nothing.
	replayed := f.applyP(p)
	if !replayed.Replayed || replayed.Outcome != ledger.OutcomeReissued || replayed.NewEventID != repl.Event.ID {
		t.Fatalf("repeat after completion: %+v", replayed)
	}
	again := secretEvent("shop", "order.created", later, "tok_3")
	again.ReissueOf = ev.Event.ID
	f.insert(again)
	if got := f.items("op-r"); len(got) != 1 || got[0].NewEventID != repl.Event.ID {
		t.Fatalf("op-r after a second replacement: %+v", got)
	}
	f.wantCounts(ep, counts{Pending: 2})
	wantEqual(t, "the original after a second replacement", f.delivery(orig.ID), resolved)
}

// testRecoveryNoHandler refuses a reissue request nobody can answer, and
// keeps the refusal for repeats.
func testRecoveryNoHandler(t *testing.T, f *fixture) {
	const ep = "shop/orders"
	f.upsert(endpoint("shop", "orders", "order.*"), t0)
	f.upsert(endpoint("other", "producer", ledger.ReissueRequestedEventType), t0) // another namespace
	ev := f.insert(secretEvent("shop", "order.created", t0, "tok"))[0]
	orig := f.exhaustAll(at(time.Second))[0]

	now := at(time.Minute)
	before := f.snapshot(ep)
	p := recoveryParams("op-n", orig.ID, ledger.RecoveryReissue, now)
	it := f.applyP(p)
	wantEqual(t, "refused item", it, ledger.RecoveryItem{
		OperationKey: "op-n", DeliveryID: orig.ID, EventID: ev.Event.ID, Action: ledger.RecoveryReissue,
		Outcome: ledger.OutcomeRefused, Reason: ledger.RefusedNoReissueHandler, CreatedAt: now,
	})
	wantEqual(t, "ledger after a refusal", f.snapshot(ep), before)
	_, err := f.s.EventGet(f.ctx, p.NewEventID)
	wantErr(t, "EventGet of a request that was refused", err, ledger.ErrNotFound)

	// A handler appears: the refusal stands for this operation, a new one
	// asks.
	f.upsert(endpoint("shop", "producer", "hookkeeper.*"), now)
	f.wantReplay(p, it, ep)
	if got := f.apply("op-n2", orig.ID, ledger.RecoveryReissue, now); got.Outcome != ledger.OutcomeAwaitingReissue {
		t.Fatalf("reissue once a handler exists: %+v", got)
	}
	f.wantCounts("shop/producer", counts{Pending: 1})
}

// testRecoveryDismiss resolves without sending.
func testRecoveryDismiss(t *testing.T, f *fixture) {
	const ep = "shop/orders"
	f.upsert(endpoint("shop", "orders", "order.*"), t0)
	ev := f.publish("shop", "order.created", t0)
	orig := f.exhaustAll(at(time.Second))[0]
	now := at(time.Minute)
	p := recoveryParams("op-d", orig.ID, ledger.RecoveryDismiss, now)
	it := f.applyP(p)
	wantEqual(t, "dismiss item", it, ledger.RecoveryItem{
		OperationKey: "op-d", DeliveryID: orig.ID, EventID: ev.Event.ID, Action: ledger.RecoveryDismiss,
		Outcome: ledger.OutcomeDismissed, CreatedAt: now,
	})
	resolved := orig
	resolved.Resolution, resolved.ResolvedBy = ledger.ResolutionDismissed, "op-d"
	wantEqual(t, "the original after dismissal", f.delivery(orig.ID), resolved)
	f.wantCounts(ep, counts{})
	if got := f.list(ledger.DeliveryBrowseParams{}); len(got) != 1 {
		t.Fatalf("deliveries after a dismissal: %v", idsOf(got))
	}
	f.wantReplay(p, it, ep)
	// The key decides, not the action: the same pair is applied once.
	other := *p
	other.Action = ledger.RecoveryRetry
	if got := f.applyP(&other); !got.Replayed || got.Outcome != ledger.OutcomeDismissed {
		t.Fatalf("the same pair with another action: %+v", got)
	}
	if got := f.apply("op-later", orig.ID, ledger.RecoveryRetry, now); got.Outcome != ledger.OutcomeRefused || got.Reason != ledger.RefusedAlreadyResolved {
		t.Fatalf("retry of a dismissed delivery: %+v", got)
	}
}

// testRecoveryDeletedEndpoint refuses to send to a deleted endpoint
// (ErrEndpointDeleted, nothing recorded) and still lets its unresolved work
// be dismissed.
func testRecoveryDeletedEndpoint(t *testing.T, f *fixture) {
	const ep = "shop/orders"
	f.upsert(endpoint("shop", "orders", "order.*"), t0)
	f.upsert(endpoint("shop", "producer", ledger.ReissueRequestedEventType), t0)
	f.publish("shop", "order.created", t0)
	orig := f.exhaustAll(at(time.Second))[0]
	if _, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: ep, Now: at(2 * time.Second)}); err != nil {
		t.Fatalf("EndpointDelete: %v", err)
	}
	now := at(time.Minute)
	for _, action := range []ledger.RecoveryAction{ledger.RecoveryRetry, ledger.RecoveryReissue} {
		_, err := f.s.RecoveryApply(f.ctx, recoveryParams("op", orig.ID, action, now))
		wantErr(t, string(action)+" to a deleted endpoint", err, ledger.ErrEndpointDeleted)
	}
	if got := f.items("op"); len(got) != 0 {
		t.Fatalf("failed recoveries recorded items: %+v", got)
	}
	wantEqual(t, "ExhaustedList of a deleted endpoint", exhaustedIDs(f.exhausted(ledger.ExhaustedListParams{EndpointID: ep})), []string{orig.ID})
	if got := f.apply("op", orig.ID, ledger.RecoveryDismiss, now); got.Outcome != ledger.OutcomeDismissed {
		t.Fatalf("dismissal of a deleted endpoint's delivery: %+v", got)
	}
	f.wantCounts(ep, counts{})
	f.wantCounts("shop/producer", counts{})
}

// testRecoveryTwice applies every kind of action twice under one key: one
// effect each.
func testRecoveryTwice(t *testing.T, f *fixture) {
	eps := []string{"shop/orders", "shop/producer"}
	f.upsert(endpoint("shop", "orders", "order.*"), t0)
	f.upsert(endpoint("shop", "producer", ledger.ReissueRequestedEventType), t0)
	f.publish("shop", "order.created", t0)
	f.publish("shop", "order.created", t0)
	f.insert(secretEvent("shop", "order.created", t0, "tok"))
	f.publish("shop", "order.created", t0)
	ds := f.exhaustAll(at(time.Second))
	byEvent := map[bool][]ledger.Delivery{}
	for _, d := range ds {
		ev, err := f.s.EventGet(f.ctx, d.EventID)
		if err != nil {
			t.Fatal(err)
		}
		byEvent[len(ev.SecretNames) > 0] = append(byEvent[len(ev.SecretNames) > 0], d)
	}
	plain, secret := byEvent[false], byEvent[true]
	now := at(time.Minute)
	for i, tc := range []struct {
		d       ledger.Delivery
		action  ledger.RecoveryAction
		outcome ledger.RecoveryOutcome
	}{
		{plain[0], ledger.RecoveryRetry, ledger.OutcomeRetried},
		{plain[1], ledger.RecoveryReissue, ledger.OutcomeReissued},
		{secret[0], ledger.RecoveryReissue, ledger.OutcomeAwaitingReissue},
		{plain[2], ledger.RecoveryDismiss, ledger.OutcomeDismissed},
	} {
		p := recoveryParams("op-twice", tc.d.ID, tc.action, now.Add(time.Duration(i)*time.Second))
		it := f.applyP(p)
		if it.Outcome != tc.outcome || it.Replayed {
			t.Fatalf("%s: %+v, want outcome %s", tc.action, it, tc.outcome)
		}
		f.wantReplay(p, it, eps...)
	}
	wantEqual(t, "outcomes in order", outcomesOf(f.items("op-twice")), []ledger.RecoveryOutcome{
		ledger.OutcomeRetried, ledger.OutcomeReissued, ledger.OutcomeAwaitingReissue, ledger.OutcomeDismissed,
	})
	f.wantCounts("shop/orders", counts{Pending: 2, ExhaustedUnresolved: 1})
	f.wantCounts("shop/producer", counts{Pending: 1})
}

func outcomesOf(items []ledger.RecoveryItem) []ledger.RecoveryOutcome {
	out := make([]ledger.RecoveryOutcome, 0, len(items))
	for _, it := range items {
		out = append(out, it.Outcome)
	}
	return out
}
