package ledgertest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// exerciseSettlement covers ledger.Settlement: acknowledgements and their
// timeouts, the scrubbing of one-time secrets in the transitions that end
// an event's last pending delivery and after a grace period, compaction,
// and retention. The rules it pins are written in ledger's
// settlementrules.go; beyond them:
//   - An acknowledgement or its timeout clears AckDeadline and keeps
//     Attempts, LastStatus and the attempts themselves; a timeout sets
//     LastError to ledger.AckTimeoutReason.
//   - A rejection's stats reason is ledger.AckRejectedReason + ": " + the
//     (truncated) reason; a timeout's is ledger.AckTimeoutReason.
func exerciseSettlement(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"AckProcessedDelivers":               testAckProcessed,
		"AckRejectedExhaustsAndDeadLetters":  testAckRejected,
		"AckOnlyWhileAwaiting":               testAckOnlyWhileAwaiting,
		"AckExpiredListEarliestFirst":        testAckExpiredList,
		"AckTimeoutSchedulesRetry":           testAckTimeoutRetry,
		"AckTimeoutExhausts":                 testAckTimeoutExhausts,
		"AckTimeoutOnlyAfterDeadline":        testAckTimeoutGuards,
		"SecretsScrubbedWithLastDelivery":    testScrubOnLastDelivery,
		"SecretsScrubbedByAcknowledgements":  testScrubOnAck,
		"SecretsScrubbedByEndpointDelete":    testScrubOnEndpointDelete,
		"SecretsScrubbedPerBatch":            testScrubPerBatch,
		"SecretsGracePeriod":                 testScrubGracePeriod,
		"SecretsOfUndeliveredEvent":          testScrubUndelivered,
		"SecretsScrubDueWaitsForARetry":      testScrubDueWaitsForRetry,
		"Compact":                            testCompact,
		"PrunePayloadThenEvidence":           testPrunePayloadThenEvidence,
		"PruneRetentionIsLongestOfEndpoints": testPruneLongestRetention,
		"PruneNeverTouchesPendingEvents":     testPrunePending,
		"PruneKeepsUnresolvedEvidence":       testPruneUnresolved,
		"PruneEventsWithoutDeliveries":       testPruneUndelivered,
		"PruneLimit":                         testPruneLimit,
	})
}

// callbackEndpoint is an endpoint in Callback acknowledgement mode.
func callbackEndpoint(ns, name string, types ...string) ledger.Endpoint {
	ep := endpoint(ns, name, types...)
	ep.AckMode, ep.AckTimeout = ledger.AckCallback, time.Hour
	return ep
}

// withPolicy returns ep with the given grace period and retentions.
func withPolicy(ep ledger.Endpoint, grace, payload, evidence time.Duration) ledger.Endpoint {
	ep.Policy.SecretGracePeriod, ep.Policy.PayloadRetention, ep.Policy.EvidenceRetention = grace, payload, evidence
	return ep
}

// tokenEvent returns insert params of an event carrying one secret.
func tokenEvent(ns, typ string, now time.Time, secret string) *ledger.EventInsertParams {
	p := event(ns, typ, now)
	p.Secrets, p.SecretNames = sensitive.Bytes(`{"confirmToken":"`+secret+`"}`), []string{"confirmToken"}
	return p
}

// getEvent reads one event.
func (f *fixture) getEvent(id string) ledger.Event {
	f.t.Helper()
	ev, err := f.s.EventGet(f.ctx, id)
	if err != nil {
		f.t.Fatalf("EventGet(%s): %v", id, err)
	}
	return ev
}

// wantSecrets checks an event's secrets: kept (with the original value) or
// scrubbed at scrubAt; SecretNames always stay.
func (f *fixture) wantSecrets(id string, kept bool, scrubAt, due *time.Time) {
	f.t.Helper()
	ev := f.getEvent(id)
	if kept && !strings.Contains(string(ev.Secrets.Reveal()), "confirmToken") {
		f.t.Fatalf("event %s: secrets %q, want them kept", id, ev.Secrets.Reveal())
	}
	if !kept && ev.Secrets != nil {
		f.t.Fatalf("event %s: secrets %q, want them scrubbed (nil)", id, ev.Secrets.Reveal())
	}
	wantEqual(f.t, "SecretNames of "+id, ev.SecretNames, []string{"confirmToken"})
	wantEqual(f.t, "SecretsScrubAt of "+id, ev.SecretsScrubAt, scrubAt)
	wantEqual(f.t, "SecretsScrubDue of "+id, ev.SecretsScrubDue, due)
}

// awaiting publishes an event to the endpoints of ns, claims and records
// a 202 for its delivery to ep, due for acknowledgement at deadline, and
// returns the event and the delivery.
func (f *fixture) awaiting(p *ledger.EventInsertParams, ep string, now, deadline time.Time) (ledger.EventInsertResult, ledger.Delivery) {
	f.t.Helper()
	res := f.insert(p)[0]
	if res.Err != nil {
		f.t.Fatalf("EventInsertMany item: %v", res.Err)
	}
	id := deliveryTo(f.t, res, ep)
	eps, err := f.s.EndpointList(f.ctx)
	if err != nil {
		f.t.Fatalf("EndpointList: %v", err)
	}
	var others []string
	for _, e := range eps {
		if e.ID != ep {
			others = append(others, e.ID)
		}
	}
	got := f.claim("w", now, time.Minute, 100, others...)
	if !strings.Contains(strings.Join(claimedIDs(got), ","), id) {
		f.t.Fatalf("delivery %s was not claimed: %v", id, claimedIDs(got))
	}
	d := f.mustRecord(attempt(id, "w", now, 202, ledger.Next{State: ledger.StateAwaitingAck, AckDeadline: deadline}))
	return res, d
}

// ack records an acknowledgement and fails on error.
func (f *fixture) ack(p *ledger.AckRecordParams) ledger.AckResult {
	f.t.Helper()
	res, err := f.s.AckRecord(f.ctx, p)
	if err != nil {
		f.t.Fatalf("AckRecord(%s, %s): %v", p.DeliveryID, p.Outcome, err)
	}
	return res
}

// timeout records an acknowledgement timeout and fails on error.
func (f *fixture) timeout(p *ledger.AckTimeoutParams) ledger.AckResult {
	f.t.Helper()
	res, err := f.s.AckTimeoutRecord(f.ctx, p)
	if err != nil {
		f.t.Fatalf("AckTimeoutRecord(%s): %v", p.DeliveryID, err)
	}
	return res
}

