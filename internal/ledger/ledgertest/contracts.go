package ledgertest

import (
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// An event's type contract (docs/adr/0038): stored with the event and
// read back wherever the event is; deliveries of an expired event claimed
// for cancellation (DeliveryClaimExpired) and cancelled Expired; recovery
// and replay refusing what the replay class forbids.
func exerciseContracts(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"StoredAndReadEverywhere":         testContractStored,
		"InvalidClassRefusesTheBatch":     testContractInvalid,
		"ClaimExpiredAndCancel":           testClaimExpired,
		"ExpiryEndsTheEventsSecrets":      testExpirySettlesSecrets,
		"RecoveryHonoursTheReplayClass":   testContractRecovery,
		"RecoveredDeliveriesStillExpire":  testContractRecoveredExpire,
		"ReplayHonoursTheReplayClass":     testContractReplay,
		"OverrideReplayWindowForRecovery": testContractOverrideWindow,
	})
}

// fastPolicy is a type's policy as the publish core stamps it.
func fastPolicy() *ledger.Policy {
	return &ledger.Policy{
		Name: "fast", Generation: 2,
		Backoff: backoff.Policy{Strategy: backoff.Schedule, Schedule: []time.Duration{time.Second, 5 * time.Second},
			MaxAttempts: 3, AttemptTimeout: 2 * time.Second},
		RetryOn:      []string{"5xx"},
		ReplayWindow: 3 * time.Hour,
	}
}

// contracted returns insert params of an event carrying a full contract.
func contracted(ns, typ string, now time.Time, class ledger.ReplayClass, validUntil *time.Time) *ledger.EventInsertParams {
	p := event(ns, typ, now)
	p.TypeGeneration, p.ReplayClass, p.ValidUntil, p.PolicyOverride = 7, class, validUntil, fastPolicy()
	return p
}

// wantContract checks the contract fields of e.
func wantContract(t *testing.T, what string, e ledger.Event, gen int64, class ledger.ReplayClass, validUntil *time.Time, pol *ledger.Policy) {
	t.Helper()
	type contract struct {
		Gen        int64
		Class      ledger.ReplayClass
		ValidUntil *time.Time
		Policy     *ledger.Policy
	}
	wantEqual(t, what, contract{e.TypeGeneration, e.ReplayClass, e.ValidUntil, e.PolicyOverride},
		contract{gen, class, validUntil, pol})
}

func testContractStored(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "orders", "order.*"), t0)
	until := ptr(at(time.Hour))
	p := contracted("shop", "order.paid", t0, ledger.ReplayReissueOnly, until)
	p.IdempotencyKey = "k-1"
	res := f.insert(p)[0]
	if res.Err != nil {
		t.Fatalf("insert: %v", res.Err)
	}
	wantContract(t, "the inserted event", res.Event, 7, ledger.ReplayReissueOnly, until, fastPolicy())
	got, err := f.s.EventGet(f.ctx, res.Event.ID)
	if err != nil {
		t.Fatalf("EventGet: %v", err)
	}
	wantEqual(t, "EventGet", canonEvent(t, got), canonEvent(t, res.Event))

	again := contracted("shop", "order.paid", at(time.Second), ledger.ReplayReissueOnly, until)
	again.ID, again.Data, again.BodyHash, again.IdempotencyKey = ledger.NewID("evt", at(time.Second)), p.Data, p.BodyHash, "k-1"
	dup := f.insert(again)[0]
	if !dup.Duplicate {
		t.Fatalf("the same key and body was not a duplicate: %+v", dup)
	}
	wantContract(t, "the duplicate's original", dup.Event, 7, ledger.ReplayReissueOnly, until, fastPolicy())

	c := f.claimOne("w", t0)
	wantContract(t, "the claimed event", c.Event, 7, ledger.ReplayReissueOnly, until, fastPolicy())
	views, err := f.s.EventBrowse(f.ctx, &ledger.EventBrowseParams{ID: res.Event.ID})
	if err != nil || len(views) != 1 {
		t.Fatalf("EventBrowse = %v, %v", views, err)
	}
	wantContract(t, "the browsed event", views[0], 7, ledger.ReplayReissueOnly, until, fastPolicy())

	// An event of a type without a contract carries none.
	plain := f.publish("shop", "order.created", t0)
	got, err = f.s.EventGet(f.ctx, plain.Event.ID)
	if err != nil {
		t.Fatalf("EventGet: %v", err)
	}
	wantContract(t, "a plain event", got, 0, "", nil, nil)
}

