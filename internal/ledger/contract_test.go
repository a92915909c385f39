package ledger

import (
	"testing"
	"time"
)

func TestPolicyFor(t *testing.T) {
	endpoint := &Policy{Name: "ep", ReplayWindow: time.Hour, RetryOn: []string{"5xx"},
		Budget: &RetryBudget{RatioPercent: 10}, Breaker: &BreakerPolicy{Failures: 3},
		SecretGracePeriod: time.Minute, PayloadRetention: 2 * time.Hour, EvidenceRetention: 3 * time.Hour}
	var plain Event
	if got := plain.PolicyFor(endpoint); got != endpoint {
		t.Errorf("without an override: %+v, want the endpoint's", got)
	}
	typed := Event{PolicyOverride: &Policy{Name: "type", ReplayWindow: 4 * time.Hour, RetryOn: []string{"429"},
		PayloadRetention: time.Second, Breaker: &BreakerPolicy{Disabled: true}}}
	got := typed.PolicyFor(endpoint)
	if got.Name != "type" || got.ReplayWindow != 4*time.Hour || got.RetryOn[0] != "429" {
		t.Errorf("the schedule and window are not the type's: %+v", got)
	}
	if got.Budget != endpoint.Budget || got.Breaker != endpoint.Breaker ||
		got.SecretGracePeriod != time.Minute || got.PayloadRetention != 2*time.Hour || got.EvidenceRetention != 3*time.Hour {
		t.Errorf("the breaker, budget and retention are not the endpoint's: %+v", got)
	}
	if typed.PolicyOverride.PayloadRetention != time.Second || typed.PolicyOverride.Breaker.Disabled != true {
		t.Error("PolicyFor changed the event's override")
	}
}

func TestContractRefusal(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	before, after := now.Add(-time.Nanosecond), now.Add(time.Nanosecond)
	for _, tc := range []struct {
		class      ReplayClass
		validUntil *time.Time
		want       string
		reissuable bool
	}{
		{"", nil, "", true},
		{ReplayRetryable, &after, "", true},
		{ReplayRetryable, &now, RefusedExpired, true},
		{"", &before, RefusedExpired, true},
		{ReplayReissueOnly, nil, RefusedReissueRequired, true},
		{ReplayReissueOnly, &before, RefusedReissueRequired, true},
		{ReplayNever, &before, RefusedNotReplayable, false},
	} {
		e := Event{ReplayClass: tc.class, ValidUntil: tc.validUntil}
		if got := ContractRefusal(&e, now); got != tc.want || e.Reissuable() != tc.reissuable {
			t.Errorf("class %q, valid until %v: %q, reissuable %t; want %q, %t", tc.class, tc.validUntil, got, e.Reissuable(), tc.want, tc.reissuable)
		}
	}
	for c, ok := range map[ReplayClass]bool{"": true, ReplayRetryable: true, ReplayReissueOnly: true, ReplayNever: true, "never": false, "Sometimes": false} {
		if err := c.Validate(); (err == nil) != ok {
			t.Errorf("ReplayClass(%q).Validate() = %v", c, err)
		}
	}
}

func TestAutoAction(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	first := now.Add(-2 * time.Hour)
	for _, tc := range []struct {
		name string
		ed   ExhaustedDelivery
		want RecoveryAction
	}{
		{"within the endpoint's window", ExhaustedDelivery{ReplayFrom: now.Add(-30 * time.Minute)}, RecoveryRetry},
		{"past the endpoint's window", ExhaustedDelivery{ReplayFrom: first}, RecoveryReissue},
		{"within the type's window", ExhaustedDelivery{ReplayFrom: first, OverrideReplayWindow: 3 * time.Hour}, RecoveryRetry},
		{"ReissueOnly", ExhaustedDelivery{ReplayFrom: now, ReplayClass: ReplayReissueOnly}, RecoveryReissue},
		{"Never (the reissue is refused)", ExhaustedDelivery{ReplayFrom: now, ReplayClass: ReplayNever}, RecoveryReissue},
		{"expired", ExhaustedDelivery{ReplayFrom: now, ValidUntil: &now}, RecoveryReissue},
		{"scrubbed", ExhaustedDelivery{ReplayFrom: now, SecretsScrubbed: true}, RecoveryReissue},
	} {
		if got := tc.ed.AutoAction(time.Hour, now); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// An expiry is recorded unsent, ends the delivery without an owner, and
// counts in the evidence apart; a cancellation by deletion does not.
func TestExpiryTransition(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	first := now.Add(-time.Minute)
	cancel := Next{State: StateCancelled, Reason: CancelExpired}
	if _, err := (&AttemptRecordParams{Next: cancel, Now: now}).Transition(); err == nil {
		t.Error("an expiry recorded with an attempt was accepted")
	}
	if err := (Next{State: StateCancelled}).Validate(); err == nil {
		t.Error("a cancellation without reason Expired was accepted")
	}
	tr, err := (&AttemptRecordParams{Next: cancel, Now: now, Unsent: true}).Transition()
	if err != nil {
		t.Fatal(err)
	}
	d := Delivery{ID: "dlv_1", EndpointID: "ns/a", State: StateInFlight, Attempts: 2, FirstAttemptAt: &first,
		LastStatus: 503, LeaseOwner: "w", LeaseUntil: &now, DueAt: first}
	tr.Apply(&d)
	if d.State != StateCancelled || d.ExhaustReason != CancelExpired || d.Resolution != ResolutionNone || d.Attempts != 2 ||
		d.LastStatus != 503 || d.TerminalAt == nil || !d.TerminalAt.Equal(now) || d.LeaseOwner != "" || d.LeaseUntil != nil {
		t.Errorf("after the expiry: %+v", d)
	}
	s := StatsDelta{}
	tr.Stats(s, d.EndpointID, now)
	var st EndpointStats
	s["ns/a"].Apply(&st)
	if st.InFlight != -1 || st.Cancelled != 1 || st.LastFailureAt != nil || st.LastSuccessAt != nil {
		t.Errorf("stats of an expiry: %+v", st)
	}
	key, count, ok := SettledOutcome(d, now)
	if !ok || key.Outcome != OutcomeExpired || key.Attempt != 2 || count.Count != 1 {
		t.Errorf("SettledOutcome of an expiry = %+v, %+v, %t", key, count, ok)
	}
	d.ExhaustReason = ""
	if _, _, ok := SettledOutcome(d, now); ok {
		t.Error("a cancellation by deletion counts as an outcome")
	}
}
