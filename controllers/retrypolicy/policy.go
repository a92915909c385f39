package retrypolicy

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// A RetryPolicy as the engine applies it, shared with the controllers whose
// objects name one (WebhookEndpoint, WebhookEventType).

// Defaults the CRD applies at admission, repeated here for objects stored
// before a default existed and for the built-in default policy.
const (
	defaultPayloadRetention  = 168 * time.Hour
	defaultEvidenceRetention = 720 * time.Hour
	defaultMinRetriesPerMin  = 10
)

// DefaultRetryOn is spec.retryOn's CRD default.
var DefaultRetryOn = []string{"NetworkError", "Timeout", "408", "429", "5xx"}

// DefaultRetryPolicySpec is the policy of endpoints without
// spec.retryPolicyRef: exponential backoff from 5s doubling up to 1h with
// 10% jitter, at most 12 attempts within 24h of the first, replayable for
// 72h, and the CRD's defaults for everything else (the circuit breaker's
// are ledger.DefaultBreakerPolicy's).
func DefaultRetryPolicySpec() hookv1.RetryPolicySpec {
	d := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	retryOn := make([]hookv1.RetryClass, len(DefaultRetryOn))
	for i, c := range DefaultRetryOn {
		retryOn[i] = hookv1.RetryClass(c)
	}
	return hookv1.RetryPolicySpec{
		Backoff: hookv1.Backoff{
			Strategy:      hookv1.BackoffExponential,
			InitialDelay:  d(5 * time.Second),
			Factor:        "2",
			MaxDelay:      d(time.Hour),
			JitterPercent: ptr.To[int32](10),
		},
		Horizon:        hookv1.Horizon{MaxAttempts: ptr.To[int32](12), MaxAge: d(24 * time.Hour)},
		AttemptTimeout: d(30 * time.Second),
		RetryOn:        retryOn,
		RetryAfterCap:  d(time.Hour),
		ReplayWindow:   *d(72 * time.Hour),
		Retention: &hookv1.Retention{
			SecretGracePeriod: d(0),
			Payloads:          d(defaultPayloadRetention),
			Evidence:          d(defaultEvidenceRetention),
		},
		CircuitBreaker: &hookv1.CircuitBreaker{
			Failures:         ptr.To(int32(ledger.DefaultBreakerPolicy.Failures)),
			MinDuration:      d(ledger.DefaultBreakerPolicy.MinDuration),
			ProbeInterval:    d(ledger.DefaultBreakerPolicy.ProbeInterval),
			MaxProbeInterval: d(ledger.DefaultBreakerPolicy.MaxProbeInterval),
			Ramp:             d(ledger.DefaultBreakerPolicy.Ramp),
		},
	}
}

// DefaultPolicy is DefaultRetryPolicySpec as the engine applies it; the
// manager hands it to the WebhookEndpoint controller.
func DefaultPolicy() ledger.Policy {
	spec := DefaultRetryPolicySpec()
	p, err := Config(&spec)
	if err != nil {
		panic("controllers: the built-in default retry policy is invalid: " + err.Error())
	}
	return p
}

// Config converts a RetryPolicy spec into the engine's policy: the
// backoff through Backoff (shared with the RetryPolicy status), the
// retried failure classes, replay window, retention and retry budget, and
// the circuit breaker, always explicit (Breaker).
func Config(spec *hookv1.RetryPolicySpec) (ledger.Policy, error) {
	b, err := Backoff(spec)
	if err != nil {
		return ledger.Policy{}, err
	}
	p := ledger.Policy{
		Backoff:           b,
		ReplayWindow:      spec.ReplayWindow.Duration,
		PayloadRetention:  defaultPayloadRetention,
		EvidenceRetention: defaultEvidenceRetention,
	}
	for _, c := range spec.RetryOn {
		p.RetryOn = append(p.RetryOn, string(c))
	}
	if len(p.RetryOn) == 0 {
		p.RetryOn = append([]string(nil), DefaultRetryOn...)
	}
	if r := spec.Retention; r != nil {
		p.SecretGracePeriod = Duration(r.SecretGracePeriod)
		if r.Payloads != nil {
			p.PayloadRetention = r.Payloads.Duration
		}
		if r.Evidence != nil {
			p.EvidenceRetention = r.Evidence.Duration
		}
	}
	if rb := spec.RetryBudget; rb != nil {
		p.Budget = &ledger.RetryBudget{RatioPercent: int(rb.RatioPercent), MinPerMinute: defaultMinRetriesPerMin}
		if rb.MinRetriesPerMinute != nil {
			p.Budget.MinPerMinute = int(*rb.MinRetriesPerMinute)
		}
	}
	if p.Breaker, err = Breaker(spec.CircuitBreaker); err != nil {
		return ledger.Policy{}, err
	}
	return p, nil
}

