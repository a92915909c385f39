package ledgertest

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// The Recovery part of the suite: retry budgets, ExhaustedList and
// recovery operations. It pins, beyond the doc comments:
//   - A Retry item has no NewEventID (the event is the same); a Reissue
//     request item's NewEventID is the request event until the replacement
//     arrives, then the replacement; its NewDeliveryID is empty until then.
//   - The request event's deliveries get store-generated IDs; the copy's one
//     delivery and a retry's delivery take NewDeliveryID.
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
	s := ledgerSnapshot{Deliveries: f.list(ledger.DeliveryListParams{Limit: ledger.MaxListLimit}), Counts: map[string]counts{}}
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

// exhausted lists unresolved exhausted deliveries.
func (f *fixture) exhausted(p ledger.ExhaustedListParams) []ledger.ExhaustedDelivery {
	f.t.Helper()
	got, err := f.s.ExhaustedList(f.ctx, &p)
	if err != nil {
		f.t.Fatalf("ExhaustedList(%+v): %v", p, err)
	}
	return got
}

// exhaustedIDs returns the delivery IDs in order.
func exhaustedIDs(es []ledger.ExhaustedDelivery) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Delivery.ID)
	}
	return out
}

// acquire takes one retry from the budget of endpoint at now.
func (f *fixture) acquire(endpoint string, b ledger.RetryBudget, now time.Time) bool {
	f.t.Helper()
	ok, err := f.s.RetryBudgetAcquire(f.ctx, &ledger.RetryBudgetParams{EndpointID: endpoint, Budget: b, Now: now})
	if err != nil {
		f.t.Fatalf("RetryBudgetAcquire(%s, %v): %v", endpoint, now, err)
	}
	return ok
}

// wantAcquired checks how many of n acquisitions succeed (the first ones).
func (f *fixture) wantAcquired(what, endpoint string, b ledger.RetryBudget, now time.Time, n, want int) {
	f.t.Helper()
	var got []bool
	for range n {
		got = append(got, f.acquire(endpoint, b, now))
	}
	wantBools := make([]bool, n)
	for i := range min(want, n) {
		wantBools[i] = true
	}
	wantEqual(f.t, what, got, wantBools)
}

// secretEvent is an event of type typ carrying one-time secrets.
func secretEvent(ns, typ string, now time.Time, token string) *ledger.EventInsertParams {
	p := event(ns, typ, now)
	p.Secrets = sensitive.Bytes(`{"confirmToken":"` + token + `"}`)
	p.SecretNames = []string{"confirmToken"}
	return p
}

// testBudgetArithmetic pins the allowance (RatioPercent × first attempts /
// 100, rounded down, + MinPerMinute), what counts as a first attempt, and
// that a bucket is one Unix minute of one endpoint.
func testBudgetArithmetic(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "ep", "*"), t0)
	f.upsert(endpoint("b", "ep", "*"), t0)
	m := t0.Truncate(time.Minute).Add(time.Minute) // the start of a minute
	b := ledger.RetryBudget{RatioPercent: 50, MinPerMinute: 2}

	f.wantAcquired("without first attempts: the floor", "a/ep", b, m, 3, 2)

	// Five first attempts in the minute: 50% of 5 is 2 (rounded down), +2.
	for range 5 {
		f.publish("a", "order.created", m)
	}
	f.attemptAll(m.Add(time.Second), ledger.Next{State: ledger.StateScheduled, DueAt: m.Add(2 * time.Second)})
	f.wantAcquired("after 5 first attempts (2 of 4 taken)", "a/ep", b, m.Add(3*time.Second), 3, 2)

	// Second attempts are retries, not first attempts.
	f.attemptAll(m.Add(2*time.Second), ledger.Next{State: ledger.StateDelivered})
	f.wantAcquired("after second attempts", "a/ep", b, m.Add(4*time.Second), 1, 0)

	// A sixth first attempt: 50% of 6 is 3, +2 = 5.
	f.publish("a", "order.created", m.Add(5*time.Second))
	f.attemptAll(m.Add(5*time.Second), ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable})
	f.wantAcquired("after a sixth first attempt", "a/ep", b, m.Add(59*time.Second+999999*time.Microsecond), 2, 1)

	// Another endpoint has its own bucket.
	f.wantAcquired("another endpoint", "b/ep", ledger.RetryBudget{MinPerMinute: 1}, m.Add(30*time.Second), 2, 1)

	// The next minute starts from the floor again.
	f.wantAcquired("the next minute", "a/ep", b, m.Add(time.Minute), 3, 2)

	// No floor: nothing without first attempts; a denied acquisition does
	// not spoil the bucket for the first attempts that follow.
	m2 := m.Add(2 * time.Minute)
	ratio := ledger.RetryBudget{RatioPercent: 100}
	f.wantAcquired("no floor, no first attempts", "b/ep", ratio, m2, 1, 0)
	for range 3 {
		f.publish("b", "order.created", m2)
	}
	f.attemptAll(m2.Add(time.Second), ledger.Next{State: ledger.StateDelivered})
	f.wantAcquired("100% of 3 first attempts", "b/ep", ratio, m2.Add(2*time.Second), 4, 3)
	// The first attempts of a/ep in the same minute are a/ep's.
	f.wantAcquired("a/ep in the minute of b/ep's first attempts", "a/ep", ratio, m2.Add(3*time.Second), 1, 0)
}

