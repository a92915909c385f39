package ledgertest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The Breakers group: ledger.Breakers, each endpoint's circuit breaker in
// the shared ledger. An open breaker holds the endpoint's deliveries from
// every claim (like pause), one probe at a time is leased, and the horizon
// expiry leases what it held too long.

func exerciseBreakers(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"OpenHoldsClaimsAndPublishes": testBreakerHolds,
		"OpenTwiceOneOpening":         testBreakerOpenTwice,
		"GoneOutranksFailing":         testBreakerGone,
		"OneProbeAtATime":             testBreakerOneProbe,
		"ProbeSuccessCloses":          testBreakerProbeSuccess,
		"ProbeFailureReschedules":     testBreakerProbeFailure,
		"ProbeNowAndClose":            testBreakerProbeNowClose,
		"ExpireLeasesTheOverdue":      testBreakerExpire,
		"UnsentRecordAddsNoAttempt":   testBreakerUnsent,
		"DeleteForgets":               testBreakerDelete,
		"UnknownEndpoint":             testBreakerUnknown,
		"ConcurrentProbesOneWins":     testBreakerConcurrentProbes,
	})
}

func (f *fixture) openBreaker(id string, reason ledger.BreakerReason, now time.Time, next *time.Time) (ledger.Breaker, bool) {
	f.t.Helper()
	b, opened, err := f.s.BreakerOpen(f.ctx, &ledger.BreakerOpenParams{
		EndpointID: id, Reason: reason, Failures: 10, LastFailure: "HTTP 503", NextProbeAt: next, ProbeInterval: time.Minute, Now: now,
	})
	if err != nil {
		f.t.Fatalf("BreakerOpen(%s): %v", id, err)
	}
	return b, opened
}

func (f *fixture) probe(id, owner string, now time.Time) []ledger.ClaimedDelivery {
	f.t.Helper()
	got, err := f.s.BreakerProbe(f.ctx, &ledger.BreakerProbeParams{EndpointID: id, Owner: owner, Now: now, LeaseFor: time.Minute})
	if err != nil {
		f.t.Fatalf("BreakerProbe(%s): %v", id, err)
	}
	return got
}

func (f *fixture) breaker(id string) ledger.Breaker {
	f.t.Helper()
	b, err := f.s.BreakerGet(f.ctx, id)
	if err != nil {
		f.t.Fatalf("BreakerGet(%s): %v", id, err)
	}
	return b
}

// atp is a pointer to at(d).
func atp(d time.Duration) *time.Time {
	t := at(d)
	return &t
}

// testBreakerHolds: an open breaker keeps its endpoint's deliveries from
// claims and from NextDueAt, and a publish leases none to it; the other
// endpoint of the namespace is not held; closing releases them.
func testBreakerHolds(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "down", "order.created"), t0)
	f.upsert(endpoint("a", "up", "order.created"), t0)
	f.publish("a", "order.created", t0)
	f.openBreaker("a/down", ledger.BreakerFailing, t0, atp(time.Hour))

	got := f.claim("w1", t0.Add(time.Second), time.Minute, 10)
	if len(got) != 1 || got[0].Delivery.EndpointID != "a/up" {
		t.Fatalf("claim with a/down open = %v, want only the delivery to a/up", claimedIDs(got))
	}
	if _, ok, err := f.s.NextDueAt(f.ctx, nil); err != nil || ok {
		t.Fatalf("NextDueAt with the only scheduled delivery held = ok %v, err %v; want none", ok, err)
	}
	p := event("a", "order.created", t0.Add(2*time.Second))
	p.LeaseTo = &ledger.Lease{Owner: "w1", Until: t0.Add(time.Minute)}
	res := f.insert(p)[0]
	for _, l := range res.Leased {
		if l.Delivery.EndpointID == "a/down" {
			t.Fatalf("a publish leased %s to the held endpoint a/down", l.Delivery.ID)
		}
	}
	if _, err := f.s.BreakerClose(f.ctx, "a/down", ledger.BreakerURLChanged, t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	got = f.claim("w1", t0.Add(4*time.Second), time.Minute, 10)
	if len(got) != 2 {
		t.Fatalf("claim after closing = %v, want the two deliveries to a/down", claimedIDs(got))
	}
	for _, c := range got {
		if c.Delivery.EndpointID != "a/down" {
			t.Fatalf("claim after closing took %s of %s", c.Delivery.ID, c.Delivery.EndpointID)
		}
	}
}

