package webhookendpoint

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The circuit breaker as admins see it (docs/operations/circuit-breaker.md).
// The engine opens, probes and closes an endpoint's breaker in the ledger,
// shared by every replica; the controller only shows it: status.breaker,
// the CircuitOpen condition, one CircuitOpened Event per opening and a
// CircuitClosed Event, the circuit metrics, and acts on probe requests
// (AnnotationProbeRequestedAt) once each. Everything here but the engine
// calls in the reconciler is a pure function of what was read.

// breakerInEffect is the breaker policy the engine applies to the
// endpoint after the decision: the desired one when it is registered,
// else the one the engine keeps; nil when the engine has none.
func breakerInEffect(obs *endpointObservation, d *endpointDecision) *ledger.BreakerPolicy {
	var p ledger.Policy
	switch {
	case d.Problem == nil && !d.Waiting && obs.Err == nil:
		p = d.Desired.Policy
	case obs.Registered != nil:
		p = obs.Registered.Policy
	default:
		return nil
	}
	bp := p.BreakerPolicyOrDefault()
	return &bp
}

// probeRequest is a request for a probe the reconcile acts on: the value of
// AnnotationProbeRequestedAt (bounded like status.breaker.probeRequest)
// and whether it is an RFC 3339 time, the only form that asks for a probe.
type probeRequest struct {
	Value string
	Valid bool
}

// maxProbeRequest bounds status.breaker.probeRequest (the CRD's maxLength).
const maxProbeRequest = 64

// decideProbe returns the probe request to act on: the annotation's value
// when it differs from the one status.breaker.probeRequest recorded, so
// that each request is acted on once and a re-applied manifest carrying an
// old value asks for nothing; nil when there is none.
func decideProbe(ep *hookv1.WebhookEndpoint) *probeRequest {
	raw := ep.Annotations[hookv1.AnnotationProbeRequestedAt]
	if raw == "" {
		return nil
	}
	v := conditions.Clip(raw, maxProbeRequest)
	if b := ep.Status.Breaker; b != nil && b.ProbeRequest == v {
		return nil
	}
	_, err := time.Parse(time.RFC3339, raw)
	return &probeRequest{Value: v, Valid: err == nil}
}

// breakerFacts is what a reconcile knows of the endpoint's breaker.
type breakerFacts struct {
	// Breaker is the ledger's breaker: as read, or as the probe request
	// left it.
	Breaker ledger.Breaker
	// Policy is the breaker policy in effect; nil when the engine has none.
	Policy *ledger.BreakerPolicy
	// Probe is the probe request acted on; nil when none was.
	Probe *probeRequest
}

// breakerStatus renders the ledger's breaker for status.breaker, keeping
// the probe request prev recorded unless one was acted on now.
func breakerStatus(prev *hookv1.CircuitBreakerStatus, bf *breakerFacts) *hookv1.CircuitBreakerStatus {
	b := &bf.Breaker
	st := &hookv1.CircuitBreakerStatus{
		State:           hookv1.CircuitClosed,
		Reason:          string(b.Reason),
		OpenedAt:        metaTimeOf(b.OpenedAt),
		Openings:        b.Openings,
		Failures:        clampInt32(b.Failures),
		LastFailure:     conditions.Quote(b.LastFailure),
		Probes:          clampInt32(b.Probes),
		LastProbeAt:     conditions.MetaTime(b.LastProbeAt),
		LastProbeResult: conditions.Quote(b.LastProbeResult),
		ClosedAt:        conditions.MetaTime(b.ClosedAt),
		CloseReason:     string(b.CloseReason),
	}
	if b.Open {
		st.State = hookv1.CircuitOpen
		st.NextProbeAt = conditions.MetaTime(b.NextProbeAt)
	}
	switch {
	case bf.Probe != nil:
		st.ProbeRequest = bf.Probe.Value
	case prev != nil:
		st.ProbeRequest = prev.ProbeRequest
	}
	return st
}

