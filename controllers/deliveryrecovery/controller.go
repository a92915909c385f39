package deliveryrecovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/controllers/ledgerread"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// RecoveryEngine is what the DeliveryRecovery controller asks of the
// delivery engine.
type RecoveryEngine interface {
	RecoveryStart(ctx context.Context, operationKey, specHash, objectUID string) (ledger.RecoveryOperation, error)
	Recover(ctx context.Context, operationKey, deliveryID string, action ledger.RecoveryAction) (ledger.RecoveryItem, error)
	Replay(ctx context.Context, operationKey, eventID, endpointID string, onUnreplayable ledger.ReplayFallback) (ledger.RecoveryItem, error)
}

const (
	// defaultFollowInterval is how often a running recovery looks at its
	// items.
	defaultFollowInterval = 2 * time.Second
	// waitRecheck is how often a waiting recovery looks at its endpoint
	// again; the watch on WebhookEndpoints wakes it sooner.
	waitRecheck = time.Minute
	// recoveryEndpointIndex indexes DeliveryRecoveries by the endpoint
	// they name.
	recoveryEndpointIndex = "spec.endpointRef.name"
)

// DeliveryRecoveryReconciler runs each DeliveryRecovery once. Its identity
// in the ledger is its namespace and name (ledger.RecoveryOperationKey),
// and every effect is keyed by it and the delivery, so a restart, a
// repeated reconcile, or the object deleted and applied again never
// retries or reissues twice (docs/adr/0007). The deliveries it considers
// are those exhausted before the operation's first start, recorded in the
// ledger before anything is applied, so every later reconcile sees the
// same set. It waits, without failing, for an endpoint that does not exist
// or is not registered yet.
type DeliveryRecoveryReconciler struct {
	client.Client
	Engine RecoveryEngine
	// Ledger reads the endpoint, its exhausted deliveries and retry-budget
	// deferrals, the events to replay and the recovery's items.
	Ledger ledgerread.Reader
	Clock  clock.PassiveClock
	// FollowInterval paces a running recovery (default 2s).
	FollowInterval time.Duration
	// Recorder announces a recovery that cannot be decoded (InvalidSpec).
	Recorder events.EventRecorder
}