// wantAttempts checks how many attempts a delivery has.
func (f *fixture) wantAttempts(id string, n int) []ledger.Attempt {
	f.t.Helper()
	atts, err := f.s.AttemptList(f.ctx, id)
	if err != nil || len(atts) != n {
		f.t.Fatalf("AttemptList(%s) = %d attempts, %v; want %d", id, len(atts), err, n)
	}
	return atts
}

func testAckProcessed(t *testing.T, f *fixture) {
	f.upsert(callbackEndpoint("shop", "cb", "*"), t0)
	_, d := f.awaiting(event("shop", "order.created", t0), "shop/cb", at(time.Second), at(time.Hour))
	f.wantCounts("shop/cb", counts{AwaitingAck: 1})

	now := at(time.Minute)
	res := f.ack(&ledger.AckRecordParams{DeliveryID: d.ID, Outcome: ledger.AckProcessed, Reason: "ignored", Now: now})
	want := d
	want.State, want.AckDeadline, want.TerminalAt = ledger.StateDelivered, nil, ptr(now)
	wantEqual(t, "acknowledged delivery", res.Delivery, want)
	wantEqual(t, "DeliveryGet after the acknowledgement", f.delivery(d.ID), want)
	if res.DeadLetter != nil {
		t.Fatalf("a processed acknowledgement dead-lettered: %+v", res.DeadLetter)
	}
	f.wantAttempts(d.ID, 1)
	f.wantCounts("shop/cb", counts{Delivered: 1})
	st := f.stats("shop/cb")
	if st.LastSuccessAt == nil || !st.LastSuccessAt.Equal(now) || st.LastFailureAt != nil {
		t.Fatalf("stats after a processed acknowledgement: %+v", st)
	}
}

func testAckRejected(t *testing.T, f *fixture) {
	src := callbackEndpoint("shop", "cb", "order.*")
	src.DeadLetter = "shop/dlq"
	src.Owner = "payments@example.com"
	f.upsert(src, t0)
	f.upsert(endpoint("shop", "dlq", "nothing"), t0)
	ev, d := f.awaiting(event("shop", "order.created", t0), "shop/cb", at(time.Second), at(time.Hour))

	// 300 bytes, with a two-byte character across the cut.
	reason := strings.Repeat("x", ledger.MaxAckReason-1) + "é" + strings.Repeat("y", 43)
	now := at(time.Minute)
	res := f.ack(&ledger.AckRecordParams{DeliveryID: d.ID, Outcome: ledger.AckRejected, Reason: reason, Now: now})
	kept := strings.Repeat("x", ledger.MaxAckReason-1)
	if got := res.Delivery.LastError; got != kept || !utf8.ValidString(got) {
		t.Fatalf("LastError = %q (%d bytes), want the reason cut to %d bytes at a character boundary", got, len(got), len(kept))
	}
	want := d
	want.State, want.AckDeadline, want.TerminalAt = ledger.StateExhausted, nil, ptr(now)
	want.ExhaustReason, want.Resolution, want.LastError = ledger.ExhaustAckRejected, ledger.ResolutionUnresolved, kept
	wantEqual(t, "rejected delivery", res.Delivery, want)
	wantEqual(t, "DeliveryGet after the rejection", f.delivery(d.ID), want)
	f.wantAttempts(d.ID, 1)

	if res.DeadLetter == nil {
		t.Fatal("a rejection was not dead-lettered")
	}
	dl := *res.DeadLetter
	wantEqual(t, "dead-letter delivery", dl, ledger.Delivery{ID: dl.ID, EventID: dl.EventID, EndpointID: "shop/dlq",
		State: ledger.StateScheduled, DueAt: now, CreatedAt: now})
	var data ledger.DeadLetterData
	if err := json.Unmarshal(f.getEvent(dl.EventID).Data, &data); err != nil {
		t.Fatalf("dead-letter data: %v", err)
	}
	wantEqual(t, "dead-letter data", data, ledger.DeadLetterData{
		DeliveryID: d.ID, EventID: ev.Event.ID, EventType: "order.created", Endpoint: "shop/cb", Owner: "payments@example.com",
		Reason: ledger.ExhaustAckRejected, Attempts: 1, LastStatus: 202, LastError: kept, ExhaustedAt: now,
	})
	wantEqual(t, "unresolved deliveries", idsOf(f.list(ledger.DeliveryBrowseParams{Resolution: ledger.ResolutionUnresolved})), []string{d.ID})
	f.wantCounts("shop/cb", counts{ExhaustedUnresolved: 1})
	f.wantCounts("shop/dlq", counts{Pending: 1})
	st := f.stats("shop/cb")
	if st.LastFailureAt == nil || !st.LastFailureAt.Equal(now) || st.LastSuccessAt != nil ||
		st.LastFailureReason != ledger.AckRejectedReason+": "+kept {
		t.Fatalf("stats after a rejection: %+v", st)
	}

	// Without a reason.
	_, d2 := f.awaiting(event("shop", "order.created", now), "shop/cb", now, at(time.Hour))
	res = f.ack(&ledger.AckRecordParams{DeliveryID: d2.ID, Outcome: ledger.AckRejected, Now: at(2 * time.Minute)})
	if res.Delivery.LastError != "" || f.stats("shop/cb").LastFailureReason != ledger.AckRejectedReason {
		t.Fatalf("rejection without a reason: LastError %q, stats reason %q", res.Delivery.LastError, f.stats("shop/cb").LastFailureReason)
	}
}

