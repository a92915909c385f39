package webhookendpoint

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
	"sigs.k8s.io/controller-runtime/pkg/source"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/controllers/index"
	"github.com/hookkeeper/hookkeeper/controllers/ledgerread"
	"github.com/hookkeeper/hookkeeper/controllers/retrypolicy"
	"github.com/hookkeeper/hookkeeper/internal/destination"
	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// endpointFinalizer holds a WebhookEndpoint until the engine has removed
// it (cancelling its pending deliveries; their history stays).
const endpointFinalizer = "hookkeeper.dev/endpoint"

// Defaults of the reconciler's tunables.
const (
	defaultEventInterval = time.Minute
	// waitingRetry is how soon an endpoint waiting for its signing Secret
	// looks again if the Secret's write did not wake it.
	waitingRetry = 2 * time.Second
)

// EndpointEngine is what the WebhookEndpoint controller asks of the
// delivery engine (*engine.Engine).
type EndpointEngine interface {
	RegisterEndpoint(ctx context.Context, ep ledger.Endpoint) (ledger.Endpoint, error)
	RemoveEndpoint(ctx context.Context, id string) (int, error)
	// Waiting reads the endpoint's throttled backlog (deliveries due and
	// not sent), from a read of the ledger shared by every endpoint.
	Waiting(ctx context.Context, id string) (ledger.Waiting, error)
	// ProbeNow makes the next probe of an open circuit breaker due now.
	ProbeNow(ctx context.Context, endpointID string) (ledger.Breaker, error)
	// EndpointFilterOverruns reads what the endpoint's filter exceeded on
	// this replica since its configuration last changed.
	EndpointFilterOverruns(endpointID string) (engine.FilterOverruns, bool)
}

// WebhookEndpointReconciler registers WebhookEndpoints with the delivery
// engine and writes what the engine knows of them into their status.
//
// Each reconcile gathers one observation (gather.go: the
// RetryPolicy, the signing Secrets, the engine's configuration, counters,
// exhausted deliveries and retry-budget deferrals, the circuit breaker, the
// outcome evidence, the destination check), decides purely what the engine
// should have (decideEndpoint: register, pause or leave it; a probe
// request to act on), does that, writes the status computed from the
// observation once (endpointStatus), and then emits the Events decided
// from it (endpointEvents, breakerEvents) and sets the circuit metrics
// (breaker.go). A missing or
// unusable RetryPolicy or signing secret leaves the engine's
// configuration as it was; a url or header that can never be sent
// (wire.go) or a forbidden destination
// (destination.go) pauses it. It only reads Secrets: the
// SigningSecretReconciler writes them.
type WebhookEndpointReconciler struct {
	client.Client
	// APIReader reads Secrets and ConfigMaps from the API server: they are
	// watched by metadata only, so the manager's cache does not hold their
	// data. The reconcile reads one only when its resourceVersion in the
	// metadata cache moved from the one it keeps the content of
	// (contentcache.go).
	APIReader client.Reader
	// ContentCacheSize bounds how many Secrets and ConfigMaps the content
	// cache keeps (default 16384), least recently used first out.
	ContentCacheSize int
	Engine           EndpointEngine
	// Recorder emits the endpoint's Events.
	Recorder events.EventRecorder
	// DefaultPolicy applies to endpoints without spec.retryPolicyRef
	// (retrypolicy.DefaultPolicy() unless the manager chose another).
	DefaultPolicy ledger.Policy
	// Exhausted delivers the engine's exhaustion notices
	// (ExhaustionEvents.Events), so that an exhaustion shows at once; nil
	// leaves it to the activity poller.
	Exhausted <-chan event.GenericEvent
	// Breakers delivers the engine's circuit-breaker changes
	// (BreakerEvents.Events), so that CircuitOpen follows the breaker
	// within moments; nil leaves it to the activity poller.
	Breakers <-chan event.GenericEvent
	// FilterOverruns delivers the engine's filter-overrun notices
	// (FilterOverrunEvents.Events), so that FilterOverBudget shows within
	// moments; nil leaves it to the next reconcile.
	FilterOverruns <-chan event.GenericEvent
	// Metrics keeps the circuit metrics (NewBreakerMetrics); nil keeps
	// none.
	Metrics *BreakerMetrics
	// Ledger is the controllers' one read of the ledger (ledgerread): the
	// engine's configuration of the endpoint, its counters, exhausted
	// deliveries, retry-budget deferrals, circuit breaker and outcome
	// evidence, and which endpoints' counters moved. Required.
	Ledger ledgerread.Reader
	// ActivityInterval is how often a poller (activity.go, on the leader)
	// reads which endpoints' counters moved and refreshes them (default
	// 5s); negative: no poller, and counters show only on the engine's
	// notices and the resync.
	ActivityInterval time.Duration
	// ResyncPeriod is the safety resync: every endpoint is reconciled
	// again between one and two periods after its last reconcile (default
	// 1h), or sooner when its status changes with time
	// (refresh.go).
	ResyncPeriod time.Duration
	// EventInterval is the least time between two DeliveriesExhausted
	// Events of an endpoint while its count grows (default 1m).
	EventInterval time.Duration
	// CounterWriteInterval is the least time between two status writes of
	// an endpoint whose status changed only in its fast-moving counters
	// (delivered total, last success, evidence: counterFields in
	// counters.go); default 1m. Any other change is
	// written at once, with the counters.
	CounterWriteInterval time.Duration
	// Clock stamps conditions; nil means the real clock.
	Clock clock.PassiveClock
	// Destinations is the operator's destination policy: an endpoint whose
	// url is or resolves to a forbidden address is not Ready
	// (DestinationForbidden) and is not registered, or is paused when the
	// engine already had it. nil checks nothing; the manager always sets
	// it, and the engine's sender enforces the same policy at dial time.
	Destinations *destination.Policy
	// DestinationLookupTimeout bounds the DNS lookup of an endpoint's host
	// (default 2s); a failed lookup is not a refusal.
	DestinationLookupTimeout time.Duration

	mu    sync.Mutex
	memos map[types.UID]*exhaustionMemo
	// overrunMemos is what was last announced of each endpoint's filter
	// overruns.
	overrunMemos map[types.UID]*overrunMemo
	verdicts     destinationVerdicts
	// counterWrites is when each endpoint's status was last written by
	// this process (counters.go).
	counterWrites map[types.UID]time.Time
	// content keeps the Secrets and ConfigMaps read, and reader reads
	// through it (contentcache.go); nil until SetupWithManager.
	content *contentCache
	reader  *contentReader
}

