package webhookendpoint

import (
	"reflect"
	"time"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// Defaults the CRD applies at admission, repeated here for objects stored
// before a default existed.
const (
	defaultAckTimeout  = 15 * time.Minute
	defaultMaxInFlight = 10
)

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
