package webhookendpoint

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/controllers/deliveryrecovery"
	"github.com/hookkeeper/hookkeeper/controllers/retrypolicy"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// endpointFacts is what a reconcile gathered about an endpoint: how its
// references resolved, whether the engine has it, and what the engine
// knows of its deliveries. The status is a pure function of it.
type endpointFacts struct {
	// PolicyName is the referenced RetryPolicy; empty for the operator's
	// default policy.
	PolicyName string
	// SecretName is the Secret holding the signing secret.
	SecretName string
	// Problem is why the current spec is not in effect; nil when the engine
	// has it.
	Problem *conditions.Problem
	// Registered is set when the engine holds a configuration of the
	// endpoint: the current spec's when Problem is nil, else an earlier one.
	Registered bool
	// RegisteredPaused is set when Problem is and the configuration the
	// engine holds is paused: by the spec, or because the destination is
	// forbidden.
	RegisteredPaused bool
	// PreviousSecretUntil is when the signing secret replaced by a rotation
	// stops being valid; zero when there is none.
	PreviousSecretUntil time.Time
	// Deliveries is what the engine knows of the endpoint's deliveries; nil
	// when it could not be read, and the status keeps what it said.
	Deliveries *deliveryFacts
	// Incomplete is set when an internal error cut the reconcile short, or
	// it waits for a Secret: observedGeneration does not advance.
	Incomplete bool
	// Waiting is set while the endpoint waits for the signing-secret
	// controller: Ready says what it said.
	Waiting bool
	// Breaker is what the reconcile knows of the circuit breaker; nil when
	// it could not be read, and status.breaker and CircuitOpen keep what
	// they said.
	Breaker *breakerFacts
}

// endpointFactsOf is what the status is computed from: the observation,
// the decision, and how applying it went (applyErr, a *stepError).
func endpointFactsOf(obs *endpointObservation, d *endpointDecision, applyErr error) *endpointFacts {
	f := &endpointFacts{
		PolicyName: obs.PolicyName, SecretName: obs.Signing.SecretName,
		Problem: d.Problem, Registered: obs.Registered != nil, Incomplete: d.Internal || d.Waiting, Waiting: d.Waiting,
	}
	if applyErr != nil {
		e := errorDecision(&endpointObservation{Endpoint: obs.Endpoint, Err: applyErr})
		f.Problem, f.Incomplete, f.Waiting = e.Problem, e.Internal, false
		return f
	}
	if obs.Err != nil {
		return f // the counters were not read: the status keeps them
	}
	inEffect := d.Desired.Policy
	switch {
	case d.Problem == nil && !d.Waiting:
		f.Registered = true
		f.PreviousSecretUntil = d.Rotation.PreviousUntil
	case d.Held:
		f.Registered, f.RegisteredPaused = true, d.Desired.Paused
	case obs.Registered != nil:
		inEffect = obs.Registered.Policy
		f.RegisteredPaused = d.Problem != nil && (obs.Registered.Paused || d.Action == actionPause)
	}
	switch {
	case !f.Registered:
		f.Deliveries = &deliveryFacts{}
	case obs.Deliveries != nil:
		dd := *obs.Deliveries
		dd.ReplayWindow = inEffect.ReplayWindow
		f.Deliveries = &dd
	}
	return f
}

// budgetInEffect is the retry budget the engine applies to the endpoint
// after the decision; nil when none.
func budgetInEffect(obs *endpointObservation, d *endpointDecision) *ledger.RetryBudget {
	switch {
	case (d.Problem == nil || d.Held) && !d.Waiting && obs.Err == nil:
		return d.Desired.Policy.Budget
	case obs.Registered != nil:
		return obs.Registered.Policy.Budget
	}
	return nil
}

// deliveryFacts are an endpoint's counters and unresolved exhausted
// deliveries.
type deliveryFacts struct {
	Stats ledger.EndpointStats
	// Oldest is the oldest unresolved exhausted delivery.
	Oldest *ledger.ExhaustedDelivery
	// Recent are the newest unresolved exhausted deliveries, newest first.
	Recent []ledger.ExhaustedDelivery
	// ReplayWindow is the replay window of the policy in effect.
	ReplayWindow time.Duration
	// Waiting is the throttled backlog.
	Waiting ledger.Waiting
}