// testBreakerOpenTwice: a second opening of an open breaker changes
// nothing; after a close, opening again counts a second opening.
func testBreakerOpenTwice(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "ep", "x"), t0)
	b, opened := f.openBreaker("a/ep", ledger.BreakerFailing, t0, atp(time.Minute))
	if !opened || !b.Open || b.Openings != 1 || !b.OpenedAt.Equal(t0) || b.Reason != ledger.BreakerFailing {
		t.Fatalf("first open = %+v, opened %v", b, opened)
	}
	b, opened = f.openBreaker("a/ep", ledger.BreakerFailing, t0.Add(time.Second), atp(2*time.Minute))
	if opened || b.Openings != 1 || !b.OpenedAt.Equal(t0) || !b.NextProbeAt.Equal(*atp(time.Minute)) {
		t.Fatalf("second open of an open breaker = %+v, opened %v; want it unchanged", b, opened)
	}
	if _, err := f.s.BreakerClose(f.ctx, "a/ep", ledger.BreakerURLChanged, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	b, opened = f.openBreaker("a/ep", ledger.BreakerFailing, t0.Add(3*time.Second), atp(time.Hour))
	if !opened || b.Openings != 2 || !b.OpenedAt.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("open after close = %+v, opened %v; want a second opening", b, opened)
	}
	list, err := f.s.BreakerList(f.ctx, t0.Add(time.Hour))
	if err != nil || len(list) != 1 || list[0].EndpointID != "a/ep" || !list[0].Open {
		t.Fatalf("BreakerList = %+v, %v; want the open breaker", list, err)
	}
}

// testBreakerGone: 410 on a breaker opened by failures turns it Gone with
// Gone's probe schedule (none), without a new opening.
func testBreakerGone(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "ep", "x"), t0)
	f.openBreaker("a/ep", ledger.BreakerFailing, t0, atp(time.Minute))
	b, opened := f.openBreaker("a/ep", ledger.BreakerGone, t0.Add(time.Second), nil)
	if opened || b.Reason != ledger.BreakerGone || b.NextProbeAt != nil || b.Openings != 1 {
		t.Fatalf("Gone over Failing = %+v, opened %v", b, opened)
	}
	b, _ = f.openBreaker("a/ep", ledger.BreakerFailing, t0.Add(2*time.Second), atp(time.Minute))
	if b.Reason != ledger.BreakerGone || b.NextProbeAt != nil {
		t.Fatalf("Failing over Gone = %+v; want Gone kept", b)
	}
	if got := f.probe("a/ep", "w1", t0.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("a Gone breaker without probe schedule leased probe %v", claimedIDs(got))
	}
}

// testBreakerOneProbe: the probe is the earliest due delivery, leased to
// one owner; no second probe while its lease runs; after the lease
// expired, the probe is leased again.
func testBreakerOneProbe(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "ep", "x"), t0)
	first := f.publish("a", "x", t0).Deliveries[0]
	f.publish("a", "x", t0.Add(time.Millisecond))
	f.openBreaker("a/ep", ledger.BreakerFailing, t0.Add(time.Second), atp(time.Minute))

	if got := f.probe("a/ep", "w1", t0.Add(30*time.Second)); len(got) != 0 {
		t.Fatalf("probe before NextProbeAt = %v, want none", claimedIDs(got))
	}
	got := f.probe("a/ep", "w1", t0.Add(time.Minute))
	if len(got) != 1 || got[0].Delivery.ID != first.ID || got[0].Delivery.LeaseOwner != "w1" || got[0].Event.ID != first.EventID {
		t.Fatalf("probe = %v, want the earliest delivery %s leased to w1 with its event", claimedIDs(got), first.ID)
	}
	if again := f.probe("a/ep", "w2", t0.Add(time.Minute+time.Second)); len(again) != 0 {
		t.Fatalf("second probe while the first runs = %v", claimedIDs(again))
	}
	b := f.breaker("a/ep")
	if b.ProbeDelivery != first.ID || b.ProbeOwner != "w1" || b.Probes != 1 {
		t.Fatalf("breaker during the probe = %+v", b)
	}
	f.wantCounts("a/ep", counts{Pending: 1, InFlight: 1})
	// The lease expired (w1 crashed): the probe is due again, to w2.
	later := f.probe("a/ep", "w2", t0.Add(3*time.Minute))
	if len(later) != 1 || later[0].Delivery.ID != first.ID || later[0].Delivery.LeaseOwner != "w2" {
		t.Fatalf("probe after the lease expired = %v, want %s to w2", claimedIDs(later), first.ID)
	}
}

