package ledgertest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The Transition part of the suite: the transition rules of package ledger
// (AttemptTransition, AckTransition, and StatsChange for the counters)
// driven through the store case by case. The stored delivery and the
// endpoint's stats after each step must be what the pure rule computes
// from the row before. Where a driver writes a transition in one SQL
// statement for speed, this is the proof that the statement agrees with
// the rule. The clock deliberately goes back between steps, so that the
// last-outcome times are seen to move forward only.
func exerciseTransitions(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"AttemptAsTheRuleSays": testAttemptRule,
		"AckAsTheRuleSays":     testAckRule,
		"PruneAsTheRuleSays":   testPruneRule,
		"SecretsAsTheRuleSays": testSecretsRule,
	})
}

// wantRule checks that the store moved the delivery before and the stats
// stBefore of its endpoint as the rule says: apply moves a copy of the
// delivery, stats notes the change of the counters.
func (f *fixture) wantRule(what string, got ledger.Delivery, before ledger.Delivery, stBefore ledger.EndpointStats, apply func(*ledger.Delivery), stats func(ledger.StatsDelta)) {
	f.t.Helper()
	want := before
	apply(&want)
	wantEqual(f.t, what+": returned delivery", got, want)
	wantEqual(f.t, what+": stored delivery", f.delivery(before.ID), want)
	ds := ledger.StatsDelta{}
	stats(ds)
	wantSt := stBefore
	ds.Of(before.EndpointID).Apply(&wantSt)
	wantEqual(f.t, what+": stats", f.stats(before.EndpointID), wantSt)
}

// testAttemptRule records attempts with every kind of Next, first and
// later attempts, with and without a start time, and checks each against
// AttemptRecordParams.Transition.
func testAttemptRule(t *testing.T, f *fixture) {
	const ep = "shop/ep"
	f.upsert(endpoint("shop", "ep", "*"), t0)
	later := at(24 * time.Hour) // retries never come due within the test
	for _, step := range []struct {
		name string
		// claim publishes a new event and claims its delivery; otherwise
		// the previous step's delivery (scheduled due at now) is claimed.
		claim   bool
		now     time.Time
		status  int
		err     string
		noStart bool
		next    ledger.Next
	}{
		{"first attempt delivered", true, at(10 * time.Second), 204, "", false,
			ledger.Next{State: ledger.StateDelivered}},
		{"first attempt fails earlier, retry due at once", true, at(5 * time.Second), 500, "", false,
			ledger.Next{State: ledger.StateScheduled, DueAt: at(5 * time.Second)}},
		{"second attempt exhausts on a network error", false, at(5 * time.Second), 0, "connection refused", false,
			ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustMaxAttempts}},
		{"accepted without a start time awaits the ack", true, at(3 * time.Second), 202, "", true,
			ledger.Next{State: ledger.StateAwaitingAck, AckDeadline: at(time.Hour)}},
		{"a failure older than the last one keeps LastFailureAt", true, at(2 * time.Second), 503, "", false,
			ledger.Next{State: ledger.StateScheduled, DueAt: later}},
		{"a later failure moves LastFailureAt forward", true, at(30 * time.Second), 410, "", false,
			ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustGone}},
		{"a success older than the last one keeps LastSuccessAt", true, at(time.Second), 200, "", false,
			ledger.Next{State: ledger.StateDelivered}},
	} {
		var id string
		if step.claim {
			id = deliveryTo(t, f.publish("shop", "order.created", step.now), ep)
		}
		c := f.claimOne("w", step.now)
		if id != "" && c.Delivery.ID != id {
			t.Fatalf("%s: claimed %s, want %s", step.name, c.Delivery.ID, id)
		}
		before, stBefore := f.delivery(c.Delivery.ID), f.stats(ep)
		p := attempt(before.ID, "w", step.now, step.status, step.next)
		p.Attempt.Error = step.err
		if step.noStart {
			p.Attempt.StartedAt = time.Time{}
		}
		tr, err := p.Transition()
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got := f.mustRecord(p)
		f.wantRule(step.name, got, before, stBefore, tr.Apply, func(ds ledger.StatsDelta) { tr.Stats(ds, ep, p.Now) })
	}
}

