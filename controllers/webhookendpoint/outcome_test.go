package webhookendpoint

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/controllers/signingsecret"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// What a reconcile writes and announces, as pure functions of the
// observation, the decision and how applying it went, on a fixed clock.

func outcomeEndpoint() *hookv1.WebhookEndpoint {
	return &hookv1.WebhookEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", Generation: 4},
		Spec:       hookv1.WebhookEndpointSpec{URL: "https://hooks.example.com/orders", Owner: "team-payments"},
	}
}

func TestEndpointFactsOf(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ep := outcomeEndpoint()
	registered := &ledger.Endpoint{Policy: ledger.Policy{ReplayWindow: time.Hour}}
	paused := &ledger.Endpoint{Paused: true, Policy: ledger.Policy{ReplayWindow: time.Hour}}
	desired := ledger.Endpoint{Policy: ledger.Policy{ReplayWindow: 3 * time.Hour}}
	stats := &deliveryFacts{Stats: ledger.EndpointStats{Pending: 7}}
	until := now.Add(time.Hour)
	forbidden := &conditions.Problem{Reason: hookv1.ReasonDestinationForbidden, Message: "url resolves to 10.0.0.1"}
	readFailed := &stepError{"reading the RetryPolicy", errors.New("connection refused")}

	for _, tc := range []struct {
		name       string
		obs        endpointObservation
		d          endpointDecision
		applyErr   error
		want       endpointFacts
		wantWindow time.Duration // of Deliveries; -1 when nil
	}{
		{"registered now: the desired policy's replay window",
			endpointObservation{Deliveries: stats},
			endpointDecision{Action: actionRegister, Desired: desired, Rotation: signingsecret.RotationPlan{PreviousUntil: until}}, nil,
			endpointFacts{Registered: true, PreviousSecretUntil: until}, 3 * time.Hour},
		{"a problem, registered: the engine's policy, not paused",
			endpointObservation{Registered: registered, Deliveries: stats},
			endpointDecision{Problem: forbidden}, nil,
			endpointFacts{Registered: true, Problem: forbidden}, time.Hour},
		{"a problem that pauses what the engine has",
			endpointObservation{Registered: registered, Deliveries: stats},
			endpointDecision{Problem: forbidden, Action: actionPause}, nil,
			endpointFacts{Registered: true, RegisteredPaused: true, Problem: forbidden}, time.Hour},
		{"a problem, already paused",
			endpointObservation{Registered: paused, Deliveries: stats},
			endpointDecision{Problem: forbidden}, nil,
			endpointFacts{Registered: true, RegisteredPaused: true, Problem: forbidden}, time.Hour},
		{"a problem, never registered: no deliveries to show",
			endpointObservation{Deliveries: stats},
			endpointDecision{Problem: forbidden}, nil,
			endpointFacts{Problem: forbidden}, 0},
		{"waiting for the signing Secret: Ready kept, generation not observed",
			endpointObservation{Registered: registered, Deliveries: stats},
			endpointDecision{Waiting: true}, nil,
			endpointFacts{Registered: true, Waiting: true, Incomplete: true}, time.Hour},
		{"a read failed: internal, the counters kept",
			endpointObservation{Registered: registered, Err: readFailed},
			errorDecision(&endpointObservation{Endpoint: ep, Err: readFailed}), nil,
			endpointFacts{Registered: true, Incomplete: true, Problem: &conditions.Problem{Reason: hookv1.ReasonInternalError, Message: "reading the RetryPolicy failed; the operator's log has the details"}}, -1},
		{"registering failed: internal, the counters kept",
			endpointObservation{Deliveries: stats},
			endpointDecision{Action: actionRegister, Desired: desired}, &stepError{"registering with the delivery engine", errors.New("disk full")},
			endpointFacts{Incomplete: true, Problem: &conditions.Problem{Reason: hookv1.ReasonInternalError, Message: "registering with the delivery engine failed; the operator's log has the details"}}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.obs.Endpoint, tc.obs.Now = ep, now
			f := endpointFactsOf(&tc.obs, &tc.d, tc.applyErr)
			got := *f
			got.Deliveries = nil
			if got.Registered != tc.want.Registered || got.RegisteredPaused != tc.want.RegisteredPaused || got.Waiting != tc.want.Waiting ||
				got.Incomplete != tc.want.Incomplete || !got.PreviousSecretUntil.Equal(tc.want.PreviousSecretUntil) ||
				(got.Problem == nil) != (tc.want.Problem == nil) || (got.Problem != nil && *got.Problem != *tc.want.Problem) {
				t.Fatalf("facts = %+v (problem %+v), want %+v (problem %+v)", got, got.Problem, tc.want, tc.want.Problem)
			}
			switch {
			case tc.wantWindow < 0 && f.Deliveries != nil:
				t.Fatalf("deliveries %+v, want none (kept)", f.Deliveries)
			case tc.wantWindow >= 0 && f.Deliveries == nil:
				t.Fatal("no deliveries")
			case tc.wantWindow >= 0 && f.Deliveries.ReplayWindow != tc.wantWindow:
				t.Fatalf("replay window %s, want %s", f.Deliveries.ReplayWindow, tc.wantWindow)
			}
		})
	}
}