func testAckOnlyWhileAwaiting(t *testing.T, f *fixture) {
	f.upsert(callbackEndpoint("shop", "cb", "order.*"), t0)
	f.upsert(callbackEndpoint("shop", "plain", "plain.*"), t0)
	life := f.s
	_, err := life.AckRecord(f.ctx, &ledger.AckRecordParams{DeliveryID: "dlv_unknown", Outcome: ledger.AckProcessed, Now: t0})
	wantErr(t, "AckRecord of an unknown delivery", err, ledger.ErrNotFound)

	scheduled := f.publish("shop", "plain.created", t0).Deliveries[0]
	for _, outcome := range []ledger.AckOutcome{ledger.AckProcessed, ledger.AckRejected} {
		_, err = life.AckRecord(f.ctx, &ledger.AckRecordParams{DeliveryID: scheduled.ID, Outcome: outcome, Now: t0})
		wantErr(t, "AckRecord of a scheduled delivery", err, ledger.ErrNotAwaitingAck)
	}
	wantEqual(t, "scheduled delivery after refused acknowledgements", f.delivery(scheduled.ID), scheduled)

	_, d := f.awaiting(event("shop", "order.created", t0), "shop/cb", at(time.Second), at(time.Hour))
	_, err = life.AckRecord(f.ctx, &ledger.AckRecordParams{DeliveryID: d.ID, Outcome: "maybe", Now: at(time.Minute)})
	if err == nil {
		t.Fatal("AckRecord accepted an unknown outcome")
	}
	wantEqual(t, "delivery after an invalid acknowledgement", f.delivery(d.ID), d)

	f.ack(&ledger.AckRecordParams{DeliveryID: d.ID, Outcome: ledger.AckProcessed, Now: at(time.Minute)})
	_, err = life.AckRecord(f.ctx, &ledger.AckRecordParams{DeliveryID: d.ID, Outcome: ledger.AckRejected, Now: at(2 * time.Minute)})
	wantErr(t, "a second acknowledgement", err, ledger.ErrNotAwaitingAck)
	if got := f.delivery(d.ID); got.State != ledger.StateDelivered {
		t.Fatalf("a late rejection changed a delivered delivery: %+v", got)
	}
	f.wantCounts("shop/cb", counts{Delivered: 1})
	f.wantCounts("shop/plain", counts{Pending: 1})
}

func testAckExpiredList(t *testing.T, f *fixture) {
	f.upsert(callbackEndpoint("shop", "cb", "*"), t0)
	life := f.s
	if got, err := life.AckExpiredList(f.ctx, at(24*time.Hour), 10); err != nil || len(got) != 0 {
		t.Fatalf("AckExpiredList of an empty store = %v, %v", got, err)
	}
	var ds []ledger.Delivery
	for i, deadline := range []time.Duration{time.Hour, 30 * time.Minute, 2 * time.Hour, 45 * time.Minute} {
		_, d := f.awaiting(event("shop", "order.created", at(time.Duration(i)*time.Second)), "shop/cb", at(time.Duration(i)*time.Second), at(deadline))
		ds = append(ds, d)
	}
	// One is acknowledged in time, one delivered directly: neither expires.
	f.ack(&ledger.AckRecordParams{DeliveryID: ds[3].ID, Outcome: ledger.AckProcessed, Now: at(40 * time.Minute)})
	other := f.publish("shop", "order.created", at(time.Minute)).Deliveries[0].ID
	f.claimOne("w", at(time.Minute))
	f.mustRecord(attempt(other, "w", at(time.Minute), 200, ledger.Next{State: ledger.StateDelivered}))

	list := func(now time.Time, limit int) []ledger.Delivery {
		t.Helper()
		got, err := life.AckExpiredList(f.ctx, now, limit)
		if err != nil {
			t.Fatalf("AckExpiredList: %v", err)
		}
		return got
	}
	wantEqual(t, "expired before any deadline", idsOf(list(at(29*time.Minute), 10)), nil)
	wantEqual(t, "expired at the first deadline (inclusive)", idsOf(list(at(30*time.Minute), 10)), []string{ds[1].ID})
	wantEqual(t, "expired at 1h, earliest deadline first", list(at(time.Hour), 10), []ledger.Delivery{f.delivery(ds[1].ID), f.delivery(ds[0].ID)})
	wantEqual(t, "limit", idsOf(list(at(3*time.Hour), 2)), []string{ds[1].ID, ds[0].ID})
	wantEqual(t, "all", idsOf(list(at(3*time.Hour), 0)), []string{ds[1].ID, ds[0].ID, ds[2].ID})
}

func testAckTimeoutRetry(t *testing.T, f *fixture) {
	f.upsert(callbackEndpoint("shop", "cb", "*"), t0)
	_, d := f.awaiting(event("shop", "order.created", t0), "shop/cb", at(time.Second), at(time.Hour))
	now := at(time.Hour)
	due := at(time.Hour + 5*time.Minute)
	res := f.timeout(&ledger.AckTimeoutParams{DeliveryID: d.ID, Next: ledger.Next{State: ledger.StateScheduled, DueAt: due}, Now: now})
	want := d
	want.State, want.AckDeadline, want.DueAt, want.LastError = ledger.StateScheduled, nil, due, ledger.AckTimeoutReason
	wantEqual(t, "delivery after the timeout", res.Delivery, want)
	wantEqual(t, "DeliveryGet after the timeout", f.delivery(d.ID), want)
	if res.DeadLetter != nil {
		t.Fatalf("a retry was dead-lettered: %+v", res.DeadLetter)
	}
	f.wantAttempts(d.ID, 1)
	f.wantCounts("shop/cb", counts{Pending: 1})
	st := f.stats("shop/cb")
	if st.LastFailureAt == nil || !st.LastFailureAt.Equal(now) || st.LastFailureReason != ledger.AckTimeoutReason || st.LastSuccessAt != nil {
		t.Fatalf("stats after a timeout: %+v", st)
	}
	if got := f.claim("w", due.Add(-time.Nanosecond), time.Minute, 10); len(got) != 0 {
		t.Fatalf("claimed before the retry was due: %v", claimedIDs(got))
	}
	c := f.claimOne("w", due)
	if c.Delivery.ID != d.ID || c.Delivery.Attempts != 1 {
		t.Fatalf("claimed retry %+v", c.Delivery)
	}
	f.mustRecord(attempt(d.ID, "w", due, 202, ledger.Next{State: ledger.StateAwaitingAck, AckDeadline: at(3 * time.Hour)}))
	f.ack(&ledger.AckRecordParams{DeliveryID: d.ID, Outcome: ledger.AckProcessed, Now: at(2 * time.Hour)})
	if got := f.delivery(d.ID); got.State != ledger.StateDelivered || got.Attempts != 2 {
		t.Fatalf("delivered after the retry: %+v", got)
	}
}