// testBreakerProbeSuccess: the probe's success closes the breaker (the
// ramp starts at ClosedAt); an outcome for a delivery that is not the
// probe changes nothing.
func testBreakerProbeSuccess(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "ep", "x"), t0)
	f.publish("a", "x", t0)
	f.openBreaker("a/ep", ledger.BreakerFailing, t0, atp(time.Minute))
	c := f.probe("a/ep", "w1", t0.Add(time.Minute))[0]
	now := t0.Add(time.Minute + time.Second)
	_, changed, err := f.s.BreakerProbeDone(f.ctx, &ledger.BreakerProbeDoneParams{EndpointID: "a/ep", DeliveryID: "dlv_other", Owner: "w1", Success: true, Now: now})
	if err != nil || changed {
		t.Fatalf("outcome of a delivery that is not the probe: changed %v, err %v", changed, err)
	}
	b, changed, err := f.s.BreakerProbeDone(f.ctx, &ledger.BreakerProbeDoneParams{EndpointID: "a/ep", DeliveryID: c.Delivery.ID, Owner: "w1", Success: true, Now: now})
	if err != nil || !changed || b.Open || b.ClosedAt == nil || !b.ClosedAt.Equal(now) || b.CloseReason != ledger.BreakerProbeSucceeded || b.ProbeDelivery != "" {
		t.Fatalf("probe success = %+v, changed %v, err %v", b, changed, err)
	}
	list, err := f.s.BreakerList(f.ctx, now)
	if err != nil || len(list) != 1 || list[0].Open {
		t.Fatalf("BreakerList since the close = %+v, %v; want the ramping breaker", list, err)
	}
	if list, _ := f.s.BreakerList(f.ctx, now.Add(time.Nanosecond)); len(list) != 0 {
		t.Fatalf("BreakerList after the ramp = %+v, want none", list)
	}
}

// testBreakerProbeFailure: a failed probe keeps the breaker open with the
// next probe due later; the probe's delivery is the caller's to record.
func testBreakerProbeFailure(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "ep", "x"), t0)
	f.publish("a", "x", t0)
	f.openBreaker("a/ep", ledger.BreakerFailing, t0, atp(time.Minute))
	c := f.probe("a/ep", "w1", t0.Add(time.Minute))[0]
	next := t0.Add(3 * time.Minute)
	b, changed, err := f.s.BreakerProbeDone(f.ctx, &ledger.BreakerProbeDoneParams{EndpointID: "a/ep", DeliveryID: c.Delivery.ID, Owner: "w1",
		Result: "HTTP 503", NextProbeAt: &next, ProbeInterval: 4 * time.Minute, Now: t0.Add(time.Minute + time.Second)})
	if err != nil || !changed || !b.Open || !b.NextProbeAt.Equal(next) || b.ProbeInterval != 4*time.Minute || b.LastProbeResult != "HTTP 503" || b.ProbeDelivery != "" {
		t.Fatalf("failed probe = %+v, changed %v, err %v", b, changed, err)
	}
}