// TestEndpointStatusBudgetAndEvidence: RetryBudgetLimited follows the
// ledger's streak under the budget in effect after the decision, and
// stays as it was when the deferrals could not be read; so does the
// evidence.
func TestEndpointStatusBudgetAndEvidence(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ep := outcomeEndpoint()
	ep.Status.Evidence = &hookv1.DeliveryEvidence{Last7d: &hookv1.EvidenceWindow{Settled: 9}}
	meta.SetStatusCondition(&ep.Status.Conditions, metav1.Condition{Type: hookv1.ConditionRetryBudgetLimited, Status: metav1.ConditionFalse, Reason: hookv1.ReasonWithinBudget})
	streak := &ledger.DeferralStreak{Count: 12, First: now.Add(-3 * time.Minute), Last: now.Add(-time.Minute)}
	budget := &ledger.RetryBudget{RatioPercent: 20, MinPerMinute: 3}
	d := endpointDecision{Desired: ledger.Endpoint{Policy: ledger.Policy{Budget: budget}}}

	obs := &endpointObservation{Endpoint: ep, Now: now, Deferrals: streak, EvidenceRead: true}
	st := endpointStatus(ep, obs, &d, endpointFactsOf(obs, &d, nil))
	c := meta.FindStatusCondition(st.Conditions, hookv1.ConditionRetryBudgetLimited)
	if c.Status != metav1.ConditionTrue || c.Reason != hookv1.ReasonRetriesDeferred || c.ObservedGeneration != 4 {
		t.Fatalf("RetryBudgetLimited = %+v", c)
	}
	if st.Evidence != nil {
		t.Fatalf("evidence %+v from no settled delivery, want none", st.Evidence)
	}

	obs = &endpointObservation{Endpoint: ep, Now: now, Secondary: errors.New("ledger down")}
	st = endpointStatus(ep, obs, &d, endpointFactsOf(obs, &d, nil))
	if c := meta.FindStatusCondition(st.Conditions, hookv1.ConditionRetryBudgetLimited); c.Status != metav1.ConditionFalse {
		t.Fatalf("unread deferrals changed RetryBudgetLimited: %+v", c)
	}
	if st.Evidence != ep.Status.Evidence {
		t.Fatalf("unread evidence changed status.evidence: %+v", st.Evidence)
	}
}

// TestEndpointEvents: which Events a reconcile emits, decided from the
// status before and after.
func TestEndpointEvents(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	deferring := metav1.Condition{Type: hookv1.ConditionRetryBudgetLimited, Status: metav1.ConditionTrue, Reason: hookv1.ReasonRetriesDeferred, Message: "3 retries deferred"}
	exhausted := &deliveryFacts{Stats: ledger.EndpointStats{ExhaustedUnresolved: 2}}
	for _, tc := range []struct {
		name          string
		before, after []metav1.Condition
		undecodable   []string
		deliveries    *deliveryFacts
		want          []string // reasons
		wantMemo      bool
	}{
		{"nothing to announce", nil, nil, nil, &deliveryFacts{}, nil, false},
		{"a streak of deferrals starts", nil, []metav1.Condition{deferring}, nil, &deliveryFacts{}, []string{hookv1.ReasonRetriesDeferred}, false},
		{"the streak goes on: no second Event", []metav1.Condition{deferring}, []metav1.Condition{deferring}, nil, &deliveryFacts{}, nil, false},
		{"deliveries exhausted", nil, nil, nil, exhausted, []string{hookv1.ReasonDeliveriesExhausted}, true},
		{"counters unread: no exhaustion Event", nil, nil, nil, nil, nil, false},
		{"an undecodable spec", nil, nil, []string{`spec.maxInFlight: json: cannot unmarshal number 1e99 into Go value of type int32`}, &deliveryFacts{},
			[]string{hookv1.ReasonInvalidSpec}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, after := outcomeEndpoint(), outcomeEndpoint()
			before.Status.Conditions, after.Status.Conditions = tc.before, tc.after
			after.Undecodable = tc.undecodable
			evs, memo := endpointEvents(before, after, &endpointFacts{Deliveries: tc.deliveries}, nil, now, time.Minute)
			var reasons []string
			for _, e := range evs {
				reasons = append(reasons, e.Reason)
				if e.Type != "Warning" {
					t.Errorf("event %+v is not a Warning", e)
				}
				if e.Reason != hookv1.ReasonInvalidSpec && !strings.Contains(e.Note, "Owner: team-payments") {
					t.Errorf("note %q does not name the owner", e.Note)
				}
			}
			if len(reasons) != len(tc.want) || (len(reasons) > 0 && reasons[0] != tc.want[0]) {
				t.Fatalf("events %v, want %v", reasons, tc.want)
			}
			if (memo != nil) != tc.wantMemo {
				t.Fatalf("memo %+v, want one: %v", memo, tc.wantMemo)
			}
		})
	}
}