func testContractInvalid(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "orders", "order.*"), t0)
	bad := contracted("shop", "order.paid", t0, "Sometimes", nil)
	if _, err := f.s.EventInsertMany(f.ctx, []*ledger.EventInsertParams{event("shop", "order.created", t0), bad}); err == nil {
		t.Fatal("EventInsertMany accepted a replay class that is none of Retryable, ReissueOnly, Never")
	}
	f.wantCounts("shop/orders", counts{})
}

// claimExpired claims the expired deliveries at now.
func (f *fixture) claimExpired(owner string, now time.Time) []ledger.ClaimedDelivery {
	f.t.Helper()
	got, err := f.s.DeliveryClaimExpired(f.ctx, &ledger.DeliveryClaimExpiredParams{Owner: owner, Now: now, LeaseFor: time.Minute, Limit: 100})
	if err != nil {
		f.t.Fatalf("DeliveryClaimExpired: %v", err)
	}
	return got
}

// cancelExpired records each claimed delivery cancelled Expired at now.
func (f *fixture) cancelExpired(owner string, now time.Time, cs []ledger.ClaimedDelivery) []ledger.Delivery {
	f.t.Helper()
	out := make([]ledger.Delivery, len(cs))
	for i, c := range cs {
		out[i] = f.mustRecord(&ledger.AttemptRecordParams{DeliveryID: c.Delivery.ID, Owner: owner, Unsent: true,
			Next: ledger.Next{State: ledger.StateCancelled, Reason: ledger.CancelExpired}, Now: now})
	}
	return out
}

