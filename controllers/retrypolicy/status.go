package retrypolicy

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/internal/backoff"
)

// ScheduleEntries bounds status.schedule.
const ScheduleEntries = 25

// defaultFactor is the Exponential factor when spec.backoff.factor is unset.
const defaultFactor = "2"

// Backoff converts a RetryPolicy spec into the engine's policy. It
// fails only on input that admission should have refused (an object stored
// before a CRD upgrade, say); the error names the field.
func Backoff(spec *hookv1.RetryPolicySpec) (backoff.Policy, error) {
	b := spec.Backoff
	p := backoff.Policy{
		Strategy:       backoff.Strategy(b.Strategy),
		InitialDelay:   Duration(b.InitialDelay),
		MaxDelay:       Duration(b.MaxDelay),
		AttemptTimeout: Duration(spec.AttemptTimeout),
		RetryAfterCap:  Duration(spec.RetryAfterCap),
		MaxAge:         Duration(spec.Horizon.MaxAge),
	}
	if p.Strategy == "" {
		p.Strategy = backoff.Exponential
	}
	if b.JitterPercent != nil {
		p.JitterPercent = *b.JitterPercent
	}
	if spec.Horizon.MaxAttempts != nil {
		p.MaxAttempts = *spec.Horizon.MaxAttempts
	}
	for _, d := range b.Schedule {
		p.Schedule = append(p.Schedule, d.Duration)
	}
	if p.Strategy == backoff.Exponential {
		factor := b.Factor
		if factor == "" {
			factor = defaultFactor
		}
		milli, err := backoff.ParseFactor(factor)
		if err != nil {
			return backoff.Policy{}, err
		}
		p.FactorMilli = milli
	}
	if err := p.Validate(); err != nil {
		return backoff.Policy{}, err
	}
	return p, nil
}

// retryPolicyStatus computes the whole status of a policy observed at now:
// the effective schedule, the worst-case horizon and the Ready condition.
// Conditions other than Ready are kept as they are.
func retryPolicyStatus(policy *hookv1.RetryPolicy, endpoints int32, now time.Time) hookv1.RetryPolicyStatus {
	status := hookv1.RetryPolicyStatus{
		ObservedGeneration: policy.Generation,
		Conditions:         append([]metav1.Condition(nil), policy.Status.Conditions...),
		Endpoints:          endpoints,
	}
	ready := metav1.Condition{
		Type:               hookv1.ConditionReady,
		ObservedGeneration: policy.Generation,
		LastTransitionTime: metav1.NewTime(now),
	}

	// An object with values the Go types could not decode is never used:
	// what was left out would read as unset.
	if len(policy.Undecodable) > 0 {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, hookv1.ReasonInvalidSpec, conditions.Undecodable(policy.Undecodable)
		meta.SetStatusCondition(&status.Conditions, ready)
		conditions.StalledFromReady(&status.Conditions)
		return status
	}
	p, err := Backoff(&policy.Spec)
	if err == nil {
		_, err = Breaker(policy.Spec.CircuitBreaker)
	}
	if err != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, hookv1.ReasonInvalidSpec, conditions.Message(err)
		meta.SetStatusCondition(&status.Conditions, ready)
		conditions.StalledFromReady(&status.Conditions)
		return status
	}

	plan := p.Plan(ScheduleEntries)
	for _, off := range plan.Offsets {
		status.Schedule = append(status.Schedule, backoff.FormatDuration(off))
	}
	status.ScheduleTruncated = plan.Truncated
	status.Attempts = plan.Attempts
	status.Horizon = backoff.FormatDuration(plan.WorstCase)

	ready.Status, ready.Reason, ready.Message = readiness(p, plan, policy.Spec.ReplayWindow.Duration)
	meta.SetStatusCondition(&status.Conditions, ready)
	conditions.StalledFromReady(&status.Conditions)
	return status
}

// readiness decides the Ready condition of a valid policy. Admission already
// checks replayWindow against maxAge; a policy bounded by attempts alone can
// only be checked once its schedule is known, here.
func readiness(p backoff.Policy, plan backoff.Plan, replayWindow time.Duration) (metav1.ConditionStatus, string, string) {
	latestStart := plan.WorstCase - p.AttemptTimeout
	if latestStart > replayWindow {
		return metav1.ConditionFalse, hookv1.ReasonReplayWindowTooShort, fmt.Sprintf(
			"replayWindow %s is shorter than the latest an automatic retry can start (%s after the first attempt): raise spec.replayWindow or shorten spec.horizon",
			backoff.FormatDuration(replayWindow), backoff.FormatDuration(latestStart))
	}
	return metav1.ConditionTrue, hookv1.ReasonReconciled, fmt.Sprintf(
		"up to %d attempts, exhausted at most %s after the first; replayable for %s",
		plan.Attempts, backoff.FormatDuration(plan.WorstCase), backoff.FormatDuration(replayWindow))
}

func Duration(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}