// circuitCondition is CircuitOpen for the breaker: True while it is open,
// with why, the streak, the last probe and the next one; False with why
// attempts flow. A paused endpoint keeps the breaker's condition, and the
// message says that spec.paused overrides it.
func circuitCondition(ep *hookv1.WebhookEndpoint, bf *breakerFacts, now time.Time) metav1.Condition {
	c := metav1.Condition{Type: hookv1.ConditionCircuitOpen, ObservedGeneration: ep.Generation, LastTransitionTime: metav1.NewTime(now)}
	b := &bf.Breaker
	if !b.Open {
		c.Status = metav1.ConditionFalse
		c.Reason, c.Message = closedReason(b, bf.Policy)
		return c
	}
	c.Status = metav1.ConditionTrue
	c.Message = openMessage(ep, b)
	if ep.Spec.Paused {
		c.Message += "; spec.paused overrides the breaker: nothing is sent, probes included, until the endpoint is unpaused"
	}
	c.Message = conditions.Bound(ownedMessage(c.Message, ep.Spec.Owner))
	c.Reason = hookv1.ReasonCircuitFailing
	if b.Reason == ledger.BreakerGone {
		c.Reason = hookv1.ReasonCircuitGone
	}
	return c
}

// closedReason is CircuitOpen=False's reason and message.
func closedReason(b *ledger.Breaker, policy *ledger.BreakerPolicy) (string, string) {
	switch {
	case policy != nil && policy.Disabled:
		return hookv1.ReasonCircuitBreakerDisabled, "the policy in effect disables the circuit breaker (spec.circuitBreaker.disabled): every delivery is attempted on its backoff, and a 410 Gone exhausts only the delivery that got it"
	case b.Openings == 0 || b.ClosedAt == nil:
		return hookv1.ReasonCircuitClosed, "the circuit breaker has never opened: attempts are made on the retry policy"
	case b.CloseReason == ledger.BreakerURLChanged:
		return hookv1.ReasonURLChanged, fmt.Sprintf("the circuit breaker closed at %s because spec.url changed (a new receiver); it had opened %s", conditions.FormatTime(*b.ClosedAt), openingSummary(b))
	case b.CloseReason == ledger.BreakerProbeSucceeded:
		return hookv1.ReasonProbeSucceeded, fmt.Sprintf("the circuit breaker closed at %s when a probe succeeded, and the backlog drains at a bounded ramp; it had opened %s", conditions.FormatTime(*b.ClosedAt), openingSummary(b))
	}
	return hookv1.ReasonCircuitClosed, fmt.Sprintf("the circuit breaker closed at %s; it had opened %s", conditions.FormatTime(*b.ClosedAt), openingSummary(b))
}

// openingSummary says when and why the breaker opened last.
func openingSummary(b *ledger.Breaker) string {
	s := "at " + conditions.FormatTime(b.OpenedAt)
	switch {
	case b.Reason == ledger.BreakerGone:
		s += " on a 410 Gone"
	case b.Failures > 0:
		s += " after " + failedAttempts(b.Failures)
	}
	if b.LastFailure != "" {
		s += " (" + b.LastFailure + ")"
	}
	return s
}

// openMessage is CircuitOpen=True's message: what opened it, that
// deliveries wait, and what happens next.
func openMessage(ep *hookv1.WebhookEndpoint, b *ledger.Breaker) string {
	var m string
	if b.Reason == ledger.BreakerGone {
		m = fmt.Sprintf("the circuit breaker opened at %s: the receiver answered 410 Gone", conditions.FormatTime(b.OpenedAt))
		if b.LastFailure != "" && b.LastFailure != "HTTP 410" {
			m += " (" + conditions.Quote(b.LastFailure) + ")"
		}
		m += ", which says the URL is gone; no attempt is made to the endpoint and its deliveries wait, none is exhausted for it"
	} else {
		m = fmt.Sprintf("the circuit breaker opened at %s after %s", conditions.FormatTime(b.OpenedAt), failedAttempts(b.Failures))
		if b.LastFailure != "" {
			m += ", the last: " + conditions.Quote(b.LastFailure)
		}
		m += "; no attempt is made to the endpoint but one probe at a time, and its deliveries wait"
	}
	if b.Probes > 0 && b.LastProbeAt != nil {
		probes := fmt.Sprintf("%d probes so far, the last", b.Probes)
		if b.Probes == 1 {
			probes = "1 probe so far, which"
		}
		m += fmt.Sprintf("; %s failed at %s", probes, conditions.FormatTime(*b.LastProbeAt))
		if b.LastProbeResult != "" {
			m += " (" + conditions.Quote(b.LastProbeResult) + ")"
		}
	}
	probe := fmt.Sprintf("kubectl hookkeeper probe %s -n %s", ep.Name, ep.Namespace)
	switch {
	case b.NextProbeAt != nil:
		m += fmt.Sprintf("; the next probe is due at %s (`%s` asks for one now)", conditions.FormatTime(*b.NextProbeAt), probe)
	case b.Reason == ledger.BreakerGone:
		m += fmt.Sprintf("; no automatic probe (the policy sets no circuitBreaker.goneProbeInterval): fix spec.url, which closes the breaker, or ask for a probe with `%s`", probe)
	default:
		m += fmt.Sprintf("; no automatic probe is scheduled: `%s` asks for one", probe)
	}
	return m
}