func testClaimExpired(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "active", "order.*"), t0)
	paused := endpoint("shop", "paused", "order.*")
	paused.Paused = true
	f.upsert(paused, t0)

	soon := f.insert(contracted("shop", "order.paid", t0, "", ptr(at(time.Minute))))[0]
	later := f.insert(contracted("shop", "order.paid", t0, "", ptr(at(10*time.Minute))))[0]
	f.publish("shop", "order.created", t0) // no bound: never expires

	if got := f.claimExpired("w", at(59*time.Second)); len(got) != 0 {
		t.Fatalf("claimed %v before any event expired", claimedIDs(got))
	}
	// At the bound the event is expired: both deliveries, the paused
	// endpoint's included, the scheduled counted in flight.
	got := f.claimExpired("w", at(time.Minute))
	wantEqual(t, "expired deliveries claimed", endpointsOf(claimedDeliveries(got)), []string{"shop/active", "shop/paused"})
	for _, c := range got {
		if c.Event.ID != soon.Event.ID || c.Delivery.State != ledger.StateInFlight || c.Delivery.LeaseOwner != "w" {
			t.Fatalf("claimed %+v", c)
		}
	}
	if again := f.claimExpired("x", at(time.Minute)); len(again) != 0 {
		t.Fatalf("leased expired deliveries were claimed again: %v", claimedIDs(again))
	}
	f.wantCounts("shop/paused", counts{Pending: 2, InFlight: 1})
	f.cancelExpired("w", at(time.Minute), got)

	// A delivery sent and still leased is the sender's: its lease first.
	active := later.Deliveries[0]
	if active.EndpointID != "shop/active" {
		active = later.Deliveries[1]
	}
	leased := f.claim("sender", at(90*time.Second), 20*time.Minute, 10)
	if len(leased) != 2 { // later's and the unbounded event's to the active endpoint
		t.Fatalf("claimed %v, want 2", claimedIDs(leased))
	}
	now := at(10 * time.Minute)
	expired := f.claimExpired("w", now)
	wantEqual(t, "expired at 10m (the leased one waits for its lease)", idsOf(claimedDeliveries(expired)),
		[]string{deliveryTo(t, later, "shop/paused")})
	f.cancelExpired("w", now, expired)
	expired = f.claimExpired("w", at(22*time.Minute))
	wantEqual(t, "expired once the sender's lease ended", idsOf(claimedDeliveries(expired)), []string{active.ID})

	// The cancellation: never an attempt, no owner needed, history kept.
	cancelled := f.cancelExpired("w", at(22*time.Minute), expired)[0]
	want := f.delivery(active.ID)
	if want.State != ledger.StateCancelled || want.ExhaustReason != ledger.CancelExpired || want.Resolution != ledger.ResolutionNone ||
		want.Attempts != 0 || want.TerminalAt == nil || !want.TerminalAt.Equal(at(22*time.Minute)) || want.LeaseOwner != "" {
		t.Fatalf("cancelled delivery %+v", want)
	}
	wantEqual(t, "the recorded cancellation", cancelled, want)
	if as, err := f.s.AttemptList(f.ctx, active.ID); err != nil || len(as) != 0 {
		t.Fatalf("AttemptList of a cancelled delivery = %v, %v; want none", as, err)
	}
	f.wantCounts("shop/active", counts{InFlight: 1, Cancelled: 2})
	f.wantCounts("shop/paused", counts{Pending: 1, Cancelled: 2})

	// A cancellation is recorded only unsent, and only as Expired.
	c := f.claimOne("sender", at(40*time.Minute))
	for _, p := range []*ledger.AttemptRecordParams{
		{DeliveryID: c.Delivery.ID, Owner: "sender", Next: ledger.Next{State: ledger.StateCancelled, Reason: ledger.CancelExpired}, Now: at(40 * time.Minute)},
		{DeliveryID: c.Delivery.ID, Owner: "sender", Unsent: true, Next: ledger.Next{State: ledger.StateCancelled}, Now: at(40 * time.Minute)},
	} {
		if res := f.record(p); res.Err == nil {
			t.Fatalf("AttemptRecordMany accepted %+v", p)
		}
	}

	// Evidence: one Expired row per endpoint and hour, apart from the rest.
	var expiredRows int64
	for _, r := range f.outcomes(ledger.OutcomeListParams{Namespace: "shop"}) {
		if r.Outcome == ledger.OutcomeExpired {
			expiredRows += r.Count
		}
	}
	if expiredRows != 4 {
		t.Fatalf("outcome evidence counts %d Expired, want 4", expiredRows)
	}
}

// deliveriesOf returns the claimed deliveries.
func claimedDeliveries(cs []ledger.ClaimedDelivery) []ledger.Delivery {
	out := make([]ledger.Delivery, len(cs))
	for i, c := range cs {
		out[i] = c.Delivery
	}
	return out
}

// The cancellation that ends an event's last pending delivery settles its
// one-time secrets, as any other end does.
func testExpirySettlesSecrets(t *testing.T, f *fixture) {
	paused := endpoint("shop", "paused", "order.*")
	paused.Paused = true
	f.upsert(paused, t0)
	p := secretEvent("shop", "order.paid", t0, "tok")
	p.ValidUntil = ptr(at(time.Minute))
	ev := f.insert(p)[0].Event
	f.cancelExpired("w", at(time.Minute), f.claimExpired("w", at(time.Minute)))
	got, err := f.s.EventGet(f.ctx, ev.ID)
	if err != nil {
		t.Fatalf("EventGet: %v", err)
	}
	if len(got.Secrets) != 0 || got.SecretsScrubAt == nil {
		t.Fatalf("the expired event kept its secrets: scrubbed at %v", got.SecretsScrubAt)
	}
}

