package retrypolicy

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

var evidenceNow = time.Date(2026, 12, 1, 13, 20, 0, 0, time.UTC)

func evidenceBucket(hoursAgo int, outcome string, attempt int, count int64, ttd int) ledger.OutcomeBucket {
	hour := evidenceNow.Truncate(time.Hour).Add(-time.Duration(hoursAgo) * time.Hour)
	b := ledger.OutcomeBucket{
		OutcomeKey:   ledger.OutcomeKey{EndpointID: "ns/a", Hour: hour, Outcome: outcome, Attempt: attempt},
		PolicyName:   "p",
		OutcomeCount: ledger.OutcomeCount{Count: count, FirstAt: hour, LastAt: hour},
	}
	if outcome == ledger.OutcomeDelivered {
		b.TimeToDelivery[ttd] = count
	}
	return b
}

func TestDeliveryEvidence(t *testing.T) {
	if got := DeliveryEvidence(nil, evidenceNow); got != nil {
		t.Errorf("no buckets: evidence %+v, want none", got)
	}
	got := DeliveryEvidence([]ledger.OutcomeBucket{
		evidenceBucket(0, ledger.OutcomeDelivered, 1, 95, 0),
		evidenceBucket(1, ledger.OutcomeDelivered, 3, 2, 5),
		evidenceBucket(1, "MaxAttempts", 4, 2, 0),
		evidenceBucket(2, "Gone", 1, 1, 0),
		evidenceBucket(30, ledger.OutcomeDelivered, 2, 10, 8),
	}, evidenceNow)
	want := &hookv1.DeliveryEvidence{
		Last24h: &hookv1.EvidenceWindow{
			Settled: 100, FirstTry: "95%", Recovered: 2, Exhausted: 3, LastRecoveringAttempt: 3,
			RecoveredByAttempt: []hookv1.AttemptCount{{Attempt: 3, Count: 2}},
			ExhaustedByReason:  []hookv1.ReasonCount{{Reason: "Gone", Count: 1}, {Reason: "MaxAttempts", Count: 2}},
			P50TimeToDelivery:  "1s", P95TimeToDelivery: "1s",
		},
		Last7d: &hookv1.EvidenceWindow{
			Settled: 110, FirstTry: "86%", Recovered: 12, Exhausted: 3, LastRecoveringAttempt: 3,
			RecoveredByAttempt: []hookv1.AttemptCount{{Attempt: 2, Count: 10}, {Attempt: 3, Count: 2}},
			ExhaustedByReason:  []hookv1.ReasonCount{{Reason: "Gone", Count: 1}, {Reason: "MaxAttempts", Count: 2}},
			P50TimeToDelivery:  "1s", P95TimeToDelivery: "2h",
		},
	}
	wantEqualT(t, "evidence", got, want)
}

func TestHorizonFitCondition(t *testing.T) {
	policy := &hookv1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 0}}
	buckets := []ledger.OutcomeBucket{evidenceBucket(0, ledger.OutcomeDelivered, 1, 200, 0), evidenceBucket(0, "MaxAttempts", 5, 60, 0)}
	c := horizonFitCondition(policy, buckets, 5, time.Hour, evidenceNow)
	if c.Type != hookv1.ConditionHorizonFit || c.Status != metav1.ConditionFalse || c.Reason != "TailRecoversNothing" ||
		!strings.Contains(c.Message, "maxAttempts: 1") {
		t.Errorf("condition %+v", c)
	}
	// The condition's own reason is the advice's memory (hysteresis).
	policy.Status.Conditions = []metav1.Condition{c}
	c = horizonFitCondition(policy, []ledger.OutcomeBucket{evidenceBucket(0, ledger.OutcomeDelivered, 1, 200, 0), evidenceBucket(0, "MaxAttempts", 5, 30, 0)}, 5, time.Hour, evidenceNow)
	if c.Reason != "TailRecoversNothing" {
		t.Errorf("with the previous reason, 30 in the tail keeps the advice; got %s", c.Reason)
	}
}

func wantEqualT[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}