func testAckTimeoutExhausts(t *testing.T, f *fixture) {
	src := callbackEndpoint("shop", "cb", "*")
	src.DeadLetter = "shop/dlq"
	src.Owner = "team-cb"
	f.upsert(src, t0)
	f.upsert(endpoint("shop", "dlq", "nothing"), t0)
	ev, d := f.awaiting(event("shop", "order.created", t0), "shop/cb", at(time.Second), at(time.Hour))
	now := at(2 * time.Hour)
	res := f.timeout(&ledger.AckTimeoutParams{DeliveryID: d.ID, Next: ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustAckTimeout}, Now: now})
	want := d
	want.State, want.AckDeadline, want.TerminalAt, want.LastError = ledger.StateExhausted, nil, ptr(now), ledger.AckTimeoutReason
	want.ExhaustReason, want.Resolution = ledger.ExhaustAckTimeout, ledger.ResolutionUnresolved
	wantEqual(t, "exhausted by the timeout", res.Delivery, want)
	wantEqual(t, "DeliveryGet", f.delivery(d.ID), want)
	if res.DeadLetter == nil || res.DeadLetter.EndpointID != "shop/dlq" {
		t.Fatalf("dead letter of an acknowledgement timeout: %+v", res.DeadLetter)
	}
	var data ledger.DeadLetterData
	if err := json.Unmarshal(f.getEvent(res.DeadLetter.EventID).Data, &data); err != nil {
		t.Fatalf("dead-letter data: %v", err)
	}
	wantEqual(t, "dead-letter data of an acknowledgement timeout", data, ledger.DeadLetterData{
		DeliveryID: d.ID, EventID: ev.Event.ID, EventType: "order.created", Endpoint: "shop/cb", Owner: "team-cb",
		Reason: ledger.ExhaustAckTimeout, Attempts: 1, LastStatus: 202, LastError: ledger.AckTimeoutReason, ExhaustedAt: now,
	})
	f.wantAttempts(d.ID, 1)
	f.wantCounts("shop/cb", counts{ExhaustedUnresolved: 1})
	f.wantCounts("shop/dlq", counts{Pending: 1})
	if st := f.stats("shop/cb"); st.LastFailureAt == nil || !st.LastFailureAt.Equal(now) || st.LastFailureReason != ledger.AckTimeoutReason {
		t.Fatalf("stats after exhausting on a timeout: %+v", st)
	}
}

func testAckTimeoutGuards(t *testing.T, f *fixture) {
	f.upsert(callbackEndpoint("shop", "cb", "*"), t0)
	life := f.s
	retry := ledger.Next{State: ledger.StateScheduled, DueAt: at(3 * time.Hour)}
	_, err := life.AckTimeoutRecord(f.ctx, &ledger.AckTimeoutParams{DeliveryID: "dlv_unknown", Next: retry, Now: t0})
	wantErr(t, "AckTimeoutRecord of an unknown delivery", err, ledger.ErrNotFound)

	_, d := f.awaiting(event("shop", "order.created", t0), "shop/cb", at(time.Second), at(time.Hour))
	_, err = life.AckTimeoutRecord(f.ctx, &ledger.AckTimeoutParams{DeliveryID: d.ID, Next: retry, Now: at(time.Hour - time.Microsecond)})
	wantErr(t, "AckTimeoutRecord before the deadline", err, ledger.ErrNotAwaitingAck)
	for _, next := range []ledger.Next{
		{State: ledger.StateDelivered},
		{State: ledger.StateAwaitingAck, AckDeadline: at(5 * time.Hour)},
		{State: ledger.StateScheduled}, // no DueAt
		{State: ledger.StateExhausted}, // no Reason
	} {
		if _, err := life.AckTimeoutRecord(f.ctx, &ledger.AckTimeoutParams{DeliveryID: d.ID, Next: next, Now: at(2 * time.Hour)}); err == nil {
			t.Fatalf("AckTimeoutRecord accepted Next %+v", next)
		}
	}
	wantEqual(t, "delivery after refused timeouts", f.delivery(d.ID), d)
	f.wantCounts("shop/cb", counts{AwaitingAck: 1})

	// The acknowledgement wins: the timeout that comes after it is refused.
	f.ack(&ledger.AckRecordParams{DeliveryID: d.ID, Outcome: ledger.AckProcessed, Now: at(time.Hour)})
	_, err = life.AckTimeoutRecord(f.ctx, &ledger.AckTimeoutParams{DeliveryID: d.ID, Next: retry, Now: at(2 * time.Hour)})
	wantErr(t, "AckTimeoutRecord after the acknowledgement", err, ledger.ErrNotAwaitingAck)

	// The timeout wins: the acknowledgement that comes after it is refused.
	_, d2 := f.awaiting(event("shop", "order.created", at(time.Hour)), "shop/cb", at(time.Hour), at(2*time.Hour))
	f.timeout(&ledger.AckTimeoutParams{DeliveryID: d2.ID, Next: retry, Now: at(2 * time.Hour)})
	_, err = life.AckRecord(f.ctx, &ledger.AckRecordParams{DeliveryID: d2.ID, Outcome: ledger.AckProcessed, Now: at(2 * time.Hour)})
	wantErr(t, "AckRecord after the timeout", err, ledger.ErrNotAwaitingAck)
	f.wantCounts("shop/cb", counts{Pending: 1, Delivered: 1})
}

func testScrubOnLastDelivery(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "a", "*"), t0)
	f.upsert(endpoint("shop", "b", "*"), t0)
	res := f.insert(tokenEvent("shop", "order.created", t0, "tok_last"))[0]
	evID := res.Event.ID
	a, b := deliveryTo(t, res, "shop/a"), deliveryTo(t, res, "shop/b")

	f.claim("w", t0, time.Minute, 10)
	// A retry keeps the secrets; so does the first delivery to end.
	f.mustRecord(attempt(a, "w", at(time.Second), 503, ledger.Next{State: ledger.StateScheduled, DueAt: at(time.Minute)}))
	f.mustRecord(attempt(b, "w", at(2*time.Second), 200, ledger.Next{State: ledger.StateDelivered}))
	f.wantSecrets(evID, true, nil, nil)

	f.claimOne("w", at(time.Minute))
	now := at(time.Minute + time.Second)
	f.mustRecord(attempt(a, "w", now, 500, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustMaxAttempts}))
	f.wantSecrets(evID, false, ptr(now), nil)

	// An event without secrets is left alone.
	plain := f.publish("shop", "order.created", now)
	f.claim("w", now, time.Minute, 10)
	for _, d := range plain.Deliveries {
		f.mustRecord(attempt(d.ID, "w", now, 200, ledger.Next{State: ledger.StateDelivered}))
	}
	if ev := f.getEvent(plain.Event.ID); ev.SecretsScrubAt != nil || ev.SecretsScrubDue != nil || len(ev.SecretNames) != 0 {
		t.Fatalf("event without secrets after delivery: %+v", ev)
	}
}