func testContractRecovery(t *testing.T, f *fixture) {
	const ep = "shop/orders"
	orders := endpoint("shop", "orders", "order.*")
	orders.Policy.SecretGracePeriod = 24 * time.Hour // the secrets outlive the exhaustion
	f.upsert(orders, t0)
	f.upsert(endpoint("shop", "producer", ledger.ReissueRequestedEventType), t0)
	// A ReissueOnly event whose secret is still there, a Never event, a
	// Retryable one that expires, and a Retryable one that does not.
	onlyP := secretEvent("shop", "order.paid", t0, "tok")
	onlyP.ReplayClass = ledger.ReplayReissueOnly
	only := f.insert(onlyP)[0]
	never := f.insert(contracted("shop", "order.paid", t0, ledger.ReplayNever, nil))[0]
	stale := f.insert(contracted("shop", "order.paid", t0, ledger.ReplayRetryable, ptr(at(time.Hour))))[0]
	fresh := f.insert(contracted("shop", "order.paid", t0, ledger.ReplayRetryable, ptr(at(48*time.Hour))))[0]
	f.exhaustAll(at(time.Second))

	listed := map[string]ledger.ExhaustedDelivery{}
	for _, ed := range f.exhausted(ledger.ExhaustedListParams{EndpointID: ep}) {
		listed[ed.Delivery.EventID] = ed
	}
	if ed := listed[never.Event.ID]; ed.ReplayClass != ledger.ReplayNever || ed.OverrideReplayWindow != 3*time.Hour {
		t.Fatalf("ExhaustedList of the Never event: %+v", ed)
	}
	if ed := listed[stale.Event.ID]; ed.ValidUntil == nil || !ed.ValidUntil.Equal(at(time.Hour)) {
		t.Fatalf("ExhaustedList of the expiring event: %+v", ed)
	}
	if ed := listed[only.Event.ID]; ed.ReplayClass != ledger.ReplayReissueOnly || ed.SecretsScrubbed || ed.OverrideReplayWindow != 0 {
		t.Fatalf("ExhaustedList of the ReissueOnly event: %+v", ed)
	}

	now := at(2 * time.Hour)
	for _, tc := range []struct {
		name   string
		event  ledger.EventInsertResult
		action ledger.RecoveryAction
		want   ledger.RecoveryOutcome
		reason string
	}{
		{"retry of a ReissueOnly event with its secret", only, ledger.RecoveryRetry, ledger.OutcomeRefused, ledger.RefusedReissueRequired},
		{"retry of a Never event", never, ledger.RecoveryRetry, ledger.OutcomeRefused, ledger.RefusedNotReplayable},
		{"reissue of a Never event", never, ledger.RecoveryReissue, ledger.OutcomeRefused, ledger.RefusedNotReplayable},
		{"retry of an expired event", stale, ledger.RecoveryRetry, ledger.OutcomeRefused, ledger.RefusedExpired},
		{"reissue of a ReissueOnly event (its producer mints it)", only, ledger.RecoveryReissue, ledger.OutcomeAwaitingReissue, ""},
		{"reissue of an expired event asks its producer", stale, ledger.RecoveryReissue, ledger.OutcomeAwaitingReissue, ""},
		{"dismissal of a Never event", never, ledger.RecoveryDismiss, ledger.OutcomeDismissed, ""},
		{"reissue of a fresh event copies it", fresh, ledger.RecoveryReissue, ledger.OutcomeReissued, ""},
	} {
		p := recoveryParams("op-"+tc.name, deliveryTo(t, tc.event, ep), tc.action, now)
		got := f.applyP(p)
		if got.Outcome != tc.want || got.Reason != tc.reason {
			t.Fatalf("%s: %s %q, want %s %q", tc.name, got.Outcome, got.Reason, tc.want, tc.reason)
		}
		if tc.want == ledger.OutcomeReissued {
			cp, err := f.s.EventGet(f.ctx, p.NewEventID)
			if err != nil {
				t.Fatalf("EventGet of the copy: %v", err)
			}
			wantContract(t, "the copy", cp, 7, ledger.ReplayRetryable, ptr(at(48*time.Hour)), fastPolicy())
		}
	}
}

