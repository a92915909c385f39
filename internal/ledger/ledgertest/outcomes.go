package ledgertest

import (
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Outcome evidence (ledger.Evidence). Pinned here: a delivery settles into
// the bucket of the hour of the transition's Now, keyed by its Attempts then
// (the attempt acknowledged, for a callback), its outcome (Delivered or the
// exhaust reason) and the policy name and generation its endpoint had in
// that transaction; time to delivery runs from the delivery's CreatedAt.
// Scheduled, awaiting_ack and cancelled deliveries are not outcomes.
// OutcomeList returns rows ordered by endpoint, hour, outcome, attempt.

func exerciseOutcomes(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"RetriesAndExhaustionsCountExactly": testOutcomeRetries,
		"BatchFoldsIntoOneRow":              testOutcomeBatch,
		"CallbackAcknowledgements":          testOutcomeAcks,
		"RecoveryRetryCountsItsOwnDelivery": testOutcomeRecovery,
		"PolicyVersionsKeptApart":           testOutcomePolicyChange,
		"FiltersAndHours":                   testOutcomeFilters,
		"PruneRemovesOldHoursOnly":          testOutcomePrune,
	})
}

// evidenceEndpoint is an endpoint of ns under RetryPolicy policy at gen.
func evidenceEndpoint(ns, name, policy string, gen int64) ledger.Endpoint {
	ep := endpoint(ns, name, "*")
	ep.Policy = ledger.Policy{Name: policy, Generation: gen, ReplayWindow: 72 * time.Hour}
	return ep
}

// row is the comparable part of an OutcomeBucket.
type row struct {
	Endpoint, Namespace, Policy string
	Generation                  int64
	Hour                        time.Time
	Outcome                     string
	Attempt                     int
	Count                       int64
	TTD                         map[int]int64 // nonzero histogram buckets
	FirstAt, LastAt             time.Time
}

func rowsOf(bs []ledger.OutcomeBucket) []row {
	out := make([]row, len(bs))
	for i, b := range bs {
		ttd := map[int]int64{}
		for j, n := range b.TimeToDelivery {
			if n != 0 {
				ttd[j] = n
			}
		}
		out[i] = row{b.EndpointID, b.Namespace, b.PolicyName, b.PolicyGeneration, b.Hour, b.Outcome, b.Attempt, b.Count, ttd, b.FirstAt, b.LastAt}
	}
	return out
}

func (f *fixture) outcomes(p ledger.OutcomeListParams) []row {
	f.t.Helper()
	got, err := f.s.OutcomeList(f.ctx, &p)
	if err != nil {
		f.t.Fatalf("OutcomeList(%+v): %v", p, err)
	}
	return rowsOf(got)
}

var hour0 = t0.Truncate(time.Hour)

func testOutcomeRetries(t *testing.T, f *fixture) {
	f.upsert(evidenceEndpoint("shop", "a", "standard", 3), t0)
	f.insert(event("shop", "order.created", t0), event("shop", "order.created", t0), event("shop", "order.created", t0))
	claimed := f.claim("w", t0, time.Minute, 10)
	if len(claimed) != 3 {
		t.Fatalf("claimed %d, want 3", len(claimed))
	}
	now := at(time.Second) // 1s after creation: histogram bucket 0 (<= 1s)
	f.mustRecord(attempt(claimed[0].Delivery.ID, "w", now, 200, ledger.Next{State: ledger.StateDelivered}))
	f.mustRecord(attempt(claimed[1].Delivery.ID, "w", now, 503, ledger.Next{State: ledger.StateScheduled, DueAt: at(10 * time.Second)}))
	f.mustRecord(attempt(claimed[2].Delivery.ID, "w", now, 400, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable}))
	if got := f.outcomes(ledger.OutcomeListParams{}); len(got) != 2 {
		t.Fatalf("a retry is not an outcome: rows %+v", got)
	}
	retry := f.claimOne("w", at(10*time.Second)).Delivery.ID
	f.mustRecord(attempt(retry, "w", at(10*time.Second), 503, ledger.Next{State: ledger.StateScheduled, DueAt: at(70 * time.Second)}))
	f.claimOne("w", at(70*time.Second))
	f.mustRecord(attempt(retry, "w", at(70*time.Second), 200, ledger.Next{State: ledger.StateDelivered})) // 70s: bucket 4 (<= 5m)

	wantEqual(t, "outcomes", f.outcomes(ledger.OutcomeListParams{EndpointID: "shop/a"}), []row{
		{"shop/a", "shop", "standard", 3, hour0, "Delivered", 1, 1, map[int]int64{0: 1}, now, now},
		{"shop/a", "shop", "standard", 3, hour0, "Delivered", 3, 1, map[int]int64{4: 1}, at(70 * time.Second), at(70 * time.Second)},
		{"shop/a", "shop", "standard", 3, hour0, "NonRetryable", 1, 1, map[int]int64{}, now, now},
	})
}