// testBreakerProbeNowClose: an admin's probe request makes a Gone
// breaker's probe due now; BreakerClose closes without a probe; both leave
// a closed breaker alone.
func testBreakerProbeNowClose(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "ep", "x"), t0)
	f.publish("a", "x", t0)
	f.openBreaker("a/ep", ledger.BreakerGone, t0, nil)
	now := t0.Add(time.Hour)
	b, err := f.s.BreakerProbeNow(f.ctx, "a/ep", now)
	if err != nil || b.NextProbeAt == nil || !b.NextProbeAt.Equal(now) {
		t.Fatalf("BreakerProbeNow = %+v, %v", b, err)
	}
	if got := f.probe("a/ep", "w1", now); len(got) != 1 {
		t.Fatalf("probe after an admin's request = %v, want one", claimedIDs(got))
	}
	b, err = f.s.BreakerClose(f.ctx, "a/ep", ledger.BreakerURLChanged, now.Add(time.Second))
	if err != nil || b.Open || b.CloseReason != ledger.BreakerURLChanged || b.ProbeDelivery != "" {
		t.Fatalf("BreakerClose = %+v, %v", b, err)
	}
	again, err := f.s.BreakerProbeNow(f.ctx, "a/ep", now.Add(2*time.Second))
	if err != nil || again.Open || again.NextProbeAt != nil {
		t.Fatalf("BreakerProbeNow on a closed breaker = %+v, %v; want it unchanged", again, err)
	}
	// Never opened: unchanged, no error, nothing stored.
	f.upsert(endpoint("a", "fresh", "x"), t0)
	if b, err := f.s.BreakerProbeNow(f.ctx, "a/fresh", now); err != nil || b.Open {
		t.Fatalf("BreakerProbeNow on a never-opened breaker = %+v, %v", b, err)
	}
	if _, err := f.s.BreakerGet(f.ctx, "a/fresh"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("BreakerGet of a never-opened breaker: %v, want ErrNotFound", err)
	}
}

// testBreakerExpire: the expiry leases the held scheduled deliveries that
// started (first attempt, else creation) before the cutoff, and only while
// the breaker is open.
func testBreakerExpire(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "ep", "x"), t0)
	old := f.publish("a", "x", t0).Deliveries[0]
	young := f.publish("a", "x", t0.Add(16*time.Minute)).Deliveries[0]
	// A delivery created early whose first attempt came late: its horizon
	// runs from the attempt.
	tried := f.publish("a", "x", t0.Add(time.Second)).Deliveries[0]
	c := f.claim("w1", t0.Add(20*time.Minute), time.Minute, 10)
	for _, cd := range c {
		next := ledger.Next{State: ledger.StateScheduled, DueAt: t0.Add(time.Hour)}
		if cd.Delivery.ID != tried.ID {
			// Put the others back untried.
			if err := f.s.DeliveryRelease(f.ctx, &ledger.DeliveryReleaseParams{DeliveryID: cd.Delivery.ID, Owner: "w1", DueAt: t0.Add(time.Hour), Now: t0.Add(20 * time.Minute)}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		f.mustRecord(attempt(cd.Delivery.ID, "w1", t0.Add(20*time.Minute), 503, next))
	}
	cutoff := t0.Add(15 * time.Minute)
	expire := func(now time.Time) []ledger.ClaimedDelivery {
		got, err := f.s.BreakerExpire(f.ctx, &ledger.BreakerExpireParams{EndpointID: "a/ep", Owner: "sweeper", StartedBefore: cutoff, Limit: 10, Now: now, LeaseFor: time.Minute})
		if err != nil {
			t.Fatalf("BreakerExpire: %v", err)
		}
		return got
	}
	if got := expire(t0.Add(30 * time.Minute)); len(got) != 0 {
		t.Fatalf("expire on a closed breaker = %v, want none", claimedIDs(got))
	}
	f.openBreaker("a/ep", ledger.BreakerFailing, t0.Add(25*time.Minute), atp(time.Hour))
	got := expire(t0.Add(30 * time.Minute))
	if len(got) != 1 || got[0].Delivery.ID != old.ID || got[0].Delivery.LeaseOwner != "sweeper" {
		t.Fatalf("expire = %v, want only %s (not %s, created after the cutoff, nor %s, first attempted after it)", claimedIDs(got), old.ID, young.ID, tried.ID)
	}
}

// testBreakerUnsent: an Unsent record exhausts a delivery without an
// attempt: Attempts, the attempts list, the last answer and the
// endpoint's last outcome stay.
func testBreakerUnsent(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "ep", "x"), t0)
	f.publish("a", "x", t0)
	c := f.claimOne("w1", t0)
	f.mustRecord(attempt(c.Delivery.ID, "w1", t0.Add(time.Second), 503, ledger.Next{State: ledger.StateScheduled, DueAt: t0.Add(time.Minute)}))
	before := f.stats("a/ep")
	c = f.claimOne("w1", t0.Add(time.Minute))
	d := f.mustRecord(&ledger.AttemptRecordParams{DeliveryID: c.Delivery.ID, Owner: "w1", Unsent: true,
		Next: ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustCircuitOpen}, Now: t0.Add(2 * time.Minute)})
	if d.State != ledger.StateExhausted || d.ExhaustReason != ledger.ExhaustCircuitOpen || d.Attempts != 1 || d.LastStatus != 503 || d.Resolution != ledger.ResolutionUnresolved {
		t.Fatalf("unsent exhaustion = %+v", d)
	}
	if stored := f.delivery(d.ID); stored.Attempts != 1 || stored.LastStatus != 503 || stored.ExhaustReason != ledger.ExhaustCircuitOpen {
		t.Fatalf("stored = %+v", stored)
	}
	f.wantAttempts(d.ID, 1)
	f.wantCounts("a/ep", counts{ExhaustedUnresolved: 1})
	after := f.stats("a/ep")
	if !timeEq(before.LastFailureAt, after.LastFailureAt) || before.LastFailureReason != after.LastFailureReason {
		t.Fatalf("last failure moved: %v %q -> %v %q", before.LastFailureAt, before.LastFailureReason, after.LastFailureAt, after.LastFailureReason)
	}
	if ex := f.exhausted(ledger.ExhaustedListParams{EndpointID: "a/ep", Limit: 10}); len(ex) != 1 {
		t.Fatalf("ExhaustedList = %d, want the unsent exhaustion, recoverable", len(ex))
	}
}

