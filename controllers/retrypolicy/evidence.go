package retrypolicy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/ledgerread"
	"github.com/hookkeeper/hookkeeper/internal/evidence"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Outcome evidence on RetryPolicy and WebhookEndpoint status: gather the
// buckets of the last 7 days from the ledger, summarize them with package
// evidence, and set status.evidence (and, on a policy, HorizonFit). Status
// is written only when a count or the advice changed (conditions.UpdateStatus), so the
// resync that refreshes it writes nothing on a quiet day.

// DefaultEvidenceResync is how often a RetryPolicy's evidence is refreshed
// when the controller has an evidence source.
const DefaultEvidenceResync = time.Minute

// ReadEvidence lists the buckets of the 7-day window ending at now.
func ReadEvidence(ctx context.Context, src ledgerread.Reader, p ledger.OutcomeListParams, now time.Time) ([]ledger.OutcomeBucket, error) {
	p.Since = evidence.WindowStart(now, evidence.Week)
	b, err := src.OutcomeList(ctx, &p)
	if err != nil {
		return nil, fmt.Errorf("reading outcome evidence: %w", err)
	}
	return b, nil
}

// DeliveryEvidence is the status.evidence of buckets at now; nil when
// nothing settled in 7 days, so that an idle object shows no evidence.
func DeliveryEvidence(buckets []ledger.OutcomeBucket, now time.Time) *hookv1.DeliveryEvidence {
	week := evidence.Summarize(buckets, evidence.Window(now, evidence.Week))
	if week.Settled == 0 {
		return nil
	}
	return &hookv1.DeliveryEvidence{
		Last24h: evidenceWindow(evidence.Summarize(buckets, evidence.Window(now, evidence.Day))),
		Last7d:  evidenceWindow(week),
	}
}

func evidenceWindow(s evidence.Summary) *hookv1.EvidenceWindow {
	w := &hookv1.EvidenceWindow{
		Settled:               s.Settled,
		Recovered:             s.Recovered(),
		Exhausted:             s.ExhaustedTotal(),
		LastRecoveringAttempt: int32(s.LastRecoveringAttempt()),
	}
	if pct, ok := s.FirstTryPercent(); ok {
		w.FirstTry = fmt.Sprintf("%d%%", pct)
	}
	for _, a := range s.RecoveringAttempts() {
		if len(w.RecoveredByAttempt) == maxEvidenceAttempts {
			break
		}
		w.RecoveredByAttempt = append(w.RecoveredByAttempt, hookv1.AttemptCount{Attempt: int32(a), Count: s.DeliveredOnAttempt[a]})
	}
	for _, r := range slices.Sorted(maps.Keys(s.Exhausted)) {
		if len(w.ExhaustedByReason) == maxEvidenceReasons {
			break
		}
		w.ExhaustedByReason = append(w.ExhaustedByReason, hookv1.ReasonCount{Reason: r, Count: s.Exhausted[r]})
	}
	if b, ok := s.Quantile(50); ok {
		w.P50TimeToDelivery = evidence.BucketLabel(b)
	}
	if b, ok := s.Quantile(95); ok {
		w.P95TimeToDelivery = evidence.BucketLabel(b)
	}
	return w
}

// Bounds of the lists in EvidenceWindow (the CRD's MaxItems).
const (
	maxEvidenceAttempts = 64
	maxEvidenceReasons  = 16
)

// horizonFitCondition is the HorizonFit condition of a policy whose
// buckets (all its endpoints, any generation) are known at now; horizon is
// its worst-case horizon and maxAttempts its bound (0: none).
func horizonFitCondition(policy *hookv1.RetryPolicy, buckets []ledger.OutcomeBucket, maxAttempts int, horizon time.Duration, now time.Time) metav1.Condition {
	previous := evidence.InsufficientEvidence
	if c := meta.FindStatusCondition(policy.Status.Conditions, hookv1.ConditionHorizonFit); c != nil {
		previous = findingOf[c.Reason]
	}
	a := evidence.Advise(evidence.AdviceInput{
		Buckets: buckets, Generation: policy.Generation, Now: now,
		MaxAttempts: maxAttempts, Horizon: horizon, Previous: previous,
	})
	return metav1.Condition{
		Type:               hookv1.ConditionHorizonFit,
		Status:             verdictStatus[a.Status],
		Reason:             findingReason[a.Finding],
		Message:            a.Message,
		ObservedGeneration: policy.Generation,
		LastTransitionTime: metav1.NewTime(now),
	}
}

// findingReason maps what the evidence found onto the HorizonFit
// condition's reasons (api/v1alpha1 is their one source); findingOf is its
// inverse, for the hysteresis. An unknown reason reads as no finding.
var (
	findingReason = map[evidence.Finding]string{
		evidence.InsufficientEvidence: hookv1.ReasonInsufficientEvidence,
		evidence.HorizonFits:          hookv1.ReasonHorizonFits,
		evidence.TailRecoversNothing:  hookv1.ReasonTailRecoversNothing,
		evidence.HorizonTooShort:      hookv1.ReasonHorizonTooShort,
	}
	findingOf = func() map[string]evidence.Finding {
		m := make(map[string]evidence.Finding, len(findingReason))
		for f, r := range findingReason {
			m[r] = f
		}
		return m
	}()
	verdictStatus = map[evidence.Verdict]metav1.ConditionStatus{
		evidence.Unknown:    metav1.ConditionUnknown,
		evidence.Fits:       metav1.ConditionTrue,
		evidence.DoesNotFit: metav1.ConditionFalse,
	}
)

// setPolicyEvidence gathers the policy's buckets and sets its evidence and
// HorizonFit condition; without an evidence source it does nothing.
func (r *RetryPolicyReconciler) setPolicyEvidence(ctx context.Context, policy *hookv1.RetryPolicy, now time.Time) error {
	if r.Ledger == nil {
		return nil
	}
	buckets, err := ReadEvidence(ctx, r.Ledger, ledger.OutcomeListParams{Namespace: policy.Namespace, PolicyName: policy.Name}, now)
	if err != nil {
		return err
	}
	policy.Status.Evidence = DeliveryEvidence(buckets, now)
	var horizon time.Duration // unknown for an invalid policy
	if policy.DecodeError() == nil {
		if p, err := Backoff(&policy.Spec); err == nil {
			horizon = p.Plan(ScheduleEntries).WorstCase
		}
	}
	maxAttempts := 0
	if m := policy.Spec.Horizon.MaxAttempts; m != nil {
		maxAttempts = int(*m)
	}
	meta.SetStatusCondition(&policy.Status.Conditions, horizonFitCondition(policy, buckets, maxAttempts, horizon, now))
	return nil
}

// evidenceResync is when to refresh a policy's evidence (0: never).
func (r *RetryPolicyReconciler) evidenceResync() time.Duration {
	if r.Ledger == nil {
		return 0
	}
	if r.ResyncPeriod > 0 {
		return r.ResyncPeriod
	}
	return DefaultEvidenceResync
}

// BucketLeaves are the times an outcome bucket of hour h leaves the
// windows of status.evidence (the last 24 hours, the last 7 days): when a
// status drawn from it changes without a new outcome.
func BucketLeaves(h time.Time) [2]time.Time {
	return [2]time.Time{h.Add(evidence.Day), h.Add(evidence.Week)}
}