// Breaker converts spec.circuitBreaker into the engine's breaker
// policy: the CRD's defaults (ledger.DefaultBreakerPolicy's values) for
// what is unset, all of them when it is absent. It fails only on values
// admission refuses (an object written before a rule, or the built-in
// default policy, which admission never sees); the errors name the field.
func Breaker(cb *hookv1.CircuitBreaker) (*ledger.BreakerPolicy, error) {
	p := ledger.DefaultBreakerPolicy
	if cb == nil {
		return &p, nil
	}
	p.Disabled = cb.Disabled
	if cb.Failures != nil {
		p.Failures = int(*cb.Failures)
	}
	if cb.MinDuration != nil {
		p.MinDuration = cb.MinDuration.Duration
	}
	if cb.ProbeInterval != nil {
		p.ProbeInterval = cb.ProbeInterval.Duration
	}
	if cb.MaxProbeInterval != nil {
		p.MaxProbeInterval = cb.MaxProbeInterval.Duration
	}
	p.GoneProbeInterval = Duration(cb.GoneProbeInterval)
	if cb.Ramp != nil {
		p.Ramp = cb.Ramp.Duration
	}

	var errs []error
	field := func(name, detail string) {
		errs = append(errs, &backoff.FieldError{Field: "circuitBreaker." + name, Detail: detail})
	}
	if p.Failures < 1 {
		field("failures", "must be at least 1")
	}
	for name, d := range map[string]time.Duration{"minDuration": p.MinDuration, "goneProbeInterval": p.GoneProbeInterval, "ramp": p.Ramp} {
		if d < 0 {
			field(name, "must not be negative")
		}
	}
	if p.ProbeInterval <= 0 {
		field("probeInterval", "must be greater than zero")
	}
	if p.MaxProbeInterval < p.ProbeInterval {
		field("maxProbeInterval", "must be at least circuitBreaker.probeInterval")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &p, nil
}

// Named is the engine's form of the RetryPolicy name of namespace,
// or the problem that keeps it from being used (missing, undecodable, not
// Ready, invalid); an error only when it could not be read. Endpoints and
// event types (spec.retryPolicyRef of each) resolve theirs with it.
func Named(ctx context.Context, r client.Reader, namespace, name string) (ledger.Policy, *conditions.Problem, error) {
	var rp hookv1.RetryPolicy
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &rp); err != nil {
		if apierrors.IsNotFound(err) {
			return ledger.Policy{}, &conditions.Problem{Reason: hookv1.ReasonRetryPolicyNotFound, Message: fmt.Sprintf("RetryPolicy %q not found", name)}, nil
		}
		return ledger.Policy{}, nil, err
	}
	if len(rp.Undecodable) > 0 {
		return ledger.Policy{}, &conditions.Problem{Reason: hookv1.ReasonRetryPolicyNotReady, Message: fmt.Sprintf("RetryPolicy %q is invalid: %s", name, conditions.Undecodable(rp.Undecodable))}, nil
	}
	if pr := Readiness(&rp); pr != nil {
		return ledger.Policy{}, pr, nil
	}
	p, err := Config(&rp.Spec)
	if err != nil {
		return ledger.Policy{}, &conditions.Problem{Reason: hookv1.ReasonRetryPolicyNotReady, Message: fmt.Sprintf("RetryPolicy %q is invalid: %s", name, conditions.Message(err))}, nil
	}
	p.Name, p.Generation = name, rp.Generation // outcome evidence is kept per policy version
	return p, nil, nil
}

// Readiness is nil when the RetryPolicy's status says it is Ready for
// its current generation, else the problem.
func Readiness(rp *hookv1.RetryPolicy) *conditions.Problem {
	ready := meta.FindStatusCondition(rp.Status.Conditions, hookv1.ConditionReady)
	switch {
	case ready == nil || rp.Status.ObservedGeneration != rp.Generation || ready.ObservedGeneration != rp.Generation:
		return &conditions.Problem{Reason: hookv1.ReasonRetryPolicyNotReady, Message: fmt.Sprintf("RetryPolicy %q has not been reconciled yet", rp.Name)}
	case ready.Status != metav1.ConditionTrue:
		return &conditions.Problem{Reason: hookv1.ReasonRetryPolicyNotReady, Message: fmt.Sprintf("RetryPolicy %q is not Ready (%s: %s)", rp.Name, ready.Reason, ready.Message)}
	}
	return nil
}

// ReadinessChanged passes the RetryPolicy updates that can change
// what its endpoints get: a new spec, or a change of readiness. Its other
// status writes (such as the count of endpoints using it) do not wake every
// endpoint that uses it.
func ReadinessChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldP, okOld := e.ObjectOld.(*hookv1.RetryPolicy)
			newP, okNew := e.ObjectNew.(*hookv1.RetryPolicy)
			if !okOld || !okNew {
				return true
			}
			return oldP.Generation != newP.Generation || readinessKey(oldP) != readinessKey(newP)
		},
	}
}

// readinessKey is what an endpoint's Ready condition takes from its policy.
func readinessKey(rp *hookv1.RetryPolicy) conditions.Problem {
	if p := Readiness(rp); p != nil {
		return *p
	}
	return conditions.Problem{}
}
