package controllers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/destination"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// endpointFinalizer holds a WebhookEndpoint until the engine has removed
// it (cancelling its pending deliveries; their history stays).
const endpointFinalizer = "hookkeeper.dev/endpoint"

// Defaults of the reconciler's tunables.
const (
	defaultResyncPeriod  = 30 * time.Second
	defaultEventInterval = time.Minute
)

// EndpointEngine is what the WebhookEndpoint controller asks of the
// delivery engine (*engine.Engine).
type EndpointEngine interface {
	Endpoint(ctx context.Context, id string) (ledger.Endpoint, error)
	RegisterEndpoint(ctx context.Context, ep ledger.Endpoint) (ledger.Endpoint, error)
	RemoveEndpoint(ctx context.Context, id string) (int, error)
	EndpointStats(ctx context.Context, id string) (ledger.EndpointStats, error)
	ExhaustedList(ctx context.Context, params *ledger.ExhaustedListParams) ([]ledger.ExhaustedDelivery, error)
}

// WebhookEndpointReconciler registers WebhookEndpoints with the delivery
// engine and writes what the engine knows of them into their status.
//
// Each reconcile gathers (the RetryPolicy, the signing Secret, the
// engine's registered configuration), decides what the engine should have
// (decideEndpoint: register, pause or leave it), does that, reads the
// engine's counters and exhausted deliveries, computes the status with
// webhookEndpointStatus and writes it once. A missing or unusable
// RetryPolicy or signing secret leaves the engine's configuration as it
// was; a url or header that can never be sent (endpoint_wire.go) or a
// forbidden destination (webhookendpoint_destination.go) pauses it. The
// signing Secrets are signingSecrets' to write.
type WebhookEndpointReconciler struct {
	client.Client
	// APIReader reads Secrets from the API server: Secrets are watched by
	// metadata only, so the cache does not hold their data.
	APIReader client.Reader
	Engine    EndpointEngine
	// Recorder emits the DeliveriesExhausted Events.
	Recorder events.EventRecorder
	// DefaultPolicy applies to endpoints without spec.retryPolicyRef
	// (DefaultPolicy() unless the manager chose another).
	DefaultPolicy ledger.Policy
	// Exhausted delivers the engine's exhaustion notices
	// (ExhaustionEvents.Events); nil means periodic refreshes only.
	Exhausted <-chan event.GenericEvent
	// ResyncPeriod paces the refresh of the counters: every endpoint is
	// reconciled again after between one and two periods (default 30s).
	ResyncPeriod time.Duration
	// EventInterval is the least time between two DeliveriesExhausted
	// Events of an endpoint while its count grows (default 1m).
	EventInterval time.Duration
	// Clock stamps conditions; nil means the real clock.
	Clock clock.PassiveClock
	// Evidence reads the ledger's outcome buckets for status.evidence
	// (retrypolicy_evidence.go); nil shows none.
	Evidence ledger.Evidence
	// Destinations is the operator's destination policy: an endpoint whose
	// url is or resolves to a forbidden address is not Ready
	// (DestinationForbidden) and is not registered, or is paused when the
	// engine already had it. nil checks nothing; the manager always sets
	// it, and the engine's sender enforces the same policy at dial time.
	Destinations *destination.Policy
	// DestinationLookupTimeout bounds the DNS lookup of an endpoint's host
	// (default 2s); a failed lookup is not a refusal.
	DestinationLookupTimeout time.Duration

	secrets  *signingSecrets
	mu       sync.Mutex
	memos    map[types.UID]*exhaustionMemo
	verdicts destinationVerdicts
}