// contentReader is what the reconcile reads Secrets and ConfigMaps
// through: the content cache once SetupWithManager gave it the metadata
// cache, else the API reader.
func (r *WebhookEndpointReconciler) contentReader() client.Reader {
	if r.reader == nil {
		return r.APIReader
	}
	return r.reader
}

func (r *WebhookEndpointReconciler) now() time.Time { return r.clock().Now() }

// clock is r.Clock, or the real clock.
func (r *WebhookEndpointReconciler) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

// +kubebuilder:rbac:groups=hookkeeper.dev,resources=webhookendpoints,verbs=list;watch;patch
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=webhookendpoints/status,verbs=update
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=webhookendpoints/finalizers,verbs=update
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=retrypolicies,verbs=list;watch
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=deliveryrecoveries,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile registers the endpoint with the engine (or removes it once the
// endpoint is deleted) and writes its status.
func (r *WebhookEndpointReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	return conditions.RequeueOnConflict(ctx, res, err)
}

func (r *WebhookEndpointReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ep hookv1.WebhookEndpoint
	if err := r.Get(ctx, req.NamespacedName, &ep); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.forget(req.Namespace, req.Name)
		}
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
	before := ep.DeepCopy()
	obs := r.gather(ctx, before, now)
	d := decideEndpoint(obs)
	applyErr := r.apply(ctx, obs, &d)
	breaker, probeErr := r.requestProbe(ctx, obs, &d)
	f := endpointFactsOf(obs, &d, applyErr)
	f.Breaker = breaker
	ep.Status = endpointStatus(before, obs, &d, f)
	evs, memo := endpointEvents(before, &ep, f, obs.Memo, now, r.eventInterval())
	overrunEmit, ovMemo := overrunEvent(r.overrunMemo(ep.UID), obs.FilterOverruns, now, r.eventInterval())
	if overrunEmit {
		evs = append(evs, endpointEvent{corev1.EventTypeWarning, hookv1.ReasonFilterOverBudget, "Publish", ownedMessage(overrunNote(obs.FilterOverruns), ep.Spec.Owner)})
	}
	// The breaker's Events are counted against the status (its openings
	// and probe request), so they follow only a status that was written.
	news := breakerChange(before.Status.Breaker, ep.Status.Breaker)
	var breakerEvs []endpointEvent
	if breaker != nil {
		breakerEvs = breakerEvents(&ep, news, ep.Status.Breaker, meta.FindStatusCondition(ep.Status.Conditions, hookv1.ConditionCircuitOpen), breaker.Probe)
	}

	err := errors.Join(obs.Err, applyErr, obs.Secondary, probeErr)
	// A change of counters alone waits for the endpoint's counter interval
	// (counters.go); the reconcile runs again when it is
	// over.
	hold := r.counterHold(ep.UID, &before.Status, &ep.Status, now)
	if hold > 0 {
		ep.Status = *before.Status.DeepCopy()
	}
	writes := !equality.Semantic.DeepEqual(before.Status, ep.Status)
	if werr := conditions.UpdateStatus(ctx, r.Client, before, &ep, func(e *hookv1.WebhookEndpoint) any { return e.Status }); werr != nil {
		if apierrors.IsNotFound(werr) {
			r.Metrics.forget(ep.Namespace, ep.Name)
			return ctrl.Result{}, nil
		}
		if conditions.RefusedForInvalidSpec(ctx, werr, ep.DecodeError()) {
			r.emit(&ep, evs)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, errors.Join(err, werr)
	}
	if writes {
		r.statusWritten(ep.UID, now)
	}
	r.emit(&ep, append(evs, breakerEvs...))
	r.Metrics.observe(&ep, news.Opened)
	if f.Deliveries != nil {
		r.remember(ep.UID, memo)
	}
	r.rememberOverruns(ep.UID, ovMemo)
	if err != nil {
		return ctrl.Result{}, err
	}
	after := refreshAfter(r.safetyResync(), f.Waiting, timeDrivenRefresh(obs, f, memo, r.eventInterval()), now)
	if hold > 0 && hold < after {
		after = hold
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// apply performs the decision: it pauses what the engine has, or
// registers the endpoint's desired configuration. Its error is a
// *stepError.
func (r *WebhookEndpointReconciler) apply(ctx context.Context, obs *endpointObservation, d *endpointDecision) error {
	switch d.Action {
	case actionPause:
		if err := r.hold(ctx, *obs.Registered); err != nil {
			return &stepError{"pausing the endpoint in the delivery engine", err}
		}
	case actionRegister:
		stored, err := r.Engine.RegisterEndpoint(ctx, d.Desired)
		if err != nil {
			return &stepError{"registering with the delivery engine", err}
		}
		log.FromContext(ctx).Info("registered with the delivery engine", "version", stored.Version, "secrets", len(d.Rotation.Secrets))
	}
	return nil
}

// requestProbe acts on the decision's probe request (engine.ProbeNow) and
// returns what the status shows of the breaker: nil when it could not be
// read. A request the engine failed to take is not recorded, so the
// retried reconcile asks again; asking twice only makes the probe due now
// twice.
func (r *WebhookEndpointReconciler) requestProbe(ctx context.Context, obs *endpointObservation, d *endpointDecision) (*breakerFacts, error) {
	if obs.Breaker == nil {
		return nil, nil
	}
	bf := &breakerFacts{Breaker: *obs.Breaker, Policy: breakerInEffect(obs, d)}
	p := d.Probe
	if p == nil || !p.Valid {
		bf.Probe = p
		return bf, nil
	}
	b, err := r.Engine.ProbeNow(ctx, ledger.EndpointID(obs.Endpoint.Namespace, obs.Endpoint.Name))
	switch {
	case errors.Is(err, ledger.ErrNotFound): // not registered: nothing to probe
	case err != nil:
		return bf, fmt.Errorf("asking the delivery engine for a probe: %w", err)
	default:
		bf.Breaker = b
	}
	bf.Probe = p
	log.FromContext(ctx).Info("a probe was requested", "requestedAt", p.Value, "breakerOpen", bf.Breaker.Open)
	return bf, nil
}

// emit emits the Events endpointEvents decided.
func (r *WebhookEndpointReconciler) emit(ep *hookv1.WebhookEndpoint, evs []endpointEvent) {
	if r.Recorder == nil {
		return
	}
	for _, e := range evs {
		r.Recorder.Eventf(ep, nil, e.Type, e.Reason, e.Action, "%s", e.Note)
	}
}

// memo is what was last announced of the endpoint's exhaustions.
func (r *WebhookEndpointReconciler) memo(uid types.UID) *exhaustionMemo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.memos[uid]
}

// remember keeps memo for the endpoint; nil forgets it.
func (r *WebhookEndpointReconciler) remember(uid types.UID, memo *exhaustionMemo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if memo == nil {
		delete(r.memos, uid)
		return
	}
	if r.memos == nil {
		r.memos = map[types.UID]*exhaustionMemo{}
	}
	r.memos[uid] = memo
}

// overrunMemo is what was last announced of the endpoint's filter
// overruns.
func (r *WebhookEndpointReconciler) overrunMemo(uid types.UID) *overrunMemo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.overrunMemos[uid]
}

// rememberOverruns keeps memo for the endpoint; nil forgets it.
func (r *WebhookEndpointReconciler) rememberOverruns(uid types.UID, memo *overrunMemo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if memo == nil {
		delete(r.overrunMemos, uid)
		return
	}
	if r.overrunMemos == nil {
		r.overrunMemos = map[types.UID]*overrunMemo{}
	}
	r.overrunMemos[uid] = memo
}

func (r *WebhookEndpointReconciler) eventInterval() time.Duration {
	if r.EventInterval <= 0 {
		return defaultEventInterval
	}
	return r.EventInterval
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
	r.remember(ep.UID, nil)
	r.rememberOverruns(ep.UID, nil)
	r.statusWritten(ep.UID, time.Time{})
	r.Metrics.forget(ep.Namespace, ep.Name)
	orig := ep.DeepCopy()
	controllerutil.RemoveFinalizer(ep, endpointFinalizer)
	if err := r.Patch(ctx, ep, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// safetyResync draws when the endpoint is reconciled again if nothing
// else wakes it: between one and two resync periods, so that endpoints
// created together spread out.
func (r *WebhookEndpointReconciler) safetyResync() time.Duration {
	period := r.ResyncPeriod
	if period <= 0 {
		period = defaultResyncPeriod
	}
	return period + rand.N(period)
}

// SetupWithManager registers the controller. It reconciles an endpoint when
// its spec or its probe-request annotation changes (its own status writes
// do not requeue it), when its signing Secret, generated Secrets, the
// Secrets and ConfigMap its credentials come from, or its RetryPolicy
// change, when the engine reports an exhaustion or a breaker
// change, when a DeliveryRecovery of it progresses (recoveries.go),
// when the activity poller sees its counters move (activity.go),
// when its status changes with time, and after the safety resync
// (refresh.go).
func (r *WebhookEndpointReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	r.content = &contentCache{size: r.ContentCacheSize}
	r.reader = &contentReader{metadata: mgr.GetCache(), live: r.APIReader, cache: r.content}
	if err := index.Endpoints(mgr, index.RetryPolicyRef, index.SigningSecretRef, index.CredentialSecret, index.CAConfigMap); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("webhookendpoint").
		For(&hookv1.WebhookEndpoint{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deletionStarted(), probeRequested()))).
		Owns(&corev1.Secret{}, builder.OnlyMetadata).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(index.EndpointsReferencing(r.Client, index.SigningSecretRef, index.CredentialSecret)), builder.OnlyMetadata).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(index.EndpointsReferencing(r.Client, index.CAConfigMap)), builder.OnlyMetadata).
		Watches(&hookv1.RetryPolicy{}, handler.EnqueueRequestsFromMapFunc(index.EndpointsReferencing(r.Client, index.RetryPolicyRef)),
			builder.WithPredicates(retrypolicy.ReadinessChanged())).
		Watches(&hookv1.DeliveryRecovery{}, handler.EnqueueRequestsFromMapFunc(endpointOfRecovery), builder.WithPredicates(recoveryProgressed()))
	if r.Exhausted != nil {
		b = b.WatchesRawSource(source.Channel(r.Exhausted, &handler.EnqueueRequestForObject{}))
	}
	if r.Breakers != nil {
		b = b.WatchesRawSource(source.Channel(r.Breakers, &handler.EnqueueRequestForObject{}))
	}
	if r.FilterOverruns != nil {
		b = b.WatchesRawSource(source.Channel(r.FilterOverruns, &handler.EnqueueRequestForObject{}))
	}
	if r.ActivityInterval >= 0 {
		poller := newActivityPoller(r.Ledger, r.ActivityInterval)
		if err := mgr.Add(poller); err != nil {
			return fmt.Errorf("adding the endpoint activity poller: %w", err)
		}
		b = b.WatchesRawSource(source.Channel(poller.out, handler.EnqueueRequestsFromMapFunc(cachedEndpoint(mgr.GetCache()))))
	}
	return b.Complete(r)
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

// probeRequested passes the update that changes the probe-request
// annotation (`kubectl hookkeeper probe`), which does not change the
// generation.
func probeRequested() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetAnnotations()[hookv1.AnnotationProbeRequestedAt] != e.ObjectNew.GetAnnotations()[hookv1.AnnotationProbeRequestedAt]
		},
	}
}