// webhookEndpointStatus computes the endpoint's status from the facts
// observed at now. Conditions it does not own are kept.
func webhookEndpointStatus(ep *hookv1.WebhookEndpoint, f *endpointFacts, now time.Time) hookv1.WebhookEndpointStatus {
	status := *ep.Status.DeepCopy()
	status.RetryPolicyName = f.PolicyName
	status.SigningSecretName = f.SecretName
	if !f.Waiting {
		meta.SetStatusCondition(&status.Conditions, readyCondition(f, ep.Generation, now))
		conditions.StalledFromReady(&status.Conditions)
	}
	if d := f.Deliveries; d != nil {
		st := &d.Stats
		status.Deliveries = hookv1.DeliveryCounts{
			Pending:             st.Pending,
			InFlight:            st.InFlight,
			AwaitingAck:         st.AwaitingAck,
			Delivered:           st.Delivered,
			ExhaustedUnresolved: st.ExhaustedUnresolved,
		}
		if w := d.Waiting; w.Deliveries > 0 && !ep.Spec.Paused {
			status.Deliveries.Throttled = w.Deliveries
			status.Deliveries.OldestThrottledDueTime = conditions.MetaTime(&w.OldestDue)
		}
		status.LastSuccessTime = conditions.MetaTime(st.LastSuccessAt)
		status.LastFailureTime = conditions.MetaTime(st.LastFailureAt)
		status.LastFailureReason = conditions.Quote(st.LastFailureReason)
		meta.SetStatusCondition(&status.Conditions, healthyCondition(&ep.Status, st, ep.Generation, now))
		exhausted := exhaustedCondition(ep.Namespace, ep.Name, d, ep.Generation, now)
		if exhausted.Status == metav1.ConditionTrue {
			exhausted.Message = ownedMessage(exhausted.Message, ep.Spec.Owner)
		}
		meta.SetStatusCondition(&status.Conditions, exhausted)
		status.RecentExhausted = recentExhausted(d, now)
	}
	if !f.Incomplete {
		status.ObservedGeneration = ep.Generation
	}
	return status
}

// endpointStatus is the status one reconcile writes: webhookEndpointStatus
// of the facts, the outcome evidence, RetryBudgetLimited from the ledger's
// deferrals, and status.breaker with CircuitOpen from the ledger's breaker
// (each kept as it was when it could not be read).
func endpointStatus(ep *hookv1.WebhookEndpoint, obs *endpointObservation, d *endpointDecision, f *endpointFacts) hookv1.WebhookEndpointStatus {
	status := webhookEndpointStatus(ep, f, obs.Now)
	status.Evidence = endpointEvidence(ep.Status.Evidence, obs)
	if obs.Deferrals != nil {
		meta.SetStatusCondition(&status.Conditions, retryBudgetCondition(*obs.Deferrals, budgetInEffect(obs, d), ep.Generation, obs.Now))
	}
	if bf := f.Breaker; bf != nil {
		status.Breaker = breakerStatus(ep.Status.Breaker, bf)
		meta.SetStatusCondition(&status.Conditions, circuitCondition(ep, bf, obs.Now))
	}
	return status
}

// readyOverBudgetSuffix ends Ready's message for FilterOverBudget.
const readyOverBudgetSuffix = "; the endpoint stays registered and receives the events its filter decides within budget; this lasts until the spec changes"