// A recovery's retry and a reissue's copy of an event with a bound are
// bound by it as well: the sweep claims them once it passes.
func testContractRecoveredExpire(t *testing.T, f *fixture) {
	const ep = "shop/orders"
	f.upsert(endpoint("shop", "orders", "order.*"), t0)
	a := f.insert(contracted("shop", "order.paid", t0, "", ptr(at(time.Hour))))[0]
	b := f.insert(contracted("shop", "order.paid", t0, "", ptr(at(time.Hour))))[0]
	f.exhaustAll(at(time.Second))
	retry := f.apply("op-r", deliveryTo(t, a, ep), ledger.RecoveryRetry, at(time.Minute))
	reissue := f.apply("op-c", deliveryTo(t, b, ep), ledger.RecoveryReissue, at(time.Minute))
	if retry.Outcome != ledger.OutcomeRetried || reissue.Outcome != ledger.OutcomeReissued {
		t.Fatalf("retry %+v, reissue %+v", retry, reissue)
	}
	if got := f.claimExpired("w", at(59*time.Minute)); len(got) != 0 {
		t.Fatalf("claimed %v before the bound", claimedIDs(got))
	}
	got := f.claimExpired("w", at(time.Hour))
	wantEqual(t, "expired re-sends", byID(claimedDeliveries(got)), byID([]ledger.Delivery{f.delivery(retry.NewDeliveryID), f.delivery(reissue.NewDeliveryID)}))
}

func testContractReplay(t *testing.T, f *fixture) {
	const ep = "shop/late"
	f.upsert(endpoint("shop", "orders", "order.*"), t0)
	never := f.insert(contracted("shop", "order.paid", t0, ledger.ReplayNever, nil))[0]
	only := f.insert(contracted("shop", "order.paid", t0, ledger.ReplayReissueOnly, nil))[0]
	f.attemptAll(at(time.Second), ledger.Next{State: ledger.StateDelivered})
	f.upsert(endpoint("shop", "late", "order.*"), at(time.Minute))

	now := at(2 * time.Minute)
	for _, tc := range []struct {
		name     string
		event    string
		fallback ledger.ReplayFallback
		want     ledger.RecoveryOutcome
		reason   string
	}{
		{"Never, refused", never.Event.ID, ledger.ReplayRefuse, ledger.OutcomeRefused, ledger.RefusedNotReplayable},
		{"Never, not reissued either", never.Event.ID, ledger.ReplayReissue, ledger.OutcomeRefused, ledger.RefusedNotReplayable},
		{"ReissueOnly, refused", only.Event.ID, ledger.ReplayRefuse, ledger.OutcomeRefused, ledger.RefusedReissueRequired},
		{"ReissueOnly, reissued", only.Event.ID, ledger.ReplayReissue, ledger.OutcomeReissued, ""},
	} {
		got := f.replay("op-"+tc.name, tc.event, ep, tc.fallback, now)
		if got.Outcome != tc.want || got.Reason != tc.reason {
			t.Fatalf("%s: %s %q, want %s %q", tc.name, got.Outcome, got.Reason, tc.want, tc.reason)
		}
	}
	f.wantCounts(ep, counts{Pending: 1}) // the reissued copy only
}

// The replay window of a type's policy replaces the endpoint's for a
// recovery's retry.
func testContractOverrideWindow(t *testing.T, f *fixture) {
	const ep = "shop/orders"
	orders := endpoint("shop", "orders", "order.*")
	orders.Policy.ReplayWindow = time.Hour
	f.upsert(orders, t0)
	long := f.insert(contracted("shop", "order.paid", t0, "", nil))[0] // window 3h
	plain := f.publish("shop", "order.paid", t0)
	f.exhaustAll(t0)
	now := at(2 * time.Hour)
	if got := f.apply("op-l", deliveryTo(t, long, ep), ledger.RecoveryRetry, now); got.Outcome != ledger.OutcomeRetried {
		t.Fatalf("retry within the type's window: %+v", got)
	}
	if got := f.apply("op-p", deliveryTo(t, plain, ep), ledger.RecoveryRetry, now); got.Reason != ledger.RefusedReplayWindowExceeded {
		t.Fatalf("retry past the endpoint's window: %+v", got)
	}
	if got := f.apply("op-l2", deliveryTo(t, long, ep), ledger.RecoveryRetry, at(3*time.Hour+time.Second)); got.Reason != ledger.RefusedAlreadyResolved {
		t.Fatalf("a second retry: %+v", got)
	}
}