func (r *WebhookEndpointReconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// +kubebuilder:rbac:groups=hookkeeper.dev,resources=webhookendpoints,verbs=list;watch;patch
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=webhookendpoints/status,verbs=update
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=webhookendpoints/finalizers,verbs=update
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=retrypolicies,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile registers the endpoint with the engine (or removes it once the
// endpoint is deleted) and writes its status.
func (r *WebhookEndpointReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	return requeueOnConflict(ctx, res, err)
}

func (r *WebhookEndpointReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ep hookv1.WebhookEndpoint
	if err := r.Get(ctx, req.NamespacedName, &ep); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ep.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, &ep)
	}
	if !controllerutil.ContainsFinalizer(&ep, endpointFinalizer) {
		orig := ep.DeepCopy()
		controllerutil.AddFinalizer(&ep, endpointFinalizer)
		if err := r.Patch(ctx, &ep, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
	}

	now := r.now()
	announceInvalidSpec(r.Recorder, &ep, ep.Undecodable)
	before := ep.DeepCopy()
	facts, syncErr := r.sync(ctx, &ep, now)
	ep.Status = webhookEndpointStatus(&ep, facts, now)
	syncErr = errors.Join(syncErr, r.setEndpointEvidence(ctx, &ep, before, now), r.setRetryBudgetCondition(ctx, &ep, before, now))
	if err := updateStatus(ctx, r.Client, before, &ep, func(e *hookv1.WebhookEndpoint) any { return e.Status }); err != nil {
		if apierrors.IsNotFound(err) || statusRefusedForInvalidSpec(ctx, err, ep.DecodeError()) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, errors.Join(syncErr, err)
	}
	if syncErr != nil {
		return ctrl.Result{}, syncErr
	}
	if facts.Deliveries != nil {
		r.announce(&ep, before, facts.Deliveries, now)
	}
	return ctrl.Result{RequeueAfter: r.requeueAfter(facts, now)}, nil
}

// sync brings the engine in line with the endpoint and returns the facts
// its status is computed from: it gathers the inputs, decides the engine's
// action (decideEndpoint), applies it, and observes the endpoint's
// deliveries. An error is internal (the API server or the engine failed):
// the facts then say so and the reconcile is retried.
func (r *WebhookEndpointReconciler) sync(ctx context.Context, ep *hookv1.WebhookEndpoint, now time.Time) (*endpointFacts, error) {
	f := &endpointFacts{}
	in, err := r.gather(ctx, ep, f, now)
	if err == nil {
		d := decideEndpoint(in)
		f.Problem = d.Problem
		if err = r.apply(ctx, in, &d, f); err == nil && f.Registered {
			inEffect := d.Desired.Policy
			if d.Problem != nil {
				inEffect = in.Registered.Policy
			}
			f.Deliveries, err = r.observe(ctx, ep, inEffect, now)
		} else if err == nil {
			f.Deliveries = &deliveryFacts{}
		}
	}
	if err == nil {
		return f, nil
	}
	var se *stepError
	if !errors.As(err, &se) {
		se = &stepError{"reconciling", err}
	}
	if namespaceTerminating(err) {
		// Not an error: the endpoint goes with its namespace.
		log.FromContext(ctx).V(1).Info("the namespace is being deleted", "step", se.step)
		f.Problem = &problem{hookv1.ReasonNamespaceTerminating, fmt.Sprintf(
			"namespace %q is being deleted and refuses new objects: %s is not done, and the endpoint goes with the namespace", ep.Namespace, se.step)}
		return f, nil
	}
	f.Problem = &problem{hookv1.ReasonInternalError, se.step + " failed; the operator's log has the details"}
	f.Incomplete = true
	return f, err
}

// stepError is an internal error and the step of sync it cut short.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.step + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// gather reads what the engine's action is decided from: the engine's
// configuration of the endpoint, its RetryPolicy, its signing secret
// (signingSecrets generates the Secret the endpoint is owed), and whether
// its spec can be sent to an allowed destination.
func (r *WebhookEndpointReconciler) gather(ctx context.Context, ep *hookv1.WebhookEndpoint, f *endpointFacts, now time.Time) (*endpointInputs, error) {
	in := &endpointInputs{Endpoint: ep, Grace: rotationGrace(ep), Now: now}
	registered, err := r.Engine.Endpoint(ctx, ledger.EndpointID(ep.Namespace, ep.Name))
	switch {
	case errors.Is(err, ledger.ErrNotFound):
	case err != nil:
		return nil, &stepError{"reading the endpoint's configuration from the delivery engine", err}
	default:
		in.Registered = &registered
		f.Registered = true
	}
	var policyName string
	in.Policy, policyName, in.PolicyProblem, err = r.resolvePolicy(ctx, ep)
	if err != nil {
		return nil, &stepError{"reading the RetryPolicy", err}
	}
	f.PolicyName = policyName
	src, err := r.secrets.ensure(ctx, ep)
	f.SecretName = src.SecretName
	if err != nil {
		return nil, &stepError{"resolving the signing secret", err}
	}
	in.Signing = &src
	if in.SendProblem = wireProblem(&ep.Spec); in.SendProblem == nil {
		in.SendProblem = r.destinationProblem(ctx, ep.Spec.URL, now)
	}
	return in, nil
}

// apply performs the decision: it pauses what the engine has, or, when the
// spec goes into effect, records the rotation (signingSecrets) and then
// registers the endpoint if the engine's configuration differs.
func (r *WebhookEndpointReconciler) apply(ctx context.Context, in *endpointInputs, d *endpointDecision, f *endpointFacts) error {
	reg := in.Registered
	switch {
	case d.Action == actionPause:
		if err := r.hold(ctx, *reg); err != nil {
			return &stepError{"pausing the endpoint in the delivery engine", err}
		}
		reg.Paused = true
	case d.Problem == nil:
		if err := r.secrets.record(ctx, in.Signing, &d.Rotation); err != nil {
			return &stepError{"remembering the previous signing secret", err}
		}
		if d.Action == actionRegister {
			stored, err := r.Engine.RegisterEndpoint(ctx, d.Desired)
			if err != nil {
				return &stepError{"registering with the delivery engine", err}
			}
			log.FromContext(ctx).Info("registered with the delivery engine", "version", stored.Version, "secrets", len(d.Rotation.Secrets))
		}
		f.Registered = true
		f.PreviousSecretUntil = d.Rotation.PreviousUntil
	}
	f.RegisteredPaused = f.Problem != nil && reg != nil && reg.Paused
	return nil
}

// observe reads the endpoint's counters and unresolved exhausted
// deliveries from the engine; inEffect is the policy the engine applies.
func (r *WebhookEndpointReconciler) observe(ctx context.Context, ep *hookv1.WebhookEndpoint, inEffect ledger.Policy, now time.Time) (*deliveryFacts, error) {
	id := ledger.EndpointID(ep.Namespace, ep.Name)
	d := &deliveryFacts{ReplayWindow: inEffect.ReplayWindow}
	var err error
	d.Stats, err = r.Engine.EndpointStats(ctx, id)
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return nil, &stepError{"reading the endpoint's counters from the delivery engine", err}
	}
	d.Oldest, d.Recent, err = unresolvedExhausted(ctx, r.Engine.ExhaustedList, id, d.Stats.ExhaustedUnresolved, now, recentExhaustedMax)
	if err != nil {
		return nil, &stepError{"listing the endpoint's exhausted deliveries", err}
	}
	return d, nil
}