func testScrubOnAck(t *testing.T, f *fixture) {
	f.upsert(callbackEndpoint("shop", "cb", "*"), t0)
	life := f.s

	// Awaiting an acknowledgement is pending: the secrets stay.
	processed, d := f.awaiting(tokenEvent("shop", "order.created", t0, "tok_p"), "shop/cb", t0, at(time.Hour))
	f.wantSecrets(processed.Event.ID, true, nil, nil)
	f.ack(&ledger.AckRecordParams{DeliveryID: d.ID, Outcome: ledger.AckProcessed, Now: at(time.Minute)})
	f.wantSecrets(processed.Event.ID, false, ptr(at(time.Minute)), nil)

	rejected, d := f.awaiting(tokenEvent("shop", "order.created", t0, "tok_r"), "shop/cb", t0, at(time.Hour))
	f.ack(&ledger.AckRecordParams{DeliveryID: d.ID, Outcome: ledger.AckRejected, Reason: "no", Now: at(2 * time.Minute)})
	f.wantSecrets(rejected.Event.ID, false, ptr(at(2*time.Minute)), nil)

	// A timeout that retries keeps them; one that exhausts scrubs them.
	timedOut, d := f.awaiting(tokenEvent("shop", "order.created", t0, "tok_t"), "shop/cb", t0, at(time.Hour))
	f.timeout(&ledger.AckTimeoutParams{DeliveryID: d.ID, Next: ledger.Next{State: ledger.StateScheduled, DueAt: at(2 * time.Hour)}, Now: at(time.Hour)})
	f.wantSecrets(timedOut.Event.ID, true, nil, nil)
	f.claimOne("w", at(2*time.Hour))
	f.mustRecord(attempt(d.ID, "w", at(2*time.Hour), 202, ledger.Next{State: ledger.StateAwaitingAck, AckDeadline: at(3 * time.Hour)}))
	f.timeout(&ledger.AckTimeoutParams{DeliveryID: d.ID, Next: ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustAckTimeout}, Now: at(3 * time.Hour)})
	f.wantSecrets(timedOut.Event.ID, false, ptr(at(3*time.Hour)), nil)

	// A refused acknowledgement scrubs nothing.
	kept, d := f.awaiting(tokenEvent("shop", "order.created", t0, "tok_k"), "shop/cb", t0, at(5*time.Hour))
	if _, err := life.AckTimeoutRecord(f.ctx, &ledger.AckTimeoutParams{DeliveryID: d.ID, Next: ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustAckTimeout}, Now: at(4 * time.Hour)}); err == nil {
		t.Fatal("timeout before the deadline accepted")
	}
	f.wantSecrets(kept.Event.ID, true, nil, nil)
}

func testScrubOnEndpointDelete(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "gone", "*"), t0)
	f.upsert(endpoint("shop", "stays", "other.*"), t0)
	scheduled := f.insert(tokenEvent("shop", "order.created", t0, "tok_s"))[0].Event.ID
	both := f.insert(tokenEvent("shop", "other.created", t0, "tok_b"))[0]
	// Its delivery to stays is still pending: deleting gone leaves it alone.
	now := at(time.Minute)
	if _, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: "shop/gone", Now: now}); err != nil {
		t.Fatalf("EndpointDelete: %v", err)
	}
	f.wantSecrets(scheduled, false, ptr(now), nil)
	f.wantSecrets(both.Event.ID, true, nil, nil)
}

func testScrubPerBatch(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "a", "*"), t0)
	f.upsert(withPolicy(endpoint("shop", "grace", "graced.*"), time.Minute, 0, 0), t0)
	secretA := f.insert(tokenEvent("shop", "order.created", t0, "tok_1"))[0]
	secretB := f.insert(tokenEvent("shop", "order.created", t0, "tok_2"))[0]
	retried := f.insert(tokenEvent("shop", "order.created", t0, "tok_3"))[0]
	graced := f.insert(tokenEvent("shop", "graced.created", t0, "tok_4"))[0]
	plain := f.publish("shop", "order.created", t0)
	f.claim("w", t0, time.Minute, 100)
	var ps []*ledger.AttemptRecordParams
	for i, r := range []ledger.EventInsertResult{secretA, secretB, retried, graced, plain} {
		for _, d := range r.Deliveries {
			next := ledger.Next{State: ledger.StateDelivered}
			switch i {
			case 1:
				next = ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable}
			case 2:
				next = ledger.Next{State: ledger.StateScheduled, DueAt: at(time.Hour)}
			}
			ps = append(ps, attempt(d.ID, "w", at(time.Duration(i+1)*time.Second), 200, next))
		}
	}
	res, err := f.s.AttemptRecordMany(f.ctx, ps)
	if err != nil {
		t.Fatalf("AttemptRecordMany: %v", err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("item %d: %v", i, r.Err)
		}
	}
	f.wantSecrets(secretA.Event.ID, false, ptr(at(time.Second)), nil)
	f.wantSecrets(secretB.Event.ID, false, ptr(at(2*time.Second)), nil)
	f.wantSecrets(retried.Event.ID, true, nil, nil)
	f.wantSecrets(graced.Event.ID, true, nil, ptr(at(4*time.Second+time.Minute)))
	if ev := f.getEvent(plain.Event.ID); ev.SecretsScrubAt != nil || ev.SecretsScrubDue != nil {
		t.Fatalf("event without secrets: %+v", ev)
	}
}

