package webhookendpoint

import (
	"fmt"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/controllers/signingsecret"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// engineAction is what the reconciler does to the engine's configuration.
type engineAction int

const (
	// actionSkip leaves the engine's configuration as it is: it is current,
	// or the spec cannot be used and the engine keeps what it had.
	actionSkip engineAction = iota
	// actionPause pauses the configuration the engine has: the spec can
	// never be sent, or its destination is forbidden. Deliveries wait.
	actionPause
	// actionRegister registers Desired.
	actionRegister
)

func (a engineAction) String() string {
	return [...]string{"skip", "pause", "register"}[a]
}

// endpointDecision is what decideEndpoint chose.
type endpointDecision struct {
	Action engineAction
	// Problem is why the current spec is not in effect; nil when it is.
	Problem *conditions.Problem
	// Internal is set when Problem is an internal error: the reconcile is
	// retried and observedGeneration does not advance.
	Internal bool
	// Held is set when Problem is and Desired is registered all the same,
	// paused (credentials that cannot be read: its deliveries wait) or
	// receiving nothing (a filter that does not compile).
	Held bool
	// Waiting is set when the endpoint waits for the signing-secret
	// controller (its generated secret, or the record of a rotation): the
	// engine keeps what it has and Ready says what it said.
	Waiting bool
	// Desired is the configuration for the engine when Problem is nil.
	Desired ledger.Endpoint
	// Rotation says which secrets the engine signs with; set when Problem
	// is nil.
	Rotation signingsecret.RotationPlan
	// Probe is the probe request to act on (breaker.go); nil when
	// there is none new.
	Probe *probeRequest
}

// decideEndpoint decides what the engine should have of an endpoint
// (decideEngine) and which probe request to act on (decideProbe), unless
// gathering failed: then the request waits for the retried reconcile.
func decideEndpoint(obs *endpointObservation) endpointDecision {
	d := decideEngine(obs)
	if obs.Err == nil {
		d.Probe = decideProbe(obs.Endpoint)
	}
	return d
}

// matchNothing is the filter an endpoint whose spec.filter does not compile
// is registered with: it receives nothing until the filter is corrected.
const matchNothing = "false"

// decideEngine decides what the engine should have of an endpoint. The
// first problem wins, in this order: an internal error while gathering, a
// spec the operator could not decode (what was left out would read as
// unset), a spec that can never be sent or a forbidden destination (the
// only problems that pause what the engine has), then an unusable
// RetryPolicy, then an unusable signing secret; each but the third leaves
// the engine's configuration as it was. A secret the signing-secret
// controller still owes the endpoint is waited for (or, in a namespace
// being deleted, a problem). Credentials that cannot be read and a filter
// that does not compile are problems of their own: the endpoint is
// registered all the same (Held), paused or matching nothing; a filter over
// its budget is registered as it is (Held). Otherwise
// the endpoint is registered unless the engine already has exactly its
// configuration.
func decideEngine(obs *endpointObservation) endpointDecision {
	ep, reg := obs.Endpoint, obs.Registered
	switch {
	case obs.Err != nil:
		return errorDecision(obs)
	case len(ep.Undecodable) > 0:
		return endpointDecision{Problem: &conditions.Problem{Reason: hookv1.ReasonInvalidSpec, Message: conditions.Undecodable(ep.Undecodable)}}
	case obs.SendProblem != nil:
		d := endpointDecision{Problem: obs.SendProblem}
		if reg != nil && !reg.Paused {
			d.Action = actionPause
		}
		return d
	case obs.PolicyProblem != nil:
		return endpointDecision{Problem: obs.PolicyProblem}
	case obs.Signing.Problem != nil:
		return endpointDecision{Problem: obs.Signing.Problem}
	case secretOwed(obs) && obs.NamespaceTerminating:
		return endpointDecision{Problem: &conditions.Problem{Reason: hookv1.ReasonNamespaceTerminating, Message: fmt.Sprintf(
			"namespace %q is being deleted and refuses new objects: the endpoint's signing Secret is not written, and the endpoint goes with the namespace", ep.Namespace)}}
	case secretOwed(obs):
		return endpointDecision{Waiting: true}
	}

	d := endpointDecision{Rotation: signingsecret.PlanRotation(rotationOf(obs))}
	d.Desired = endpointConfig(ep, obs.Policy, d.Rotation.Secrets)
	d.Desired.Credentials = obs.Credentials.Set
	switch {
	case obs.Credentials.Problem != nil:
		// Registered paused rather than left as it was: events published
		// meanwhile get deliveries, which wait for the Secret.
		d.Problem, d.Held = obs.Credentials.Problem, true
		d.Desired.Paused, d.Desired.Credentials = true, nil
	case obs.FilterProblem != nil:
		d.Problem, d.Held = obs.FilterProblem, true
		d.Desired.Filter = matchNothing
	case obs.FilterOverBudget != nil:
		// Registered as it is: the filter still decides the events it
		// can within budget, and its cost falls on its own namespace.
		d.Problem, d.Held = obs.FilterOverBudget, true
	}
	if reg == nil || !sameConfig(d.Desired, *reg) {
		d.Action = actionRegister
	}
	return d
}

// errorDecision is the decision when gathering failed: the engine keeps
// what it has. A namespace being deleted is not an error: the endpoint
// goes with it.
func errorDecision(obs *endpointObservation) endpointDecision {
	se, ok := obs.Err.(*stepError)
	if !ok {
		se = &stepError{"reconciling", obs.Err}
	}
	if conditions.NamespaceTerminating(obs.Err) {
		return endpointDecision{Problem: &conditions.Problem{Reason: hookv1.ReasonNamespaceTerminating, Message: fmt.Sprintf(
			"namespace %q is being deleted and refuses new objects: %s is not done, and the endpoint goes with the namespace", obs.Endpoint.Namespace, se.step)}}
	}
	return endpointDecision{Internal: true, Problem: &conditions.Problem{Reason: hookv1.ReasonInternalError, Message: se.step + " failed; the operator's log has the details"}}
}

// rotationOf is the rotation input of the observed endpoint.
func rotationOf(obs *endpointObservation) signingsecret.RotationInput {
	var registered sensitive.Bytes
	if obs.Registered != nil {
		registered = signingsecret.CurrentOf(obs.Registered.Secrets)
	}
	return signingsecret.RotationInput{
		Current: obs.Signing.Current, Remembered: obs.Signing.Remembered, Registered: registered,
		Grace: signingsecret.GracePeriod(obs.Endpoint), Now: obs.Now,
	}
}

// rotationUnrecorded reports whether the engine signs with a secret the
// endpoint's Secret no longer holds and no Secret remembers yet: the
// signing-secret controller records it before the engine may forget it.
func rotationUnrecorded(obs *endpointObservation) bool {
	if obs.Signing.Problem != nil || obs.Signing.Owed || obs.Registered == nil {
		return false
	}
	return signingsecret.PlanRotation(rotationOf(obs)).Remember != nil
}