// resolvePolicy returns the engine policy of the endpoint: its RetryPolicy's
// when it references one that is Ready, else the operator's default. A
// reference that cannot be used is a problem, not an error.
func (r *WebhookEndpointReconciler) resolvePolicy(ctx context.Context, ep *hookv1.WebhookEndpoint) (ledger.Policy, string, *problem, error) {
	ref := ep.Spec.RetryPolicyRef
	if ref == nil {
		return r.DefaultPolicy, "", nil, nil
	}
	var rp hookv1.RetryPolicy
	if err := r.Get(ctx, types.NamespacedName{Namespace: ep.Namespace, Name: ref.Name}, &rp); err != nil {
		if apierrors.IsNotFound(err) {
			return ledger.Policy{}, ref.Name, &problem{hookv1.ReasonRetryPolicyNotFound, fmt.Sprintf("RetryPolicy %q not found", ref.Name)}, nil
		}
		return ledger.Policy{}, ref.Name, nil, err
	}
	if len(rp.Undecodable) > 0 {
		return ledger.Policy{}, ref.Name, &problem{hookv1.ReasonRetryPolicyNotReady, fmt.Sprintf("RetryPolicy %q is invalid: %s", ref.Name, undecodableMessage(rp.Undecodable))}, nil
	}
	if pr := policyReadiness(&rp); pr != nil {
		return ledger.Policy{}, ref.Name, pr, nil
	}
	p, err := policyConfig(&rp.Spec)
	if err != nil {
		return ledger.Policy{}, ref.Name, &problem{hookv1.ReasonRetryPolicyNotReady, fmt.Sprintf("RetryPolicy %q is invalid: %s", ref.Name, conditionMessage(err))}, nil
	}
	p.Name, p.Generation = ref.Name, rp.Generation // outcome evidence is kept per policy version
	return p, ref.Name, nil, nil
}

// policyReadiness is nil when the RetryPolicy's status says it is Ready for
// its current generation, else the problem.
func policyReadiness(rp *hookv1.RetryPolicy) *problem {
	ready := meta.FindStatusCondition(rp.Status.Conditions, hookv1.ConditionReady)
	switch {
	case ready == nil || rp.Status.ObservedGeneration != rp.Generation || ready.ObservedGeneration != rp.Generation:
		return &problem{hookv1.ReasonRetryPolicyNotReady, fmt.Sprintf("RetryPolicy %q has not been reconciled yet", rp.Name)}
	case ready.Status != metav1.ConditionTrue:
		return &problem{hookv1.ReasonRetryPolicyNotReady, fmt.Sprintf("RetryPolicy %q is not Ready (%s: %s)", rp.Name, ready.Reason, ready.Message)}
	}
	return nil
}