func testScrubGracePeriod(t *testing.T, f *fixture) {
	f.upsert(withPolicy(endpoint("shop", "short", "*"), time.Minute, 0, 0), t0)
	f.upsert(withPolicy(endpoint("shop", "long", "*"), 5*time.Minute, 0, 0), t0)
	f.upsert(endpoint("shop", "none", "*"), t0)
	life := f.s
	scrubDue := func(now time.Time, limit int) int {
		t.Helper()
		n, err := life.SecretsScrubDue(f.ctx, now, limit)
		if err != nil {
			t.Fatalf("SecretsScrubDue: %v", err)
		}
		return n
	}
	var ids []string
	for i := range 3 {
		res := f.insert(tokenEvent("shop", "order.created", at(time.Duration(i)*time.Second), "tok_g"))[0]
		ids = append(ids, res.Event.ID)
		now := at(time.Duration(i) * time.Second)
		f.claim("w", now, time.Minute, 10)
		for _, d := range res.Deliveries {
			f.mustRecord(attempt(d.ID, "w", now, 200, ledger.Next{State: ledger.StateDelivered}))
		}
	}
	// The longest grace period among the event's endpoints applies.
	for i, id := range ids {
		f.wantSecrets(id, true, nil, ptr(at(time.Duration(i)*time.Second+5*time.Minute)))
	}
	if n := scrubDue(at(5*time.Minute-time.Microsecond), 10); n != 0 {
		t.Fatalf("SecretsScrubDue before the grace period ended scrubbed %d", n)
	}
	if n := scrubDue(at(5*time.Minute+time.Second), 1); n != 1 {
		t.Fatalf("SecretsScrubDue with limit 1 scrubbed %d", n)
	}
	f.wantSecrets(ids[0], false, ptr(at(5*time.Minute+time.Second)), ptr(at(5*time.Minute)))
	f.wantSecrets(ids[1], true, nil, ptr(at(time.Second+5*time.Minute)))
	if n := scrubDue(at(time.Hour), 0); n != 2 {
		t.Fatalf("SecretsScrubDue of the rest scrubbed %d, want 2", n)
	}
	f.wantSecrets(ids[2], false, ptr(at(time.Hour)), ptr(at(2*time.Second+5*time.Minute)))
	if n := scrubDue(at(2*time.Hour), 0); n != 0 {
		t.Fatalf("SecretsScrubDue scrubbed %d events again", n)
	}
}

// testScrubDueWaitsForRetry checks that SecretsScrubDue leaves alone an
// event that has a pending delivery again (a recovery retry during the
// grace period) and that the end of that delivery arms the scrub again.
func testScrubDueWaitsForRetry(t *testing.T, f *fixture) {
	f.upsert(withPolicy(endpoint("shop", "all", "*"), time.Hour, 0, 0), t0)
	ev := f.insert(tokenEvent("shop", "order.created", t0, "tok_r"))[0]
	orig := ev.Deliveries[0].ID
	f.claimOne("w", t0)
	f.mustRecord(attempt(orig, "w", t0, 500, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable}))
	f.wantSecrets(ev.Event.ID, true, nil, ptr(at(time.Hour)))

	item, err := f.s.RecoveryApply(f.ctx, &ledger.RecoveryApplyParams{
		OperationKey: "op-1", DeliveryID: orig, Action: ledger.RecoveryRetry, Now: at(time.Minute),
	})
	if err != nil || item.Outcome != ledger.OutcomeRetried {
		t.Fatalf("RecoveryApply retry = %+v, %v", item, err)
	}
	if n, err := f.s.SecretsScrubDue(f.ctx, at(time.Hour), 0); err != nil || n != 0 {
		t.Fatalf("SecretsScrubDue with a retry pending = %d, %v; want 0", n, err)
	}
	f.wantSecrets(ev.Event.ID, true, nil, nil)

	f.claimOne("w", at(time.Hour))
	f.mustRecord(attempt(item.NewDeliveryID, "w", at(2*time.Hour), 200, ledger.Next{State: ledger.StateDelivered}))
	f.wantSecrets(ev.Event.ID, true, nil, ptr(at(3*time.Hour)))
	if n, err := f.s.SecretsScrubDue(f.ctx, at(3*time.Hour), 0); err != nil || n != 1 {
		t.Fatalf("SecretsScrubDue after the retry = %d, %v; want 1", n, err)
	}
	f.wantSecrets(ev.Event.ID, false, ptr(at(3*time.Hour)), ptr(at(3*time.Hour)))
}

func testScrubUndelivered(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "orders", "order.*"), t0)
	// No endpoint subscribes: nothing will ever send the secrets.
	res := f.insert(tokenEvent("shop", "invoice.paid", t0, "tok_u"))[0]
	if res.Err != nil || len(res.Deliveries) != 0 || res.Event.Secrets != nil ||
		res.Event.SecretsScrubAt == nil || !res.Event.SecretsScrubAt.Equal(t0) {
		t.Fatalf("event without subscribers: %+v", res)
	}
	f.wantSecrets(res.Event.ID, false, ptr(t0), nil)
	// Subscribed events keep theirs until their deliveries end.
	kept := f.insert(tokenEvent("shop", "order.created", t0, "tok_k"))[0]
	f.wantSecrets(kept.Event.ID, true, nil, nil)
}

func testCompact(t *testing.T, f *fixture) {
	life := f.s
	if err := life.Compact(f.ctx); err != nil {
		t.Fatalf("Compact of an empty store: %v", err)
	}
	f.upsert(endpoint("shop", "all", "*"), t0)
	res := f.insert(tokenEvent("shop", "order.created", t0, "tok_c"))[0]
	f.claimOne("w", t0)
	f.mustRecord(attempt(res.Deliveries[0].ID, "w", t0, 200, ledger.Next{State: ledger.StateDelivered}))
	if err := life.Compact(f.ctx); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	f.wantSecrets(res.Event.ID, false, ptr(t0), nil)
	if err := life.Compact(f.ctx); err != nil {
		t.Fatalf("Compact again: %v", err)
	}
}

// prune runs one Prune call with the given defaults.
func (f *fixture) prune(now time.Time, limit int, payload, evidence time.Duration) ledger.PruneResult {
	f.t.Helper()
	res, err := f.s.Prune(f.ctx, &ledger.PruneParams{Now: now, Limit: limit,
		DefaultPayloadRetention: payload, DefaultEvidenceRetention: evidence})
	if err != nil {
		f.t.Fatalf("Prune at %v: %v", now, err)
	}
	return res
}

// deliverAll claims and delivers every due delivery at now.
func (f *fixture) deliverAll(now time.Time) {
	f.t.Helper()
	for _, c := range f.claim("w", now, time.Minute, 1000) {
		f.mustRecord(attempt(c.Delivery.ID, "w", now, 200, ledger.Next{State: ledger.StateDelivered}))
	}
}

// wantGone checks that an event and its deliveries and attempts are gone.
func (f *fixture) wantGone(ev ledger.EventInsertResult) {
	f.t.Helper()
	_, err := f.s.EventGet(f.ctx, ev.Event.ID)
	wantErr(f.t, "EventGet of a deleted event", err, ledger.ErrNotFound)
	for _, d := range ev.Deliveries {
		_, err := f.s.DeliveryGet(f.ctx, d.ID)
		wantErr(f.t, "DeliveryGet of a deleted event's delivery", err, ledger.ErrNotFound)
		_, err = f.s.AttemptList(f.ctx, d.ID)
		wantErr(f.t, "AttemptList of a deleted event's delivery", err, ledger.ErrNotFound)
	}
}