// failedAttempts is "n failed attempts in a row", in the singular for one.
func failedAttempts(n int) string {
	if n == 1 {
		return "1 failed attempt"
	}
	return fmt.Sprintf("%d failed attempts in a row", n)
}

// breakerNews is what the breaker did since the status last showed it.
type breakerNews struct {
	// Opened is how many openings the status had not shown yet.
	Opened int64
	// Closed is set when it closed since: it was open, or opened since.
	Closed bool
}

// breakerChange compares the breaker before (the status as read; nil when
// it never showed one) with after. An endpoint whose status never showed
// a breaker announces an opening only if it is open now: the openings an
// older status never counted (an upgrade, a re-created endpoint) are not
// news.
func breakerChange(before, after *hookv1.CircuitBreakerStatus) breakerNews {
	var n breakerNews
	switch {
	case after == nil:
		return n
	case before == nil:
		if after.State == hookv1.CircuitOpen {
			n.Opened = 1
		}
		return n
	case after.Openings > before.Openings:
		n.Opened = after.Openings - before.Openings
	}
	n.Closed = after.State == hookv1.CircuitClosed && (before.State == hookv1.CircuitOpen || n.Opened > 0)
	return n
}

// breakerEvents decides the breaker's Events: one Warning CircuitOpened
// per opening the status had not shown (the ledger counts the openings, so
// a reconcile run twice, a restart or another replica's reconcile does not
// repeat it), a Normal CircuitClosed when it closed, and the outcome of the
// probe request acted on (probe; nil for none). circuit is the CircuitOpen
// condition just computed.
func breakerEvents(ep *hookv1.WebhookEndpoint, news breakerNews, after *hookv1.CircuitBreakerStatus, circuit *metav1.Condition, probe *probeRequest) []endpointEvent {
	var out []endpointEvent
	if news.Opened > 0 {
		note := circuit.Message
		if circuit.Status != metav1.ConditionTrue {
			at := ""
			if after.OpenedAt != nil {
				at = " at " + conditions.FormatTime(after.OpenedAt.Time)
			}
			note = ownedMessage(fmt.Sprintf("the circuit breaker opened%s (%s) and has closed again since", at, after.Reason), ep.Spec.Owner)
		}
		if news.Opened > 1 {
			note = fmt.Sprintf("the circuit breaker opened %d times since the status last showed it; %s", news.Opened, note)
		}
		out = append(out, endpointEvent{corev1.EventTypeWarning, hookv1.ReasonCircuitOpened, "Deliver", conditions.Bound(note)})
	}
	if news.Closed {
		out = append(out, endpointEvent{corev1.EventTypeNormal, hookv1.ReasonCircuitClosedEvent, "Deliver", circuit.Message})
	}
	if probe != nil {
		out = append(out, probeEvent(ep, after, probe))
	}
	return out
}

// probeEvent announces what a probe request did.
func probeEvent(ep *hookv1.WebhookEndpoint, after *hookv1.CircuitBreakerStatus, probe *probeRequest) endpointEvent {
	ev := endpointEvent{corev1.EventTypeNormal, hookv1.ReasonProbeRequested, "Probe", "a probe was requested (" + probe.Value + ")"}
	switch {
	case !probe.Valid:
		ev.Type, ev.Reason = corev1.EventTypeWarning, hookv1.ReasonProbeRequestInvalid
		ev.Note = "annotation " + hookv1.AnnotationProbeRequestedAt + " is not an RFC 3339 time (such as 2026-12-01T12:00:00Z); nothing is probed. `kubectl hookkeeper probe` writes it"
	case after == nil || after.State != hookv1.CircuitOpen:
		ev.Note += ", but the circuit breaker is closed: attempts are made on the retry policy, there is nothing to probe"
	case ep.Spec.Paused:
		ev.Note += ": the next probe is due now, but spec.paused holds it until the endpoint is unpaused"
	default:
		ev.Note += ": the next probe is due now; one delivery is sent to the endpoint as the probe"
	}
	return ev
}

// metaTimeOf is conditions.MetaTime of a time that may be zero (never).
func metaTimeOf(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return conditions.MetaTime(&t)
}

func clampInt32(n int) int32 {
	return int32(min(max(n, 0), 1<<31-1))
}
