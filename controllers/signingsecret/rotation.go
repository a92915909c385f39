package signingsecret

import (
	"crypto/hmac"
	"encoding/base64"
	"time"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// A rotation of an endpoint's signing secret keeps the secret it replaced
// valid for spec.signingRotationGracePeriod, so that receivers can switch
// without rejecting deliveries: during the grace period every attempt is
// signed with both.
//
// The controller notices a rotation by comparing the secret in the
// endpoint's Secret with the one the engine signs with (the current secret
// of the registered configuration). It remembers the replaced secret and
// when it was replaced in a Secret, never in an annotation: in the generated
// Secret itself (keys previousSigningSecret and rotatedAt), or for a
// user-managed Secret in the controller-owned Secret <endpoint>-signing-previous.
// Remembering comes before registering, so a crash between the two resumes
// the same rotation instead of losing the previous secret. Only the
// immediately previous secret is remembered: a second rotation within the
// grace period ends the first one's grace.

// Keys of the Secrets the controller writes.
const (
	KeySigningSecret         = "signingSecret"
	keyPreviousSigningSecret = "previousSigningSecret"
	keyRotatedAt             = "rotatedAt"
)

// DefaultRotationGracePeriod is spec.signingRotationGracePeriod's CRD
// default.
const DefaultRotationGracePeriod = 24 * time.Hour

// canonicalSecret validates a whsec_ secret and returns it in canonical
// form ("whsec_" + standard padded base64 of the key, no whitespace), so that
// the same key always compares equal. The error never contains the value.
func canonicalSecret(value []byte) (sensitive.Bytes, error) {
	key, err := signing.ParseSecret(value)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	out := make([]byte, 0, len(signing.SecretPrefix)+base64.StdEncoding.EncodedLen(len(key)))
	out = append(out, signing.SecretPrefix...)
	return base64.StdEncoding.AppendEncode(out, key), nil
}

func Same(a, b sensitive.Bytes) bool {
	return len(a) > 0 && hmac.Equal(a.Reveal(), b.Reveal())
}

// Previous is the signing secret a rotation replaced, and when.
type Previous struct {
	Value     sensitive.Bytes
	RotatedAt time.Time
}

// DecodePrevious reads a remembered rotation from a Secret's data; an
// absent, partial or invalid record reads as none.
func DecodePrevious(data map[string][]byte) *Previous {
	value, at := data[keyPreviousSigningSecret], data[keyRotatedAt]
	if len(value) == 0 || len(at) == 0 {
		return nil
	}
	canonical, err := canonicalSecret(value)
	if err != nil {
		return nil
	}
	rotatedAt, err := time.Parse(time.RFC3339Nano, string(at))
	if err != nil {
		return nil
	}
	return &Previous{Value: canonical, RotatedAt: rotatedAt}
}

// encodePrevious writes a remembered rotation into a Secret's data, or
// removes it when p is nil.
func encodePrevious(data map[string][]byte, p *Previous) {
	if p == nil {
		delete(data, keyPreviousSigningSecret)
		delete(data, keyRotatedAt)
		return
	}
	data[keyPreviousSigningSecret] = append([]byte(nil), p.Value...)
	data[keyRotatedAt] = []byte(p.RotatedAt.UTC().Format(time.RFC3339Nano))
}

// RotationInput is what PlanRotation decides from.
type RotationInput struct {
	// Current is the valid, canonical secret the endpoint's Secret holds.
	Current sensitive.Bytes
	// Remembered is the rotation remembered in a Secret, if any.
	Remembered *Previous
	// Registered is the current secret of the configuration the engine
	// has; nil when the endpoint is not registered.
	Registered sensitive.Bytes
	Grace      time.Duration
	Now        time.Time
}

// RotationPlan is what the engine signs with and what to remember.
type RotationPlan struct {
	// Secrets for the engine: Current, then the previous secret while its
	// grace period lasts.
	Secrets []ledger.SigningSecret
	// Remember is a new rotation to write before registering.
	Remember *Previous
	// Forget is set when the remembered rotation is over (grace ended, or
	// the secret was rotated back) and should be erased.
	Forget bool
	// PreviousUntil is when the previous secret stops being valid; zero
	// when there is none.
	PreviousUntil time.Time
}

// PlanRotation decides which secrets the engine signs with.
func PlanRotation(in RotationInput) RotationPlan {
	plan := RotationPlan{Secrets: []ledger.SigningSecret{{Value: in.Current}}}
	prev := in.Remembered
	rotated := len(in.Registered) > 0 && !Same(in.Registered, in.Current) &&
		(prev == nil || !Same(prev.Value, in.Registered))
	if rotated {
		prev = &Previous{Value: in.Registered, RotatedAt: in.Now}
	}
	if prev == nil {
		return plan
	}
	until := prev.RotatedAt.Add(in.Grace)
	if Same(prev.Value, in.Current) || in.Grace <= 0 || !in.Now.Before(until) {
		plan.Forget = in.Remembered != nil
		return plan
	}
	plan.Secrets = append(plan.Secrets, ledger.SigningSecret{Value: prev.Value, NotAfter: until})
	plan.PreviousUntil = until
	if rotated {
		plan.Remember = prev
	}
	return plan
}

// CurrentOf is the secret the engine signs with of those registered: the
// one without an end.
func CurrentOf(secrets []ledger.SigningSecret) sensitive.Bytes {
	for _, s := range secrets {
		if s.NotAfter.IsZero() {
			return s.Value
		}
	}
	return nil
}

// GracePeriod is how long an endpoint's previous secret still signs.
func GracePeriod(ep *hookv1.WebhookEndpoint) time.Duration {
	if g := ep.Spec.SigningRotationGracePeriod; g != nil {
		return g.Duration
	}
	return DefaultRotationGracePeriod
}