// readyCondition: True when the url is allowed, the policy and the signing
// secret resolved, and the engine has the current spec.
func readyCondition(f *endpointFacts, generation int64, now time.Time) metav1.Condition {
	c := metav1.Condition{Type: hookv1.ConditionReady, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)}
	if f.Problem != nil {
		c.Status, c.Reason = metav1.ConditionFalse, f.Problem.Reason
		switch {
		case f.Registered && f.Problem.Reason == hookv1.ReasonCredentialsUnavailable:
			c.Message = f.Problem.Message + "; the delivery engine holds the endpoint paused: its deliveries wait, and none is sent until the credentials can be read"
		case f.Registered && f.Problem.Reason == hookv1.ReasonFilterOverBudget:
			c.Message = f.Problem.Message + readyOverBudgetSuffix
		case f.Registered && f.Problem.Reason == hookv1.ReasonFilterInvalid:
			c.Message = f.Problem.Message + "; the endpoint receives no events until the filter is corrected"
		case f.Registered && f.Problem.Reason == hookv1.ReasonDestinationForbidden:
			c.Message = f.Problem.Message + "; the delivery engine holds the endpoint paused: its deliveries wait, and none is sent until the url is allowed"
		case f.Registered && (f.Problem.Reason == hookv1.ReasonURLInvalid || f.Problem.Reason == hookv1.ReasonHeadersInvalid):
			c.Message = f.Problem.Message + "; the delivery engine holds the endpoint paused: its deliveries wait, and none is sent until the spec is corrected"
		case f.Registered && f.RegisteredPaused:
			c.Message = f.Problem.Message + "; the delivery engine keeps the endpoint's previous configuration, paused: its deliveries wait"
		case f.Registered:
			c.Message = f.Problem.Message + "; the delivery engine keeps using the endpoint's previous configuration"
		default:
			c.Message = f.Problem.Message + "; the endpoint is not registered with the delivery engine and receives no events"
		}
		return c
	}
	policy := "the operator's default retry policy"
	if f.PolicyName != "" {
		policy = fmt.Sprintf("RetryPolicy %q", f.PolicyName)
	}
	c.Status, c.Reason = metav1.ConditionTrue, hookv1.ReasonReconciled
	c.Message = fmt.Sprintf("registered with the delivery engine: signed with the secret in Secret %q, retried on %s", f.SecretName, policy)
	if !f.PreviousSecretUntil.IsZero() {
		c.Message += fmt.Sprintf("; the signing secret was rotated and the previous one stays valid until %s", conditions.FormatTime(f.PreviousSecretUntil))
	}
	return c
}

// healthyCondition: True while the last attempt succeeded or nothing
// failed; False when the last failure is newer than the last success, with
// reason ConsecutiveFailures once the endpoint was already unhealthy and
// failed again without a success in between.
func healthyCondition(prev *hookv1.WebhookEndpointStatus, st *ledger.EndpointStats, generation int64, now time.Time) metav1.Condition {
	c := metav1.Condition{Type: hookv1.ConditionHealthy, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)}
	failed, succeeded := st.LastFailureAt, st.LastSuccessAt
	switch {
	case failed == nil:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, hookv1.ReasonNoFailures, "no attempt to the endpoint has failed"
		return c
	case succeeded != nil && !succeeded.Before(*failed):
		c.Status, c.Reason = metav1.ConditionTrue, hookv1.ReasonLastAttemptSucceeded
		c.Message = fmt.Sprintf("the last attempt succeeded at %s; the last failure was at %s (%s)",
			conditions.FormatTime(*succeeded), conditions.FormatTime(*failed), st.LastFailureReason)
		return c
	}

	since := "no attempt has succeeded yet"
	if succeeded != nil {
		since = "the last success was at " + conditions.FormatTime(*succeeded)
	}
	c.Status = metav1.ConditionFalse
	if consecutiveFailures(prev, failed, succeeded) {
		c.Reason = hookv1.ReasonConsecutiveFailures
		c.Message = fmt.Sprintf("attempts keep failing, the last at %s (%s); %s", conditions.FormatTime(*failed), st.LastFailureReason, since)
	} else {
		c.Reason = hookv1.ReasonLastAttemptFailed
		c.Message = fmt.Sprintf("the last attempt failed at %s (%s); %s", conditions.FormatTime(*failed), st.LastFailureReason, since)
	}
	return c
}

// consecutiveFailures reports whether the endpoint was already unhealthy
// and has failed again since, with no success in between (or was already
// failing consecutively and nothing changed).
func consecutiveFailures(prev *hookv1.WebhookEndpointStatus, failed, succeeded *time.Time) bool {
	h := meta.FindStatusCondition(prev.Conditions, hookv1.ConditionHealthy)
	if h == nil || h.Status != metav1.ConditionFalse || prev.LastFailureTime == nil {
		return false
	}
	prevFailure := prev.LastFailureTime.Time
	if succeeded != nil && succeeded.Truncate(time.Second).After(prevFailure) {
		return false
	}
	return failed.Truncate(time.Second).After(prevFailure) || h.Reason == hookv1.ReasonConsecutiveFailures
}