// testBudgetConcurrent spends one budget from many goroutines: exactly the
// allowance is granted.
func testBudgetConcurrent(t *testing.T, f *fixture) {
	const (
		workers = 8
		each    = 12
		floor   = 25
	)
	f.upsert(endpoint("shop", "all", "*"), t0)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted int
		errs    = make(chan error, workers)
	)
	for range workers {
		wg.Go(func() {
			for range each {
				ok, err := f.s.RetryBudgetAcquire(f.ctx, &ledger.RetryBudgetParams{
					EndpointID: "shop/all", Budget: ledger.RetryBudget{RatioPercent: 10, MinPerMinute: floor}, Now: t0,
				})
				if err != nil {
					errs <- err
					return
				}
				if ok {
					mu.Lock()
					granted++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("RetryBudgetAcquire: %v", err)
	}
	if granted != floor {
		t.Fatalf("granted %d retries of a budget of %d", granted, floor)
	}
}

// testExhaustedListFilters checks every selector criterion, the order, the
// limit and the fields of ExhaustedList.
func testExhaustedListFilters(t *testing.T, f *fixture) {
	const ep = "shop/orders"
	f.upsert(endpoint("shop", "orders", "*"), t0)
	f.upsert(endpoint("shop", "other", "*"), t0)
	var (
		evs  []string
		mine []ledger.Delivery // the deliveries to ep, in exhaustion order
		them []ledger.Delivery
	)
	for i, typ := range []string{"order.created", "order.paid", "invoice.sent", "order.created"} {
		now := at(time.Duration(i+1) * time.Second)
		res := f.publish("shop", typ, now)
		evs = append(evs, res.Event.ID)
		for _, d := range f.exhaustAll(now) {
			if d.EndpointID == ep {
				mine = append(mine, d)
			} else {
				them = append(them, d)
			}
		}
	}
	// Resolved and live deliveries are not listed.
	f.apply("op", mine[3].ID, ledger.RecoveryDismiss, at(5*time.Second))
	f.publish("shop", "order.created", at(6*time.Second))
	f.attemptAll(at(6*time.Second), ledger.Next{State: ledger.StateScheduled, DueAt: at(time.Hour)})

	all := f.exhausted(ledger.ExhaustedListParams{EndpointID: ep})
	var want []ledger.ExhaustedDelivery
	for i, typ := range []string{"order.created", "order.paid", "invoice.sent"} {
		want = append(want, ledger.ExhaustedDelivery{
			Delivery: f.delivery(mine[i].ID), EventType: typ, ReplayFrom: *mine[i].FirstAttemptAt,
		})
	}
	wantEqual(t, "ExhaustedList of the endpoint", all, want)
	d1, d2, d3 := mine[0].ID, mine[1].ID, mine[2].ID

	for _, tc := range []struct {
		name string
		p    ledger.ExhaustedListParams
		want []string
	}{
		{"types by prefix", ledger.ExhaustedListParams{EventTypes: []string{"order.*"}}, []string{d1, d2}},
		{"exact type", ledger.ExhaustedListParams{EventTypes: []string{"invoice.sent"}}, []string{d3}},
		{"any of the types", ledger.ExhaustedListParams{EventTypes: []string{"order.created", "invoice.*"}}, []string{d1, d3}},
		{"every type", ledger.ExhaustedListParams{EventTypes: []string{"*"}}, []string{d1, d2, d3}},
		{"no type matches", ledger.ExhaustedListParams{EventTypes: []string{"order"}}, nil},
		{"delivery IDs of this endpoint only", ledger.ExhaustedListParams{DeliveryIDs: []string{d3, them[0].ID, d1, mine[3].ID}}, []string{d1, d3}},
		{"event IDs", ledger.ExhaustedListParams{EventIDs: []string{evs[1], evs[3]}}, []string{d2}},
		{"exhausted after (inclusive)", ledger.ExhaustedListParams{ExhaustedAfter: at(2 * time.Second)}, []string{d2, d3}},
		{"exhausted before (exclusive)", ledger.ExhaustedListParams{ExhaustedBefore: at(2 * time.Second)}, []string{d1}},
		{"window", ledger.ExhaustedListParams{ExhaustedAfter: at(2 * time.Second), ExhaustedBefore: at(3 * time.Second)}, []string{d2}},
		{"limit keeps the oldest", ledger.ExhaustedListParams{Limit: 2}, []string{d1, d2}},
		{"criteria are ANDed", ledger.ExhaustedListParams{DeliveryIDs: []string{d1, d2, d3}, EventTypes: []string{"order.*"}, ExhaustedAfter: at(2 * time.Second)}, []string{d2}},
	} {
		tc.p.EndpointID = ep
		wantEqual(t, tc.name, exhaustedIDs(f.exhausted(tc.p)), tc.want)
	}
	if got := f.exhausted(ledger.ExhaustedListParams{EndpointID: "shop/unknown"}); len(got) != 0 {
		t.Fatalf("ExhaustedList of an unknown endpoint: %v", exhaustedIDs(got))
	}

	// ReplayFrom is the event's earliest first attempt, on any endpoint.
	res := f.publish("shop", "order.created", at(10*time.Second))
	f.claim("w", at(10*time.Second), time.Minute, 10)
	early := attempt(deliveryTo(t, res, "shop/other"), "w", at(11*time.Second), 503, ledger.Next{State: ledger.StateScheduled, DueAt: at(time.Hour)})
	f.mustRecord(early)
	f.mustRecord(attempt(deliveryTo(t, res, ep), "w", at(20*time.Second), 503, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustMaxAge}))
	got := f.exhausted(ledger.ExhaustedListParams{EndpointID: ep, EventIDs: []string{res.Event.ID}})
	if len(got) != 1 || !got[0].ReplayFrom.Equal(early.Attempt.StartedAt) {
		t.Fatalf("ExhaustedList of an event first attempted at %v elsewhere: %+v", early.Attempt.StartedAt, got)
	}
}

// testExhaustedListPages filters by type past more non-matching deliveries
// than a page holds.
func testExhaustedListPages(t *testing.T, f *fixture) {
	const ep = "shop/all"
	f.upsert(endpoint("shop", "all", "*"), t0)
	var many []*ledger.EventInsertParams
	for range 300 {
		many = append(many, event("shop", "a", t0))
	}
	f.insert(many...)
	f.exhaustAll(at(time.Second))
	f.insert(event("shop", "b", t0), event("shop", "b", t0), event("shop", "b", t0))
	bs := idsOf(byID(f.exhaustAll(at(2 * time.Second))))

	wantEqual(t, "the two oldest of type b", exhaustedIDs(f.exhausted(ledger.ExhaustedListParams{EndpointID: ep, EventTypes: []string{"b"}, Limit: 2})), bs[:2])
	wantEqual(t, "every one of type b", exhaustedIDs(f.exhausted(ledger.ExhaustedListParams{EndpointID: ep, EventTypes: []string{"b"}})), bs)
	if n := len(f.exhausted(ledger.ExhaustedListParams{EndpointID: ep})); n != ledger.DefaultExhaustedLimit {
		t.Fatalf("ExhaustedList without a limit returned %d, want %d", n, ledger.DefaultExhaustedLimit)
	}
	if n := len(f.exhausted(ledger.ExhaustedListParams{EndpointID: ep, Limit: ledger.MaxExhaustedLimit + 1})); n != 303 {
		t.Fatalf("ExhaustedList with a large limit returned %d, want all 303", n)
	}
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
		DueAt: now, CreatedAt: now, RetryOf: orig.ID,
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
	wantEqual(t, "the copy's deliveries (one, to the same endpoint)", f.list(ledger.DeliveryListParams{EventID: p.NewEventID}), []ledger.Delivery{{
		ID: p.NewDeliveryID, EventID: p.NewEventID, EndpointID: ep, State: ledger.StateScheduled, DueAt: now, CreatedAt: now,
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
	reqDeliveries := f.list(ledger.DeliveryListParams{EventID: req.ID})
	wantEqual(t, "the request's subscribers", endpointsOf(reqDeliveries), []string{audit, producer})
	for _, d := range reqDeliveries {
		if d.State != ledger.StateScheduled || !d.DueAt.Equal(now) {
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
	if got := f.list(ledger.DeliveryListParams{}); len(got) != 1 {
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
	wantEqual(t, "the original event's deliveries", idsOf(f.list(ledger.DeliveryListParams{EventID: ev.Event.ID})), []string{id})
	if again := f.apply("dr-retry", id, ledger.RecoveryRetry, later); !again.Replayed || again.Reason != ledger.RefusedReissueRequired {
		t.Fatalf("repeated retry: %+v", again)
	}
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