// testAckRule acknowledges and times out deliveries awaiting their
// acknowledgement in every way and checks each against the Transition of
// AckRecordParams and AckTimeoutParams.
func testAckRule(t *testing.T, f *fixture) {
	const ep = "shop/cb"
	f.upsert(callbackEndpoint("shop", "cb", "*"), t0)
	deadline := at(time.Minute)
	type transition interface {
		Apply(*ledger.Delivery)
		Stats(ledger.StatsDelta, string, time.Time)
	}
	for i, step := range []struct {
		name string
		now  time.Time
		// ack or timeout is the step.
		ack     *ledger.AckRecordParams
		timeout *ledger.AckTimeoutParams
	}{
		{"processed", at(10 * time.Second), &ledger.AckRecordParams{Outcome: ledger.AckProcessed}, nil},
		{"rejected earlier, with an overlong reason", at(5 * time.Second),
			&ledger.AckRecordParams{Outcome: ledger.AckRejected, Reason: strings.Repeat("é", ledger.MaxAckReason)}, nil},
		{"timeout schedules a retry", at(2 * time.Minute), nil,
			&ledger.AckTimeoutParams{Next: ledger.Next{State: ledger.StateScheduled, DueAt: at(24 * time.Hour)}}},
		{"timeout exhausts, earlier than the last failure", at(90 * time.Second), nil,
			&ledger.AckTimeoutParams{Next: ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustAckTimeout}}},
	} {
		_, d := f.awaiting(event("shop", "order.created", at(time.Duration(i)*time.Millisecond)), ep,
			at(time.Duration(i)*time.Millisecond), deadline)
		before, stBefore := f.delivery(d.ID), f.stats(ep)
		var (
			tr  transition
			err error
		)
		if step.ack != nil {
			step.ack.DeliveryID, step.ack.Now = d.ID, step.now
			tr, err = step.ack.Transition()
		} else {
			step.timeout.DeliveryID, step.timeout.Now = d.ID, step.now
			tr, err = step.timeout.Transition()
		}
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		var got ledger.AckResult
		if step.ack != nil {
			got = f.ack(step.ack)
		} else {
			got = f.timeout(step.timeout)
		}
		f.wantRule(step.name, got.Delivery, before, stBefore, tr.Apply, func(ds ledger.StatsDelta) { tr.Stats(ds, ep, step.now) })
	}
}