// exhaustedCondition: True while unresolved exhausted deliveries exist,
// naming how many, the oldest, and what to do about them.
func exhaustedCondition(namespace, endpoint string, d *deliveryFacts, generation int64, now time.Time) metav1.Condition {
	c := metav1.Condition{Type: hookv1.ConditionDeliveriesExhausted, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)}
	n := d.Stats.ExhaustedUnresolved
	if n <= 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, hookv1.ReasonNoneUnresolved, "no exhausted delivery is unresolved"
		return c
	}
	c.Status, c.Reason = metav1.ConditionTrue, hookv1.ReasonUnresolvedDeliveries
	if n == 1 {
		c.Message = "1 exhausted delivery is unresolved"
	} else {
		c.Message = fmt.Sprintf("%d exhausted deliveries are unresolved", n)
	}
	if o := d.Oldest; o != nil {
		which := "the oldest"
		if n == 1 {
			which = "it"
		}
		c.Message += fmt.Sprintf(": %s, %s (event %s of type %s), was exhausted at %s after %d attempts (%s)",
			which, o.Delivery.ID, o.Delivery.EventID, o.EventType, conditions.FormatTime(exhaustedAt(o)), o.Delivery.Attempts, o.Delivery.ExhaustReason)
	}
	c.Message += ". To resolve them, create a DeliveryRecovery with action Auto, which retries where a retry is still possible and reissues the rest: " +
		recoveryCommand(namespace, endpoint, hookv1.RecoveryModeAuto) + " (or with action Dismiss to resolve them without resending)"
	return c
}

// recoveryCommand is a command an admin can paste to create a
// DeliveryRecovery of the endpoint: the message is all they are sure to
// have, so it carries the whole object, not a pointer to a file.
func recoveryCommand(namespace, endpoint string, action hookv1.RecoveryMode) string {
	return fmt.Sprintf(`echo '{"apiVersion":"hookkeeper.dev/v1alpha1","kind":"DeliveryRecovery","metadata":{"generateName":"%s-recovery-","namespace":"%s"},"spec":{"endpointRef":{"name":"%s"},"action":"%s"}}' | kubectl create -f -`,
		endpoint, namespace, endpoint, action)
}

// recentExhausted renders the newest unresolved exhausted deliveries for
// status.recentExhausted.
func recentExhausted(d *deliveryFacts, now time.Time) []hookv1.ExhaustedDelivery {
	recent := d.Recent
	if len(recent) > recentExhaustedMax {
		recent = recent[:recentExhaustedMax]
	}
	if len(recent) == 0 {
		return nil
	}
	out := make([]hookv1.ExhaustedDelivery, 0, len(recent))
	for i := range recent {
		x := &recent[i]
		out = append(out, hookv1.ExhaustedDelivery{
			DeliveryID:  x.Delivery.ID,
			EventID:     x.Delivery.EventID,
			EventType:   x.EventType,
			Attempts:    int32(x.Delivery.Attempts),
			Reason:      string(x.Delivery.ExhaustReason),
			LastError:   conditions.Quote(x.Delivery.LastError),
			ExhaustedAt: *conditions.MetaTime(ptr.To(exhaustedAt(x))),
			Recovery:    recoveryFor(x, d.ReplayWindow, now),
		})
	}
	return out
}

// recoveryFor says what can still resolve an exhausted delivery: a Retry
// while its event's secrets and payload are present and the replay window
// is open, otherwise only a Reissue. It is the rule a DeliveryRecovery with
// action Auto applies (deliveryrecovery.AutoAction).
func recoveryFor(x *ledger.ExhaustedDelivery, replayWindow time.Duration, now time.Time) hookv1.RecoveryAction {
	if deliveryrecovery.AutoAction(x, replayWindow, now) == ledger.RecoveryRetry {
		return hookv1.RecoveryRetry
	}
	return hookv1.RecoveryReissue
}

func exhaustedAt(x *ledger.ExhaustedDelivery) time.Time {
	if x.Delivery.TerminalAt != nil {
		return *x.Delivery.TerminalAt
	}
	return x.Delivery.CreatedAt
}

// endpointEvidence is the endpoint's status.evidence: drawn from its
// buckets when they were read, else what the status showed.
func endpointEvidence(shown *hookv1.DeliveryEvidence, obs *endpointObservation) *hookv1.DeliveryEvidence {
	if !obs.EvidenceRead {
		return shown
	}
	return retrypolicy.DeliveryEvidence(obs.Evidence, obs.Now)
}
