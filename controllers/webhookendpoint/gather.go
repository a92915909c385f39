package webhookendpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/controllers/ledgerread"
	"github.com/hookkeeper/hookkeeper/controllers/retrypolicy"
	"github.com/hookkeeper/hookkeeper/controllers/signingsecret"
	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// endpointObservation is everything one reconcile of an endpoint reads:
// the only I/O before the decision. decideEndpoint and the status
// functions are pure functions of it.
type endpointObservation struct {
	// Endpoint is the object as read; Now the reconcile's time.
	Endpoint *hookv1.WebhookEndpoint
	Now      time.Time
	// Registered is the configuration the engine has; nil when none.
	Registered *ledger.Endpoint
	// Policy is the resolved retry policy (PolicyName the referenced
	// RetryPolicy, empty for the default); PolicyProblem why there is none.
	Policy        ledger.Policy
	PolicyName    string
	PolicyProblem *conditions.Problem
	// Signing is the endpoint's signing secret as its Secrets hold it.
	Signing signingsecret.Source
	// Credentials are the values spec.headers[].valueFrom, spec.auth and
	// spec.tls name, or why they cannot be read.
	Credentials credentialSource
	// FilterProblem is why spec.filter cannot be used; nil when it can (or
	// there is none).
	FilterProblem *conditions.Problem
	// FilterOverBudget is why spec.filter, usable, is over its budget
	// (filter.go); nil when it is not.
	FilterOverBudget *conditions.Problem
	// FilterOverruns is what the current filter exceeded on this replica
	// since the spec last changed; nil when nothing.
	FilterOverruns *engine.FilterOverruns
	// SendProblem is why the spec can never be sent or its destination is
	// forbidden (wire.go, destination.go).
	SendProblem *conditions.Problem
	// NamespaceTerminating is set when a Secret the endpoint is owed is
	// missing and its namespace is being deleted: nothing will create it.
	NamespaceTerminating bool
	// Deliveries are the engine's counters and exhausted deliveries of the
	// endpoint; nil when they could not be read.
	Deliveries *deliveryFacts
	// Deferrals is the endpoint's latest streak of retries deferred by its
	// retry budget, on any replica; nil when it could not be read.
	Deferrals *ledger.DeferralStreak
	// Breaker is the endpoint's circuit breaker as the ledger holds it
	// (the zero breaker when it never opened); nil when it could not be
	// read.
	Breaker *ledger.Breaker
	// Evidence are the endpoint's outcome buckets of the last 7 days;
	// EvidenceRead is false when there is no source or the read failed.
	Evidence     []ledger.OutcomeBucket
	EvidenceRead bool
	// Memo is what was last announced of the endpoint's exhaustions.
	Memo *exhaustionMemo
	// Err is the internal error that cut the gathering short (a
	// *stepError); what follows it was not read.
	Err error
	// Secondary joins the failures of reads the status can do without
	// (evidence, deferrals): what they feed keeps what it showed.
	Secondary error
}

// stepError is an internal error and the step of the reconcile it cut
// short.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.step + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// gather reads what the reconcile decides from. It stops at the first
// read the decision cannot do without; the rest are read whatever.
func (r *WebhookEndpointReconciler) gather(ctx context.Context, ep *hookv1.WebhookEndpoint, now time.Time) *endpointObservation {
	obs := &endpointObservation{Endpoint: ep, Now: now, Memo: r.memo(ep.UID)}
	obs.Err = r.gatherEngineInputs(ctx, obs)
	if obs.Err == nil {
		obs.Err = r.gatherDeliveries(ctx, obs)
	}
	r.gatherSecondary(ctx, obs)
	return obs
}

// gatherEngineInputs reads what the engine's action is decided from: the
// engine's configuration of the endpoint, its RetryPolicy, its signing
// secret, and whether its spec can be sent to an allowed destination.
func (r *WebhookEndpointReconciler) gatherEngineInputs(ctx context.Context, obs *endpointObservation) error {
	ep := obs.Endpoint
	registered, err := r.Ledger.EndpointGet(ctx, ledger.EndpointID(ep.Namespace, ep.Name))
	switch {
	case errors.Is(err, ledger.ErrNotFound):
	case err != nil:
		return &stepError{"reading the endpoint's configuration from the delivery engine", err}
	default:
		obs.Registered = &registered
	}
	obs.Policy, obs.PolicyName, obs.PolicyProblem, err = r.resolvePolicy(ctx, ep)
	if err != nil {
		return &stepError{"reading the RetryPolicy", err}
	}
	obs.Signing, err = signingsecret.Read(ctx, r.contentReader(), ep)
	if err != nil {
		return &stepError{"reading the signing secret", err}
	}
	obs.Credentials, err = readCredentials(ctx, r.contentReader(), ep)
	if err != nil {
		return &stepError{"reading the endpoint's credentials", err}
	}
	if secretOwed(obs) {
		if obs.NamespaceTerminating, err = r.namespaceTerminating(ctx, ep.Namespace); err != nil {
			return &stepError{"reading the endpoint's namespace", err}
		}
	}
	obs.FilterProblem = filterProblem(&ep.Spec)
	if obs.FilterProblem == nil && ep.Spec.Filter != "" {
		o, ok := r.Engine.EndpointFilterOverruns(ledger.EndpointID(ep.Namespace, ep.Name))
		var seen *engine.FilterOverruns
		if ok && o.Filter == ep.Spec.Filter {
			seen = &o
		}
		obs.FilterOverruns = seen
		obs.FilterOverBudget = filterOverBudget(meta.FindStatusCondition(ep.Status.Conditions, hookv1.ConditionReady), ep.Generation, seen)
	}
	if obs.SendProblem = wireProblem(&ep.Spec); obs.SendProblem == nil {
		obs.SendProblem = r.destinationProblem(ctx, ep.Spec.URL)
	}
	return nil
}