func testPrunePayloadThenEvidence(t *testing.T, f *fixture) {
	f.upsert(withPolicy(endpoint("shop", "all", "*"), 0, time.Hour, 24*time.Hour), t0)
	p := tokenEvent("shop", "order.created", t0, "tok_p")
	p.IdempotencyKey = "order-1"
	ev := f.insert(p)[0]
	d := ev.Deliveries[0].ID
	ended := at(time.Second)
	f.claimOne("w", t0)
	f.mustRecord(attempt(d, "w", ended, 200, ledger.Next{State: ledger.StateDelivered}))
	const defaults = 1000 * time.Hour // apply to no event here

	if got := f.prune(ended.Add(time.Hour-time.Microsecond), 0, defaults, defaults); got != (ledger.PruneResult{}) {
		t.Fatalf("Prune before the payload retention ended: %+v", got)
	}
	wantEqual(t, "event before pruning", canon(t, f.getEvent(ev.Event.ID).Data), canon(t, p.Data))

	now := ended.Add(time.Hour)
	if got := f.prune(now, 0, defaults, defaults); got != (ledger.PruneResult{PayloadsPruned: 1}) {
		t.Fatalf("Prune at the payload retention: %+v", got)
	}
	got := f.getEvent(ev.Event.ID)
	if got.Data != nil || got.PayloadPrunedAt == nil || !got.PayloadPrunedAt.Equal(now) {
		t.Fatalf("event after its payload was pruned: data %q, PayloadPrunedAt %v", got.Data, got.PayloadPrunedAt)
	}
	if got.IdempotencyKey != "order-1" || string(got.BodyHash) != string(p.BodyHash) || got.Type != p.Type ||
		got.Secrets != nil || len(got.SecretNames) != 1 {
		t.Fatalf("evidence after pruning the payload: %+v", got)
	}
	atts := f.wantAttempts(d, 1)
	if atts[0].ResponseExcerpt != nil || atts[0].StatusCode != 200 {
		t.Fatalf("attempt after pruning the payload: %+v", atts[0])
	}
	if dl := f.delivery(d); dl.State != ledger.StateDelivered || !dl.TerminalAt.Equal(ended) {
		t.Fatalf("delivery after pruning the payload: %+v", dl)
	}
	if got := f.prune(now.Add(time.Hour), 0, defaults, defaults); got != (ledger.PruneResult{}) {
		t.Fatalf("Prune pruned again: %+v", got)
	}
	// The idempotency key is evidence: a replay is still a duplicate.
	replay := event("shop", "order.created", now)
	replay.Data, replay.BodyHash, replay.IdempotencyKey = p.Data, p.BodyHash, p.IdempotencyKey
	if r := f.insert(replay)[0]; !r.Duplicate || r.Event.ID != ev.Event.ID {
		t.Fatalf("replay after pruning the payload: %+v", r)
	}

	if got := f.prune(ended.Add(24*time.Hour-time.Microsecond), 0, defaults, defaults); got != (ledger.PruneResult{}) {
		t.Fatalf("Prune before the evidence retention ended: %+v", got)
	}
	if got := f.prune(ended.Add(24*time.Hour), 0, defaults, defaults); got != (ledger.PruneResult{EventsDeleted: 1}) {
		t.Fatalf("Prune at the evidence retention: %+v", got)
	}
	f.wantGone(ev)
	// The key is free again, and the counters still count what happened.
	again := event("shop", "order.created", ended.Add(25*time.Hour))
	again.Data, again.BodyHash, again.IdempotencyKey = p.Data, p.BodyHash, p.IdempotencyKey
	if r := f.insert(again)[0]; r.Duplicate || r.Err != nil || r.Event.ID != again.ID {
		t.Fatalf("insert after the evidence was pruned: %+v", r)
	}
	f.wantCounts("shop/all", counts{Pending: 1, Delivered: 1})

	// An event past both retentions at once is deleted, not pruned twice.
	late := f.publish("shop", "order.created", ended.Add(25*time.Hour))
	f.deliverAll(ended.Add(25 * time.Hour))
	if got := f.prune(ended.Add(50*time.Hour), 0, defaults, defaults); got != (ledger.PruneResult{EventsDeleted: 2}) {
		t.Fatalf("Prune of events past both retentions: %+v", got)
	}
	f.wantGone(late)
}

func testPruneLongestRetention(t *testing.T, f *fixture) {
	f.upsert(withPolicy(endpoint("shop", "short", "order.*"), 0, time.Hour, 2*time.Hour), t0)
	f.upsert(withPolicy(endpoint("shop", "long", "order.*"), 0, 3*time.Hour, 5*time.Hour), t0)
	// A policy that sets no retention stands for the defaults.
	f.upsert(endpoint("shop", "unset", "unset.*"), t0)
	ev := f.publish("shop", "order.created", t0)
	unset := f.publish("shop", "unset.created", t0)
	f.claim("w", t0, time.Minute, 10)
	f.mustRecord(attempt(unset.Deliveries[0].ID, "w", at(time.Second), 200, ledger.Next{State: ledger.StateDelivered}))
	// The event is terminal when its last delivery ends.
	f.mustRecord(attempt(deliveryTo(t, ev, "shop/long"), "w", at(time.Second), 200, ledger.Next{State: ledger.StateDelivered}))
	last := at(time.Minute)
	f.mustRecord(attempt(deliveryTo(t, ev, "shop/short"), "w", last, 200, ledger.Next{State: ledger.StateDelivered}))
	// long is deleted: its last policy still counts.
	if _, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: "shop/long", Now: at(2 * time.Minute)}); err != nil {
		t.Fatalf("EndpointDelete: %v", err)
	}

	const payload, evidence = 10 * time.Hour, 24 * time.Hour // the defaults
	prune := func(now time.Time, want ledger.PruneResult) {
		t.Helper()
		if got := f.prune(now, 0, payload, evidence); got != want {
			t.Fatalf("Prune at t0+%v = %+v, want %+v", now.Sub(t0), got, want)
		}
	}
	prune(last.Add(3*time.Hour-time.Microsecond), ledger.PruneResult{})
	prune(last.Add(3*time.Hour), ledger.PruneResult{PayloadsPruned: 1})
	if f.getEvent(ev.Event.ID).Data != nil || f.getEvent(unset.Event.ID).Data == nil {
		t.Fatal("pruned the wrong payload")
	}
	prune(last.Add(5*time.Hour-time.Microsecond), ledger.PruneResult{})
	prune(last.Add(5*time.Hour), ledger.PruneResult{EventsDeleted: 1})
	f.wantGone(ev)
	prune(at(time.Second+payload-time.Microsecond), ledger.PruneResult{})
	prune(at(time.Second+payload), ledger.PruneResult{PayloadsPruned: 1})
	prune(at(time.Second+evidence-time.Microsecond), ledger.PruneResult{})
	prune(at(time.Second+evidence), ledger.PruneResult{EventsDeleted: 1})
	f.wantGone(unset)
}

