package controllers

import (
	"time"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// problem is why an endpoint's current spec is not in effect: a Ready=False
// reason and a message for humans.
type problem struct {
	Reason, Message string
}

// endpointInputs are the gathered facts the engine's action for an
// endpoint is decided from.
type endpointInputs struct {
	Endpoint *hookv1.WebhookEndpoint
	// Registered is the configuration the engine has; nil when none.
	Registered *ledger.Endpoint
	// Policy is the resolved retry policy; PolicyProblem why there is none.
	Policy        ledger.Policy
	PolicyProblem *problem
	// Signing is the endpoint's signing secret as its Secret holds it.
	Signing *signingSource
	// SendProblem is why the spec can never be sent or its destination is
	// forbidden (endpoint_wire.go, webhookendpoint_destination.go).
	SendProblem *problem
	// Grace is the rotation grace period; Now the reconcile's time.
	Grace time.Duration
	Now   time.Time
}

// engineAction is what the reconciler does to the engine's configuration.
type engineAction int

const (
	// actionSkip leaves the engine's configuration as it is: it is current,
	// or the spec cannot be used and the engine keeps what it had.
	actionSkip engineAction = iota
	// actionPause pauses the configuration the engine has: the spec can
	// never be sent, or its destination is forbidden. Deliveries wait.
	actionPause
	// actionRegister registers Desired, after recording the rotation.
	actionRegister
)

func (a engineAction) String() string {
	return [...]string{"skip", "pause", "register"}[a]
}

// endpointDecision is what decideEndpoint chose.
type endpointDecision struct {
	Action engineAction
	// Problem is why the current spec is not in effect; nil when it is.
	Problem *problem
	// Desired is the configuration for the engine when Problem is nil.
	Desired ledger.Endpoint
	// Rotation says which secrets the engine signs with and what to
	// remember of a rotation; set when Problem is nil.
	Rotation rotationPlan
}

// decideEndpoint decides what the engine should have of an endpoint. The
// first problem wins, in this order: a spec the operator could not decode
// (what was left out would read as unset), a spec that can never be sent
// or a forbidden destination (the only problems that pause what the engine
// has), then an unusable RetryPolicy, then an unusable signing secret;
// each but the second leaves the engine's configuration as it was. With no
// problem the endpoint is registered unless the engine already has exactly
// its configuration.
func decideEndpoint(in *endpointInputs) endpointDecision {
	ep, reg := in.Endpoint, in.Registered
	switch {
	case len(ep.Undecodable) > 0:
		return endpointDecision{Problem: &problem{hookv1.ReasonInvalidSpec, undecodableMessage(ep.Undecodable)}}
	case in.SendProblem != nil:
		d := endpointDecision{Problem: in.SendProblem}
		if reg != nil && !reg.Paused {
			d.Action = actionPause
		}
		return d
	case in.PolicyProblem != nil:
		return endpointDecision{Problem: in.PolicyProblem}
	case in.Signing.Problem != nil:
		return endpointDecision{Problem: in.Signing.Problem}
	}

	var current sensitive.Bytes
	if reg != nil {
		current = currentSecret(reg.Secrets)
	}
	d := endpointDecision{Rotation: planRotation(rotationInput{
		Current: in.Signing.Current, Remembered: in.Signing.Remembered, Registered: current,
		Grace: in.Grace, Now: in.Now,
	})}
	d.Desired = endpointConfig(ep, in.Policy, d.Rotation.Secrets)
	if reg == nil || !sameConfig(d.Desired, *reg) {
		d.Action = actionRegister
	}
	return d
}

func currentSecret(secrets []ledger.SigningSecret) sensitive.Bytes {
	for _, s := range secrets {
		if s.NotAfter.IsZero() {
			return s.Value
		}
	}
	return nil
}

func rotationGrace(ep *hookv1.WebhookEndpoint) time.Duration {
	if g := ep.Spec.SigningRotationGracePeriod; g != nil {
		return g.Duration
	}
	return defaultRotationGracePeriod
}