// gatherDeliveries reads the endpoint's counters and unresolved exhausted
// deliveries from the engine.
func (r *WebhookEndpointReconciler) gatherDeliveries(ctx context.Context, obs *endpointObservation) error {
	id := ledger.EndpointID(obs.Endpoint.Namespace, obs.Endpoint.Name)
	d := &deliveryFacts{}
	var err error
	d.Stats, err = r.Ledger.EndpointStats(ctx, id)
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return &stepError{"reading the endpoint's counters from the delivery engine", err}
	}
	d.Oldest, d.Recent, err = unresolvedExhausted(ctx, r.Ledger.ExhaustedList, id, d.Stats.ExhaustedUnresolved, obs.Now, recentExhaustedMax)
	if err != nil {
		return &stepError{"listing the endpoint's exhausted deliveries", err}
	}
	if d.Waiting, err = r.Engine.Waiting(ctx, id); err != nil {
		return &stepError{"reading the endpoint's throttled backlog", err}
	}
	obs.Deliveries = d
	return nil
}

// gatherSecondary reads the retry-budget deferrals, the circuit breaker
// and the outcome evidence; a failed read leaves what it feeds as it was.
func (r *WebhookEndpointReconciler) gatherSecondary(ctx context.Context, obs *endpointObservation) {
	id := ledger.EndpointID(obs.Endpoint.Namespace, obs.Endpoint.Name)
	if streak, err := ledgerread.Deferrals(ctx, r.Ledger, id, obs.Now); err != nil {
		obs.Secondary = errors.Join(obs.Secondary, fmt.Errorf("reading the endpoint's retry-budget deferrals: %w", err))
	} else {
		obs.Deferrals = &streak
	}
	switch b, err := ledgerread.Breaker(ctx, r.Ledger, id); {
	case errors.Is(err, ledger.ErrNotFound):
		obs.Breaker = &ledger.Breaker{EndpointID: id}
	case err != nil:
		obs.Secondary = errors.Join(obs.Secondary, fmt.Errorf("reading the endpoint's circuit breaker: %w", err))
	default:
		obs.Breaker = &b
	}
	buckets, err := retrypolicy.ReadEvidence(ctx, r.Ledger, ledger.OutcomeListParams{EndpointID: id}, obs.Now)
	if err != nil {
		obs.Secondary = errors.Join(obs.Secondary, err)
		return
	}
	obs.Evidence, obs.EvidenceRead = buckets, true
}

// secretOwed reports whether the endpoint waits for the signing-secret
// controller: for its generated secret, or for the record of a rotation
// that must be remembered before the engine is told of it.
func secretOwed(obs *endpointObservation) bool {
	return obs.Signing.Owed || rotationUnrecorded(obs)
}

// namespaceTerminating reports whether the namespace is being deleted: it
// refuses new objects, so a Secret the endpoint is owed never comes.
func (r *WebhookEndpointReconciler) namespaceTerminating(ctx context.Context, name string) (bool, error) {
	var ns corev1.Namespace
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return !ns.DeletionTimestamp.IsZero() || ns.Status.Phase == corev1.NamespaceTerminating, nil
}

// resolvePolicy returns the engine policy of the endpoint: its RetryPolicy's
// when it references one that is Ready, else the operator's default. A
// reference that cannot be used is a problem, not an error.
func (r *WebhookEndpointReconciler) resolvePolicy(ctx context.Context, ep *hookv1.WebhookEndpoint) (ledger.Policy, string, *conditions.Problem, error) {
	ref := ep.Spec.RetryPolicyRef
	if ref == nil {
		return r.DefaultPolicy, "", nil, nil
	}
	p, pr, err := retrypolicy.Named(ctx, r.Client, ep.Namespace, ref.Name)
	return p, ref.Name, pr, err
}