func (r *DeliveryRecoveryReconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// +kubebuilder:rbac:groups=hookkeeper.dev,resources=deliveryrecoveries,verbs=list;watch;delete
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=deliveryrecoveries/status,verbs=update
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=webhookendpoints,verbs=list;watch

// Reconcile starts, applies, follows and finally cleans up a recovery.
func (r *DeliveryRecoveryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	return conditions.RequeueOnConflict(ctx, res, err)
}

// reconcile gathers and decides the status (a refusal when the spec did
// not decode, nothing new once finished, else what the operation's items
// say), writes it once, then deletes a finished recovery whose TTL is up.
func (r *DeliveryRecoveryReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var rec hookv1.DeliveryRecovery
	if err := r.Get(ctx, req.NamespacedName, &rec); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.now()
	before := rec.DeepCopy()
	undecodable := len(rec.Undecodable) > 0
	switch {
	case undecodable:
		conditions.AnnounceInvalidSpec(r.Recorder, &rec, rec.Undecodable)
		rec.Status = undecodableRecoveryStatus(&rec, now)
	case finished(&rec):
	default:
		progress, err := r.run(ctx, &rec)
		if err != nil {
			return ctrl.Result{}, err
		}
		rec.Status = recoveryStatus(&rec, progress, now)
	}
	if err := conditions.UpdateStatus(ctx, r.Client, before, &rec, func(d *hookv1.DeliveryRecovery) any { return d.Status }); err != nil {
		if apierrors.IsNotFound(err) || conditions.RefusedForInvalidSpec(ctx, err, rec.DecodeError()) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}

	switch {
	case undecodable:
		// Kept until corrected or deleted: its TTL may be what was left out.
		return ctrl.Result{}, nil
	case finished(&rec):
		return r.expire(ctx, &rec, now)
	case rec.Status.State == hookv1.RecoveryWaiting:
		return ctrl.Result{RequeueAfter: waitRecheck}, nil
	}
	follow := r.FollowInterval
	if follow <= 0 {
		follow = defaultFollowInterval
	}
	return ctrl.Result{RequeueAfter: follow}, nil
}

// run gathers what decides whether the recovery may run and, when it may,
// starts its operation (once: the ledger keeps the first start), applies
// it and reads its items. An error is the API server's or the engine's.
func (r *DeliveryRecoveryReconciler) run(ctx context.Context, rec *hookv1.DeliveryRecovery) (*recoveryProgress, error) {
	hash, err := recoverySpecHash(&rec.Spec)
	if err != nil {
		return nil, err
	}
	facts := &startFacts{EndpointName: rec.Spec.EndpointRef.Name, SpecHash: hash}
	var obj hookv1.WebhookEndpoint
	switch err := r.Get(ctx, client.ObjectKey{Namespace: rec.Namespace, Name: facts.EndpointName}, &obj); {
	case err == nil:
		facts.Endpoint = &obj
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading WebhookEndpoint %s: %w", facts.EndpointName, err)
	}
	endpointID := ledger.EndpointID(rec.Namespace, facts.EndpointName)
	ep, err := r.Ledger.EndpointGet(ctx, endpointID)
	switch {
	case err == nil:
		facts.Registered = true
	case !errors.Is(err, ledger.ErrNotFound):
		return nil, fmt.Errorf("reading endpoint %s: %w", endpointID, err)
	}
	// The endpoint gates the start only: a recovery that started follows
	// its items even when its endpoint goes away meanwhile.
	gate := recoveryBlocked(facts)
	if gate != nil && rec.Status.StartTime == nil {
		return &recoveryProgress{Block: gate}, nil
	}

	key := ledger.RecoveryOperationKey(rec.Namespace, rec.Name)
	op, err := r.Engine.RecoveryStart(ctx, key, hash, string(rec.UID))
	if err != nil {
		return nil, err
	}
	facts.Operation = &op
	if b := recoveryBlocked(facts); b != nil && b.Permanent {
		return &recoveryProgress{Block: b, Operation: &op}, nil
	}
	items, err := r.Ledger.RecoveryItemsList(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("reading the items of recovery %s: %w", key, err)
	}
	applied := 0
	if gate == nil {
		apply := r.apply
		if rec.Spec.Action == hookv1.RecoveryModeReplay {
			apply = r.applyReplay
		}
		if applied, err = apply(ctx, rec, &ep, &op, items); err != nil {
			return nil, err
		}
	}
	if applied > 0 {
		if items, err = r.Ledger.RecoveryItemsList(ctx, key); err != nil {
			return nil, fmt.Errorf("reading the items of recovery %s: %w", key, err)
		}
	}
	progress := &recoveryProgress{Operation: &op, Items: items}
	// Re-sends that wait may wait for the retry budget they draw on.
	if facts.Registered && ep.Policy.Budget != nil && waitingResends(items) > 0 {
		d, err := ledgerread.Deferrals(ctx, r.Ledger, endpointID, r.now())
		if err != nil {
			return nil, fmt.Errorf("reading the retry budget's deferrals of endpoint %s: %w", endpointID, err)
		}
		progress.Budget = &budgetFacts{Budget: *ep.Policy.Budget, Deferrals: d}
	}
	return progress, nil
}

// apply runs the action on the matching deliveries exhausted before the
// operation's start that it has not applied yet, oldest first, until it
// has limit items in all; it returns how many it applied. A delivery
// applied before (by this object or an earlier one of its name) comes back
// as a replay and changes nothing.
func (r *DeliveryRecoveryReconciler) apply(ctx context.Context, rec *hookv1.DeliveryRecovery, ep *ledger.Endpoint,
	op *ledger.RecoveryOperation, items []ledger.RecoveryItem) (int, error) {
	params := recoverySelection(rec, ep.ID, op.StartedAt)
	room := params.Limit - len(items)
	if room <= 0 {
		return 0, nil
	}
	// Refused items stay unresolved and are listed again: list a full
	// limit and skip what the operation already holds.
	matched, err := r.Ledger.ExhaustedList(ctx, params)
	if err != nil {
		return 0, fmt.Errorf("selecting exhausted deliveries: %w", err)
	}
	held := make(map[string]bool, len(items))
	for i := range items {
		held[items[i].DeliveryID] = true
	}
	now := r.now()
	applied := 0
	for i := range matched {
		ed := &matched[i]
		if held[ed.Delivery.ID] {
			continue
		}
		if applied == room {
			break
		}
		action := modeAction(rec.Spec.Action, ed, ep.Policy.ReplayWindow, now)
		if _, err := r.Engine.Recover(ctx, op.Key, ed.Delivery.ID, action); err != nil {
			return applied, err
		}
		applied++
	}
	return applied, nil
}

// applyReplay sends the events the replay selects, created before the
// operation's start, that it has not handled yet, oldest first, until it
// has limit items in all; it returns how many it applied. An event applied
// before (by this object or an earlier one of its name) comes back as a
// replay of the call and sends nothing.
func (r *DeliveryRecoveryReconciler) applyReplay(ctx context.Context, rec *hookv1.DeliveryRecovery, ep *ledger.Endpoint,
	op *ledger.RecoveryOperation, items []ledger.RecoveryItem) (int, error) {
	params, fallback := replaySelection(rec, op.StartedAt)
	if params == nil {
		return 0, nil
	}
	room := params.Limit - len(items)
	if room <= 0 {
		return 0, nil
	}
	// Every selected event becomes an item (refused and skipped ones too),
	// so a full limit lists what the operation holds and what is left.
	matched, err := r.Ledger.ReplayList(ctx, params)
	if err != nil {
		return 0, fmt.Errorf("selecting events to replay: %w", err)
	}
	held := make(map[string]bool, len(items))
	for i := range items {
		held[items[i].EventID] = true
	}
	applied := 0
	for i := range matched {
		if held[matched[i].EventID] {
			continue
		}
		if applied == room {
			break
		}
		if _, err := r.Engine.Replay(ctx, op.Key, matched[i].EventID, ep.ID, fallback); err != nil {
			return applied, err
		}
		applied++
	}
	return applied, nil
}

// replaySelection is the ledger query of a replay's spec: its window,
// ending at the operation's start at the latest, its types and its limit;
// and what it does with what it cannot replay. Nil without a replay block
// (the API refuses that).
func replaySelection(rec *hookv1.DeliveryRecovery, cutoff time.Time) (*ledger.ReplayListParams, ledger.ReplayFallback) {
	spec := rec.Spec.Replay
	if spec == nil {
		return nil, ""
	}
	params := &ledger.ReplayListParams{Namespace: rec.Namespace, Since: spec.Since.Time, Until: cutoff, Limit: 100}
	if spec.Until != nil && spec.Until.Time.Before(cutoff) {
		params.Until = spec.Until.Time
	}
	if rec.Spec.Limit != nil {
		params.Limit = int(*rec.Spec.Limit)
	}
	for _, t := range spec.EventTypes {
		params.EventTypes = append(params.EventTypes, string(t))
	}
	fallback := ledger.ReplayRefuse
	if spec.OnUnreplayable == hookv1.ReplayFallbackReissue {
		fallback = ledger.ReplayReissue
	}
	return params, fallback
}

// recoverySelection is the ledger query of a recovery's spec: its
// selector, its limit, and nothing exhausted at or after cutoff.
func recoverySelection(rec *hookv1.DeliveryRecovery, endpointID string, cutoff time.Time) *ledger.ExhaustedListParams {
	params := &ledger.ExhaustedListParams{EndpointID: endpointID, ExhaustedBefore: cutoff, Limit: 100}
	if rec.Spec.Limit != nil {
		params.Limit = int(*rec.Spec.Limit)
	}
	if sel := rec.Spec.Selector; sel != nil {
		params.DeliveryIDs, params.EventIDs = sel.DeliveryIDs, sel.EventIDs
		for _, t := range sel.EventTypes {
			params.EventTypes = append(params.EventTypes, string(t))
		}
		if sel.ExhaustedAfter != nil {
			params.ExhaustedAfter = sel.ExhaustedAfter.Time
		}
		if sel.ExhaustedBefore != nil && sel.ExhaustedBefore.Time.Before(params.ExhaustedBefore) {
			params.ExhaustedBefore = sel.ExhaustedBefore.Time
		}
	}
	return params
}

// finished reports whether the recovery completed or failed.
func finished(rec *hookv1.DeliveryRecovery) bool {
	return meta.IsStatusConditionTrue(rec.Status.Conditions, hookv1.ConditionComplete) ||
		meta.IsStatusConditionTrue(rec.Status.Conditions, hookv1.ConditionFailed)
}

// expire deletes a finished recovery after ttlSecondsAfterFinished, as the
// Job controller does; the ledger keeps the resolutions.
func (r *DeliveryRecoveryReconciler) expire(ctx context.Context, rec *hookv1.DeliveryRecovery, now time.Time) (ctrl.Result, error) {
	if rec.Spec.TTLSecondsAfterFinished == nil || rec.Status.CompletionTime == nil {
		return ctrl.Result{}, nil
	}
	deadline := rec.Status.CompletionTime.Add(time.Duration(*rec.Spec.TTLSecondsAfterFinished) * time.Second)
	if wait := deadline.Sub(now); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if err := r.Delete(ctx, rec, client.Preconditions{UID: &rec.UID}); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("deleting finished recovery: %w", err)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the controller; status writes do not
// retrigger it (it follows its items on a timer). A change to a
// WebhookEndpoint wakes the unfinished recoveries that name it, so that a
// recovery applied together with its endpoint starts once the endpoint is
// registered.
func (r *DeliveryRecoveryReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &hookv1.DeliveryRecovery{}, recoveryEndpointIndex,
		func(o client.Object) []string { return []string{o.(*hookv1.DeliveryRecovery).Spec.EndpointRef.Name} }); err != nil {
		return fmt.Errorf("indexing DeliveryRecoveries by endpoint: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("deliveryrecovery").
		For(&hookv1.DeliveryRecovery{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&hookv1.WebhookEndpoint{}, handler.EnqueueRequestsFromMapFunc(r.recoveriesOf)).
		Complete(r)
}

// recoveriesOf maps a WebhookEndpoint to the recoveries in its namespace
// that name it and have not started (running ones follow on their timer).
func (r *DeliveryRecoveryReconciler) recoveriesOf(ctx context.Context, ep client.Object) []reconcile.Request {
	var list hookv1.DeliveryRecoveryList
	if err := r.List(ctx, &list, client.InNamespace(ep.GetNamespace()), client.MatchingFields{recoveryEndpointIndex: ep.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "listing the recoveries of a WebhookEndpoint", "endpoint", client.ObjectKeyFromObject(ep))
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if st := list.Items[i].Status.State; st == "" || st == hookv1.RecoveryWaiting {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}