func timeEq(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// testBreakerDelete: deleting an endpoint forgets its breaker; created
// again, it starts closed and its deliveries are claimed.
func testBreakerDelete(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "ep", "x"), t0)
	f.openBreaker("a/ep", ledger.BreakerGone, t0, nil)
	if _, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: "a/ep", Now: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.BreakerGet(f.ctx, "a/ep"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("BreakerGet after delete: %v, want ErrNotFound", err)
	}
	if _, _, err := f.s.BreakerOpen(f.ctx, &ledger.BreakerOpenParams{EndpointID: "a/ep", Reason: ledger.BreakerFailing, Now: t0.Add(2 * time.Second)}); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("BreakerOpen of a deleted endpoint: %v, want ErrNotFound", err)
	}
	f.upsert(endpoint("a", "ep", "x"), t0.Add(3*time.Second))
	f.publish("a", "x", t0.Add(4*time.Second))
	f.claimOne("w1", t0.Add(5*time.Second))
}

// testBreakerUnknown: an unknown endpoint is ErrNotFound; invalid params
// are refused naming the field.
func testBreakerUnknown(t *testing.T, f *fixture) {
	if _, _, err := f.s.BreakerOpen(f.ctx, &ledger.BreakerOpenParams{EndpointID: "a/none", Reason: ledger.BreakerFailing, Now: t0}); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("BreakerOpen(unknown): %v, want ErrNotFound", err)
	}
	if _, _, err := f.s.BreakerOpen(f.ctx, &ledger.BreakerOpenParams{EndpointID: "a/none", Reason: "Tired", Now: t0}); err == nil || errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("BreakerOpen(reason Tired): %v, want a refusal of the reason", err)
	}
	if got, err := f.s.BreakerList(f.ctx, t0); err != nil || len(got) != 0 {
		t.Fatalf("BreakerList on an empty ledger = %v, %v", got, err)
	}
}

// testBreakerConcurrentProbes: many engines asking for the probe at once
// get one probe between them.
func testBreakerConcurrentProbes(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "ep", "x"), t0)
	for i := range 5 {
		f.publish("a", "x", t0.Add(time.Duration(i)*time.Millisecond))
	}
	f.openBreaker("a/ep", ledger.BreakerFailing, t0, atp(time.Minute))
	var mu sync.Mutex
	var won []string
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := f.s.BreakerProbe(f.ctx, &ledger.BreakerProbeParams{EndpointID: "a/ep", Owner: "w" + string(rune('0'+i)), Now: t0.Add(time.Minute), LeaseFor: time.Minute})
			if err != nil {
				t.Errorf("BreakerProbe: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, c := range got {
				won = append(won, c.Delivery.ID)
			}
		}()
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("8 concurrent probes leased %v, want exactly one", won)
	}
}