func testPrunePending(t *testing.T, f *fixture) {
	f.upsert(withPolicy(endpoint("shop", "done", "*"), 0, time.Hour, 2*time.Hour), t0)
	paused := withPolicy(callbackEndpoint("shop", "waits", "*"), 0, time.Hour, 2*time.Hour)
	f.upsert(paused, t0)
	// One delivery ends, the other awaits its acknowledgement for ever.
	ev, _ := f.awaiting(event("shop", "order.created", t0), "shop/waits", t0, at(1000*time.Hour))
	f.deliverAll(t0)
	// Another waits in the queue of a paused endpoint.
	paused.Paused = true
	f.upsert(paused, t0)
	queued := f.publish("shop", "order.created", t0)
	f.deliverAll(t0)
	for _, now := range []time.Time{at(3 * time.Hour), at(1000 * time.Hour)} {
		if got := f.prune(now, 0, time.Hour, time.Hour); got != (ledger.PruneResult{}) {
			t.Fatalf("Prune of events with pending deliveries at %v: %+v", now, got)
		}
	}
	for _, id := range []string{ev.Event.ID, queued.Event.ID} {
		if e := f.getEvent(id); e.Data == nil || e.PayloadPrunedAt != nil {
			t.Fatalf("event %s with a pending delivery lost its payload", id)
		}
	}
}

func testPruneUnresolved(t *testing.T, f *fixture) {
	f.upsert(withPolicy(endpoint("shop", "all", "*"), 0, time.Hour, 2*time.Hour), t0)
	ev := f.publish("shop", "order.created", t0)
	f.claimOne("w", t0)
	f.mustRecord(attempt(ev.Deliveries[0].ID, "w", t0, 500, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable}))
	if got := f.prune(at(time.Hour), 0, time.Hour, time.Hour); got != (ledger.PruneResult{PayloadsPruned: 1}) {
		t.Fatalf("Prune of an exhausted event's payload: %+v", got)
	}
	if got := f.prune(at(1000*time.Hour), 0, time.Hour, time.Hour); got != (ledger.PruneResult{}) {
		t.Fatalf("Prune of unresolved work: %+v", got)
	}
	if d := f.delivery(ev.Deliveries[0].ID); d.Resolution != ledger.ResolutionUnresolved {
		t.Fatalf("unresolved delivery after pruning: %+v", d)
	}
	f.wantCounts("shop/all", counts{ExhaustedUnresolved: 1})
}

func testPruneUndelivered(t *testing.T, f *fixture) {
	f.upsert(withPolicy(endpoint("shop", "orders", "order.*"), 0, 100*time.Hour, 100*time.Hour), t0)
	p := tokenEvent("shop", "invoice.paid", t0, "tok_u")
	p.IdempotencyKey = "inv-1"
	ev := f.insert(p)[0]
	if len(ev.Deliveries) != 0 {
		t.Fatalf("event has %d deliveries, want none", len(ev.Deliveries))
	}
	// Zero defaults keep it for ever.
	if got := f.prune(at(1000*time.Hour), 0, 0, 0); got != (ledger.PruneResult{}) {
		t.Fatalf("Prune without default retention: %+v", got)
	}
	if got := f.prune(at(2*time.Hour-time.Microsecond), 0, 2*time.Hour, 3*time.Hour); got != (ledger.PruneResult{}) {
		t.Fatalf("Prune before the default payload retention: %+v", got)
	}
	if got := f.prune(at(2*time.Hour), 0, 2*time.Hour, 3*time.Hour); got != (ledger.PruneResult{PayloadsPruned: 1}) {
		t.Fatalf("Prune at the default payload retention: %+v", got)
	}
	if e := f.getEvent(ev.Event.ID); e.Data != nil || e.PayloadPrunedAt == nil || !e.PayloadPrunedAt.Equal(at(2*time.Hour)) {
		t.Fatalf("event after pruning its payload: %+v", e)
	}
	if got := f.prune(at(3*time.Hour), 0, 2*time.Hour, 3*time.Hour); got != (ledger.PruneResult{EventsDeleted: 1}) {
		t.Fatalf("Prune at the default evidence retention: %+v", got)
	}
	f.wantGone(ev)
	if r := f.insert(p)[0]; r.Duplicate {
		t.Fatal("the key of a deleted event still dedupes")
	}
}

func testPruneLimit(t *testing.T, f *fixture) {
	f.upsert(withPolicy(endpoint("shop", "all", "*"), 0, time.Hour, 10*time.Hour), t0)
	for i := range 5 {
		f.publish("shop", "order.created", at(time.Duration(i)*time.Second))
	}
	f.deliverAll(at(10 * time.Second))
	// Two events without deliveries too, older than their default retention.
	f.insert(event("quiet", "nobody.listens", t0), event("quiet", "nobody.listens", t0))
	now := at(20 * time.Hour)
	for _, want := range []ledger.PruneResult{{EventsDeleted: 3}, {EventsDeleted: 3}, {EventsDeleted: 1}, {}} {
		if got := f.prune(now, 3, time.Hour, 10*time.Hour); got != want {
			t.Fatalf("Prune with limit 3: %+v, want %+v", got, want)
		}
	}
	for range 3 {
		f.publish("shop", "order.created", now)
	}
	f.deliverAll(now)
	if got := f.prune(now.Add(time.Hour), 2, time.Hour, 10*time.Hour); got != (ledger.PruneResult{PayloadsPruned: 2}) {
		t.Fatalf("Prune of payloads with limit 2: %+v", got)
	}
	if got := f.prune(now.Add(time.Hour), 0, time.Hour, 10*time.Hour); got != (ledger.PruneResult{PayloadsPruned: 1}) {
		t.Fatalf("Prune with the default limit: %+v", got)
	}
}
