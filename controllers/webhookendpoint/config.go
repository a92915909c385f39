package controllers

import (
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// Defaults the CRD applies at admission, repeated here for objects stored
// before a default existed and for the built-in default policy.
const (
	defaultAckTimeout        = 15 * time.Minute
	defaultMaxInFlight       = 10
	defaultPayloadRetention  = 168 * time.Hour
	defaultEvidenceRetention = 720 * time.Hour
	defaultMinRetriesPerMin  = 10
)

// defaultRetryOn is spec.retryOn's CRD default.
var defaultRetryOn = []string{"NetworkError", "Timeout", "408", "429", "5xx"}

// DefaultRetryPolicySpec is the policy of endpoints without
// spec.retryPolicyRef: exponential backoff from 5s doubling up to 1h with
// 10% jitter, at most 12 attempts within 24h of the first, replayable for
// 72h, and the CRD's defaults for everything else (the circuit breaker's
// are ledger.DefaultBreakerPolicy's).
func DefaultRetryPolicySpec() hookv1.RetryPolicySpec {
	d := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	retryOn := make([]hookv1.RetryClass, len(defaultRetryOn))
	for i, c := range defaultRetryOn {
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
	p, err := policyConfig(&spec)
	if err != nil {
		panic("controllers: the built-in default retry policy is invalid: " + err.Error())
	}
	return p
}

// policyConfig converts a RetryPolicy spec into the engine's policy: the
// backoff through backoffPolicy (shared with the RetryPolicy status), the
// retried failure classes, replay window, retention and retry budget, and
// the circuit breaker, always explicit (breakerPolicy).
func policyConfig(spec *hookv1.RetryPolicySpec) (ledger.Policy, error) {
	b, err := backoffPolicy(spec)
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
		p.RetryOn = append([]string(nil), defaultRetryOn...)
	}
	if r := spec.Retention; r != nil {
		p.SecretGracePeriod = duration(r.SecretGracePeriod)
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
	if p.Breaker, err = breakerPolicy(spec.CircuitBreaker); err != nil {
		return ledger.Policy{}, err
	}
	return p, nil
}

// endpointConfig is the configuration the engine gets for ep, signed with
// secrets (the current one first) under policy.
func endpointConfig(ep *hookv1.WebhookEndpoint, policy ledger.Policy, secrets []ledger.SigningSecret) ledger.Endpoint {
	spec := &ep.Spec
	out := ledger.Endpoint{
		ID:          ledger.EndpointID(ep.Namespace, ep.Name),
		Namespace:   ep.Namespace,
		Name:        ep.Name,
		URL:         spec.URL,
		Secrets:     secrets,
		Policy:      policy,
		AckMode:     ledger.AckResponse,
		Paused:      spec.Paused,
		Owner:       spec.Owner,
		MaxInFlight: defaultMaxInFlight,
		Filter:      spec.Filter,
	}
	for _, t := range spec.EventTypes {
		out.EventTypes = append(out.EventTypes, string(t))
	}
	if a := spec.Acknowledgement; a != nil && a.Mode == hookv1.AcknowledgementCallback {
		out.AckMode = ledger.AckCallback
		out.AckTimeout = defaultAckTimeout
		if a.Timeout != nil {
			out.AckTimeout = a.Timeout.Duration
		}
	}
	if spec.DeadLetterRef != nil {
		out.DeadLetter = ledger.EndpointID(ep.Namespace, spec.DeadLetterRef.Name)
	}
	if rl := spec.RateLimit; rl != nil {
		out.RateLimit = ledger.RateLimit{PerSecond: int(rl.PerSecond)}
		if rl.Burst != nil {
			out.RateLimit.Burst = int(*rl.Burst)
		}
	}
	if spec.MaxInFlight != nil {
		out.MaxInFlight = int(*spec.MaxInFlight)
	}
	for _, h := range spec.Headers {
		if h.ValueFrom == nil { // the others are credentials (readCredentials)
			out.Headers = append(out.Headers, wire.Header{Name: h.Name, Value: h.Value})
		}
	}
	return out
}

// sameConfig reports whether two configurations of an endpoint deliver the
// same way, ignoring what the ledger stamps on a registration (Version,
// UpdatedAt) and what its round trip cannot preserve (empty versus nil
// slices, time zones, monotonic clock readings).
func sameConfig(a, b ledger.Endpoint) bool {
	return reflect.DeepEqual(comparableConfig(a), comparableConfig(b))
}

func comparableConfig(ep ledger.Endpoint) ledger.Endpoint {
	ep.Version, ep.UpdatedAt = 0, time.Time{}
	ep.EventTypes = nilIfEmpty(ep.EventTypes)
	ep.Headers = nilIfEmpty(ep.Headers)
	ep.Policy.RetryOn = nilIfEmpty(ep.Policy.RetryOn)
	ep.Policy.Backoff.Schedule = nilIfEmpty(ep.Policy.Backoff.Schedule)
	secrets := make([]ledger.SigningSecret, 0, len(ep.Secrets))
	for _, s := range ep.Secrets {
		c := ledger.SigningSecret{Value: nilIfEmpty(s.Value)}
		if !s.NotAfter.IsZero() {
			c.NotAfter = time.Unix(0, s.NotAfter.UnixNano()).UTC()
		}
		secrets = append(secrets, c)
	}
	ep.Secrets = nilIfEmpty(secrets)
	return ep
}

func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}