func testOutcomeBatch(t *testing.T, f *fixture) {
	f.upsert(evidenceEndpoint("shop", "a", "standard", 1), t0)
	for range 5 {
		f.publish("shop", "order.created", t0)
	}
	f.attemptAll(at(2*time.Second), ledger.Next{State: ledger.StateDelivered})
	f.publish("shop", "order.created", t0)
	f.attemptAll(at(3*time.Second), ledger.Next{State: ledger.StateDelivered})
	wantEqual(t, "outcomes", f.outcomes(ledger.OutcomeListParams{}), []row{
		{"shop/a", "shop", "standard", 1, hour0, "Delivered", 1, 6, map[int]int64{1: 6}, at(2 * time.Second), at(3 * time.Second)},
	})
}

func testOutcomeAcks(t *testing.T, f *fixture) {
	ep := evidenceEndpoint("shop", "cb", "callbacks", 1)
	ep.AckMode, ep.AckTimeout = ledger.AckCallback, time.Minute
	f.upsert(ep, t0)
	for range 3 {
		f.publish("shop", "order.created", t0)
	}
	waiting := f.attemptAll(t0, ledger.Next{State: ledger.StateAwaitingAck, AckDeadline: at(time.Minute)})
	if got := f.outcomes(ledger.OutcomeListParams{}); len(got) != 0 {
		t.Fatalf("awaiting_ack is not an outcome: rows %+v", got)
	}
	life := f.s.(ledger.Settlement)
	if _, err := life.AckRecord(f.ctx, &ledger.AckRecordParams{DeliveryID: waiting[0].ID, Outcome: ledger.AckProcessed, Now: at(20 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := life.AckRecord(f.ctx, &ledger.AckRecordParams{DeliveryID: waiting[1].ID, Outcome: ledger.AckRejected, Reason: "no", Now: at(20 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := life.AckTimeoutRecord(f.ctx, &ledger.AckTimeoutParams{DeliveryID: waiting[2].ID, Now: at(time.Minute),
		Next: ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustAckTimeout}}); err != nil {
		t.Fatal(err)
	}
	// A second acknowledgement changes nothing, so it counts nothing.
	if _, err := life.AckRecord(f.ctx, &ledger.AckRecordParams{DeliveryID: waiting[0].ID, Outcome: ledger.AckProcessed, Now: at(21 * time.Second)}); err == nil {
		t.Fatal("a second acknowledgement was accepted")
	}
	wantEqual(t, "outcomes", f.outcomes(ledger.OutcomeListParams{}), []row{
		{"shop/cb", "shop", "callbacks", 1, hour0, "AckRejected", 1, 1, map[int]int64{}, at(20 * time.Second), at(20 * time.Second)},
		{"shop/cb", "shop", "callbacks", 1, hour0, "AckTimeout", 1, 1, map[int]int64{}, at(time.Minute), at(time.Minute)},
		{"shop/cb", "shop", "callbacks", 1, hour0, "Delivered", 1, 1, map[int]int64{2: 1}, at(20 * time.Second), at(20 * time.Second)},
	})
}

func testOutcomeRecovery(t *testing.T, f *fixture) {
	f.upsert(evidenceEndpoint("shop", "a", "standard", 1), t0)
	f.publish("shop", "order.created", t0)
	ex := f.exhaustAll(t0)[0]
	later := at(2 * time.Hour)
	it := f.apply("op1", ex.ID, ledger.RecoveryRetry, later)
	if it.Outcome != ledger.OutcomeRetried {
		t.Fatalf("recovery item %+v", it)
	}
	f.attemptAll(later.Add(time.Second), ledger.Next{State: ledger.StateDelivered})
	// The exhausted delivery keeps its outcome (a recovery never resets
	// it); the retry is a delivery of its own, delivered on its first
	// attempt a second after the recovery created it.
	wantEqual(t, "outcomes", f.outcomes(ledger.OutcomeListParams{}), []row{
		{"shop/a", "shop", "standard", 1, hour0, "MaxAttempts", 1, 1, map[int]int64{}, t0, t0},
		{"shop/a", "shop", "standard", 1, later.Truncate(time.Hour), "Delivered", 1, 1, map[int]int64{0: 1}, later.Add(time.Second), later.Add(time.Second)},
	})
}

func testOutcomePolicyChange(t *testing.T, f *fixture) {
	f.upsert(evidenceEndpoint("shop", "a", "standard", 1), t0)
	f.publish("shop", "order.created", t0)
	f.attemptAll(t0, ledger.Next{State: ledger.StateDelivered})
	f.upsert(evidenceEndpoint("shop", "a", "standard", 2), t0)
	f.publish("shop", "order.created", t0)
	f.attemptAll(t0, ledger.Next{State: ledger.StateDelivered})
	f.upsert(evidenceEndpoint("shop", "a", "other", 1), t0)
	f.publish("shop", "order.created", t0)
	f.attemptAll(t0, ledger.Next{State: ledger.StateDelivered})
	one := func(policy string, gen int64) row {
		return row{"shop/a", "shop", policy, gen, hour0, "Delivered", 1, 1, map[int]int64{0: 1}, t0, t0}
	}
	wantEqual(t, "policy standard", f.outcomes(ledger.OutcomeListParams{Namespace: "shop", PolicyName: "standard"}),
		[]row{one("standard", 1), one("standard", 2)})
	wantEqual(t, "policy other", f.outcomes(ledger.OutcomeListParams{Namespace: "shop", PolicyName: "other"}), []row{one("other", 1)})
}

func testOutcomeFilters(t *testing.T, f *fixture) {
	f.upsert(evidenceEndpoint("shop", "a", "standard", 1), t0)
	f.upsert(evidenceEndpoint("shop", "b", "", 0), t0)
	f.upsert(evidenceEndpoint("mail", "a", "standard", 1), t0)
	f.publish("shop", "order.created", t0)
	f.publish("mail", "mail.sent", t0)
	f.attemptAll(t0, ledger.Next{State: ledger.StateDelivered})
	f.publish("shop", "order.created", at(time.Hour))
	f.attemptAll(at(time.Hour), ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustGone})

	d := func(ep, ns, policy string, gen int64) row {
		return row{ep, ns, policy, gen, hour0, "Delivered", 1, 1, map[int]int64{0: 1}, t0, t0}
	}
	g := func(ep, policy string, gen int64) row {
		h := at(time.Hour)
		return row{ep, "shop", policy, gen, h.Truncate(time.Hour), "Gone", 1, 1, map[int]int64{}, h, h}
	}
	wantEqual(t, "all", f.outcomes(ledger.OutcomeListParams{}), []row{
		d("mail/a", "mail", "standard", 1), d("shop/a", "shop", "standard", 1), g("shop/a", "standard", 1),
		d("shop/b", "shop", "", 0), g("shop/b", "", 0),
	})
	wantEqual(t, "namespace and policy", f.outcomes(ledger.OutcomeListParams{Namespace: "shop", PolicyName: "standard"}),
		[]row{d("shop/a", "shop", "standard", 1), g("shop/a", "standard", 1)})
	wantEqual(t, "endpoint since the next hour", f.outcomes(ledger.OutcomeListParams{EndpointID: "shop/b", Since: at(time.Hour)}),
		[]row{g("shop/b", "", 0)})
	// Since is rounded down to its hour: the whole bucket is in or out.
	wantEqual(t, "since mid-hour", len(f.outcomes(ledger.OutcomeListParams{EndpointID: "shop/b", Since: hour0.Add(59 * time.Minute)})), 2)
}

func testOutcomePrune(t *testing.T, f *fixture) {
	f.upsert(evidenceEndpoint("shop", "a", "standard", 1), t0)
	for h := range 3 {
		f.publish("shop", "order.created", at(time.Duration(h)*time.Hour))
		f.attemptAll(at(time.Duration(h)*time.Hour), ledger.Next{State: ledger.StateDelivered})
	}
	ev := f.s.(ledger.Evidence)
	n, err := ev.OutcomePrune(f.ctx, hour0.Add(2*time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "pruned", n, 2)
	got := f.outcomes(ledger.OutcomeListParams{})
	if len(got) != 1 || !got[0].Hour.Equal(hour0.Add(2*time.Hour)) {
		t.Fatalf("left %+v, want only the hour at %v", got, hour0.Add(2*time.Hour))
	}
	if n, err := ev.OutcomePrune(f.ctx, hour0.Add(2*time.Hour), 0); err != nil || n != 0 {
		t.Fatalf("second prune: %d, %v", n, err)
	}
}