// testPruneRule ends events in every way that matters to retention, runs
// one Prune over all of them, and checks each event's fate against
// ledger.PruneOutcome of the facts read from the store before.
func testPruneRule(t *testing.T, f *fixture) {
	policies := map[string]ledger.Policy{
		"shop/short": {PayloadRetention: 10 * time.Minute, EvidenceRetention: 20 * time.Minute},
		"shop/long":  {PayloadRetention: 5 * time.Hour, EvidenceRetention: 10 * time.Hour},
		"shop/zero":  {}, // the defaults
	}
	for id, types := range map[string][]string{"shop/short": {"a", "ab"}, "shop/long": {"ab"}, "shop/zero": {"z"}} {
		ep := endpoint("shop", strings.TrimPrefix(id, "shop/"), types...)
		ep.Policy = policies[id]
		f.upsert(ep, t0)
	}
	now := at(10 * time.Hour)
	params := &ledger.PruneParams{Now: now, Limit: 1000, DefaultPayloadRetention: time.Hour, DefaultEvidenceRetention: 3 * time.Hour}
	delivered := ledger.Next{State: ledger.StateDelivered}
	var events []string
	for _, step := range []struct {
		typ   string
		ended time.Duration // before now; 0: never claimed (pending or no delivery)
		next  ledger.Next
	}{
		{"a", 5 * time.Minute, delivered},
		{"a", 15 * time.Minute, delivered},
		{"a", 30 * time.Minute, delivered},
		{"ab", 30 * time.Minute, delivered},
		{"z", 2 * time.Hour, delivered},
		{"z", 4 * time.Hour, delivered},
		{"a", 30 * time.Minute, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable}},
		{"none", 2 * time.Hour, ledger.Next{}},
		{"none", 4 * time.Hour, ledger.Next{}},
		{"a", 0, ledger.Next{}}, // pending, published last
	} {
		created := now.Add(-step.ended - time.Minute)
		if step.ended == 0 {
			created = at(0)
		}
		res := f.insert(event("shop", step.typ, created))[0]
		if res.Err != nil {
			t.Fatalf("insert: %v", res.Err)
		}
		events = append(events, res.Event.ID)
		if step.ended == 0 || len(res.Deliveries) == 0 {
			continue
		}
		end := now.Add(-step.ended)
		for _, c := range f.claim("w", created, time.Hour, 10) {
			f.mustRecord(attempt(c.Delivery.ID, "w", end, 200, step.next))
		}
	}
	want := map[string][2]bool{}
	for _, id := range events {
		e := f.getEvent(id)
		facts := &ledger.PruneFacts{CreatedAt: e.CreatedAt, PayloadPruned: e.PayloadPrunedAt != nil}
		for _, d := range f.list(ledger.DeliveryBrowseParams{EventID: id}) {
			facts.Deliveries = append(facts.Deliveries, ledger.PruneDelivery{
				State: d.State, Resolution: d.Resolution, TerminalAt: d.TerminalAt, Policy: policies[d.EndpointID]})
		}
		deleted, pruned := ledger.PruneOutcome(facts, params)
		want[id] = [2]bool{deleted, pruned}
	}
	seen := map[[2]bool]int{}
	for _, w := range want {
		seen[w]++
	}
	if len(seen) != 3 {
		t.Fatalf("the steps give outcomes %v: want some deleted, some pruned and some kept", seen)
	}
	if _, err := f.s.Prune(f.ctx, params); err != nil {
		t.Fatalf("Prune: %v", err)
	}
	for _, id := range events {
		e, err := f.s.EventGet(f.ctx, id)
		if err != nil && !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("EventGet(%s): %v", id, err)
		}
		got := [2]bool{err != nil, err == nil && e.PayloadPrunedAt != nil}
		if got != want[id] {
			t.Errorf("event %s (type %s): deleted, payload pruned = %v; the rule says %v", id, e.Type, got, want[id])
		}
	}
}