// finalize removes a deleted endpoint from the engine, cancelling its
// pending deliveries (their history stays), then lets it go.
func (r *WebhookEndpointReconciler) finalize(ctx context.Context, ep *hookv1.WebhookEndpoint) error {
	if !controllerutil.ContainsFinalizer(ep, endpointFinalizer) {
		return nil
	}
	cancelled, err := r.Engine.RemoveEndpoint(ctx, ledger.EndpointID(ep.Namespace, ep.Name))
	if err != nil {
		return err
	}
	log.FromContext(ctx).Info("removed from the delivery engine", "cancelledDeliveries", cancelled)
	r.mu.Lock()
	delete(r.memos, ep.UID)
	r.mu.Unlock()
	orig := ep.DeepCopy()
	controllerutil.RemoveFinalizer(ep, endpointFinalizer)
	if err := r.Patch(ctx, ep, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// announce emits the DeliveriesExhausted Event when exhaustionEvent says
// so. It runs after the status was written, so an Event never announces
// what the status does not show.
func (r *WebhookEndpointReconciler) announce(ep, before *hookv1.WebhookEndpoint, d *deliveryFacts, now time.Time) {
	interval := r.EventInterval
	if interval <= 0 {
		interval = defaultEventInterval
	}
	wasExhausted := meta.IsStatusConditionTrue(before.Status.Conditions, hookv1.ConditionDeliveriesExhausted)
	count := d.Stats.ExhaustedUnresolved

	r.mu.Lock()
	if r.memos == nil {
		r.memos = map[types.UID]*exhaustionMemo{}
	}
	emit, memo := exhaustionEvent(r.memos[ep.UID], wasExhausted, before.Status.Deliveries.ExhaustedUnresolved, count, now, interval)
	if memo == nil {
		delete(r.memos, ep.UID)
	} else {
		r.memos[ep.UID] = memo
	}
	r.mu.Unlock()

	if emit && r.Recorder != nil {
		r.Recorder.Eventf(ep, nil, corev1.EventTypeWarning, hookv1.ReasonDeliveriesExhausted, "Deliver", "%s", ownedMessage(exhaustionNote(count, d.Oldest), ep.Spec.Owner))
	}
}

// requeueAfter is when to look again: after a jittered resync period, or
// sooner when a rotation's previous secret expires, so that the engine
// drops it and the Secret forgets it.
func (r *WebhookEndpointReconciler) requeueAfter(f *endpointFacts, now time.Time) time.Duration {
	period := r.ResyncPeriod
	if period <= 0 {
		period = defaultResyncPeriod
	}
	after := period + rand.N(period)
	if !f.PreviousSecretUntil.IsZero() {
		after = min(after, max(f.PreviousSecretUntil.Sub(now)+time.Second, time.Second))
	}
	return after
}

// SetupWithManager registers the controller. It reconciles an endpoint when
// its spec changes (its own status writes do not requeue it), when its
// signing Secret, generated Secrets or RetryPolicy change, when the engine
// reports an exhaustion, and after every resync period.
func (r *WebhookEndpointReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	r.secrets = &signingSecrets{client: r.Client, reader: r.APIReader}
	if err := indexEndpoints(mgr, retryPolicyRefIndex, signingSecretRefIndex); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("webhookendpoint").
		For(&hookv1.WebhookEndpoint{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deletionStarted()))).
		Owns(&corev1.Secret{}, builder.OnlyMetadata).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.endpointsReferencing(signingSecretRefIndex)), builder.OnlyMetadata).
		Watches(&hookv1.RetryPolicy{}, handler.EnqueueRequestsFromMapFunc(r.endpointsReferencing(retryPolicyRefIndex)),
			builder.WithPredicates(policyReadinessChanged()))
	if r.Exhausted != nil {
		b = b.WatchesRawSource(source.Channel(r.Exhausted, &handler.EnqueueRequestForObject{}))
	}
	return b.Complete(r)
}

// endpointsReferencing maps an object to the endpoints of its namespace
// that name it, through the field index.
func (r *WebhookEndpointReconciler) endpointsReferencing(index string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var eps hookv1.WebhookEndpointList
		if err := r.List(ctx, &eps, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: o.GetName()}); err != nil {
			log.FromContext(ctx).Error(err, "listing the endpoints that reference an object", "index", index, "name", o.GetName())
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(eps.Items))
		for i := range eps.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&eps.Items[i])})
		}
		return reqs
	}
}

// deletionStarted passes the update that marks an object for deletion,
// whether or not the API server bumped its generation.
func deletionStarted() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
		},
	}
}

// policyReadinessChanged passes the RetryPolicy updates that can change
// what its endpoints get: a new spec, or a change of readiness. Its other
// status writes (such as the count of endpoints using it) do not wake every
// endpoint that uses it.
func policyReadinessChanged() predicate.Funcs {
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
func readinessKey(rp *hookv1.RetryPolicy) problem {
	if p := policyReadiness(rp); p != nil {
		return *p
	}
	return problem{}
}