// testSecretsRule ends deliveries of events with and without secrets, on
// endpoints with and without a grace period, sweeps the due ones (one with
// a delivery pending again), and checks each event against
// ledger.SettleSecrets and ledger.ScrubDueSecrets of the facts read from
// the store.
func testSecretsRule(t *testing.T, f *fixture) {
	grace := map[string]time.Duration{"shop/now": 0, "shop/later": time.Hour}
	for id, types := range map[string][]string{"shop/now": {"n", "both"}, "shop/later": {"l", "both"}} {
		ep := endpoint("shop", strings.TrimPrefix(id, "shop/"), types...)
		ep.Policy.SecretGracePeriod = grace[id]
		f.upsert(ep, t0)
	}
	// facts reads what the rule needs to know of event id now.
	facts := func(id string) (pending bool, longest time.Duration) {
		for _, d := range f.list(ledger.DeliveryBrowseParams{EventID: id}) {
			pending = pending || !d.State.Terminal()
			longest = max(longest, grace[d.EndpointID])
		}
		return pending, longest
	}
	// settles runs do, which ends a delivery of event id at now, and checks
	// the event against SettleSecrets.
	settles := func(what, id string, now time.Time, do func()) {
		t.Helper()
		before := f.getEvent(id)
		do()
		pending, longest := facts(id)
		want := before
		ledger.SettleSecrets(ledger.SecretsFacts{HasSecrets: len(before.Secrets) > 0, Pending: pending, Grace: longest}, now).Apply(&want, now)
		wantEqual(t, what, canonEvent(t, f.getEvent(id)), canonEvent(t, want))
	}
	publish := func(p *ledger.EventInsertParams) (string, map[string]string) {
		res := f.insert(p)[0]
		if res.Err != nil {
			t.Fatalf("insert: %v", res.Err)
		}
		byEndpoint := map[string]string{}
		for _, c := range f.claim("w", p.Now, time.Hour, 10) {
			byEndpoint[c.Delivery.EndpointID] = c.Delivery.ID
		}
		return res.Event.ID, byEndpoint
	}
	end := func(id string, now time.Time, next ledger.Next) func() {
		return func() { f.mustRecord(attempt(id, "w", now, 200, next)) }
	}
	delivered := ledger.Next{State: ledger.StateDelivered}

	e1, d1 := publish(secretEvent("shop", "n", at(time.Second), "tok1"))
	settles("no grace: scrubbed when the last delivery ends", e1, at(2*time.Second), end(d1["shop/now"], at(2*time.Second), delivered))

	e2, d2 := publish(secretEvent("shop", "both", at(3*time.Second), "tok2"))
	settles("a delivery still pending: kept", e2, at(4*time.Second), end(d2["shop/now"], at(4*time.Second), delivered))
	settles("the longest grace of its endpoints: due then", e2, at(5*time.Second), end(d2["shop/later"], at(5*time.Second), delivered))

	e3, d3 := publish(event("shop", "n", at(6*time.Second)))
	settles("no secrets: nothing to do", e3, at(7*time.Second), end(d3["shop/now"], at(7*time.Second), delivered))

	e4, d4 := publish(secretEvent("shop", "l", at(8*time.Second), "tok4"))
	settles("exhausted with a grace: due then", e4, at(9*time.Second),
		end(d4["shop/later"], at(9*time.Second), ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable}))
	f.apply("op-secrets", d4["shop/later"], ledger.RecoveryRetry, at(10*time.Second)) // pending again

	sweep := at(2 * time.Hour)
	before2, before4 := f.getEvent(e2), f.getEvent(e4)
	if _, err := f.s.SecretsScrubDue(f.ctx, sweep, 100); err != nil {
		t.Fatalf("SecretsScrubDue: %v", err)
	}
	for _, c := range []struct {
		what, id string
		before   ledger.Event
		pending  bool
	}{
		{"due and settled: scrubbed", e2, before2, false},
		{"due with a delivery pending again: disarmed", e4, before4, true},
	} {
		if pending, _ := facts(c.id); pending != c.pending {
			t.Fatalf("%s: event %s pending = %v, the case needs %v", c.what, c.id, pending, c.pending)
		}
		pending := c.pending
		want := c.before
		ledger.ScrubDueSecrets(pending).Apply(&want, sweep)
		wantEqual(t, c.what, canonEvent(t, f.getEvent(c.id)), canonEvent(t, want))
	}

	p5 := secretEvent("shop", "none", at(3*time.Hour), "tok5")
	res := f.insert(p5)[0]
	if res.Err != nil || len(res.Deliveries) != 0 {
		t.Fatalf("insert of an event for no endpoint: %v, %d deliveries", res.Err, len(res.Deliveries))
	}
	got := f.getEvent(res.Event.ID)
	want := got
	want.Secrets, want.SecretsScrubAt = p5.Secrets, nil
	want.DropUndeliveredSecrets()
	wantEqual(t, "no endpoint: no secrets kept", canonEvent(t, got), canonEvent(t, want))
}
