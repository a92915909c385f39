package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// RecoveryEngine is what the DeliveryRecovery controller asks of the
// delivery engine.
type RecoveryEngine interface {
	Endpoint(ctx context.Context, id string) (ledger.Endpoint, error)
	ExhaustedList(ctx context.Context, params *ledger.ExhaustedListParams) ([]ledger.ExhaustedDelivery, error)
	Recover(ctx context.Context, operationKey, deliveryID string, action ledger.RecoveryAction) (ledger.RecoveryItem, error)
	RecoveryItems(ctx context.Context, operationKey string) ([]ledger.RecoveryItem, error)
}

// defaultFollowInterval is how often a running recovery looks at its
// items.
const defaultFollowInterval = 2 * time.Second

// DeliveryRecoveryReconciler runs each DeliveryRecovery once. Every effect
// is keyed by the recovery's UID and the delivery in the ledger, so a
// restart or a repeated reconcile never retries or reissues twice; the
// deliveries it considers are those exhausted before its startTime, which
// is written before anything is applied, so a restart sees the same set.
type DeliveryRecoveryReconciler struct {
	client.Client
	Engine RecoveryEngine
	Clock  clock.PassiveClock
	// FollowInterval paces a running recovery (default 2s).
	FollowInterval time.Duration
}

func (r *DeliveryRecoveryReconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// +kubebuilder:rbac:groups=hookkeeper.dev,resources=deliveryrecoveries,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=deliveryrecoveries/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=webhookendpoints,verbs=get;list;watch

// Reconcile starts, applies, follows and finally cleans up a recovery.
func (r *DeliveryRecoveryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	return requeueOnConflict(ctx, res, err)
}

func (r *DeliveryRecoveryReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var rec hookv1.DeliveryRecovery
	if err := r.Get(ctx, req.NamespacedName, &rec); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.now()
	if err := rec.DecodeError(); err != nil {
		return ctrl.Result{}, r.refuseUndecodable(ctx, &rec, err, now)
	}
	if finished(&rec) {
		return r.expire(ctx, &rec, now)
	}
	before := rec.DeepCopy()
	status := func(d *hookv1.DeliveryRecovery) any { return d.Status }

	// Start: record the cut-off before anything is applied.
	if rec.Status.StartTime == nil {
		t := metav1.NewTime(now)
		rec.Status.StartTime = &t
		meta.SetStatusCondition(&rec.Status.Conditions, metav1.Condition{Type: hookv1.ConditionComplete, Status: metav1.ConditionFalse,
			Reason: ReasonRunning, Message: "selecting deliveries", ObservedGeneration: rec.Generation, LastTransitionTime: t})
		return ctrl.Result{Requeue: true}, patchStatus(ctx, r.Client, before, &rec, status)
	}

	endpointID := ledger.EndpointID(rec.Namespace, rec.Spec.EndpointRef.Name)
	ep, err := r.Engine.Endpoint(ctx, endpointID)
	if errors.Is(err, ledger.ErrNotFound) {
		meta.SetStatusCondition(&rec.Status.Conditions, metav1.Condition{Type: hookv1.ConditionFailed, Status: metav1.ConditionTrue,
			Reason: ReasonEndpointNotFound, ObservedGeneration: rec.Generation, LastTransitionTime: metav1.NewTime(now),
			Message: fmt.Sprintf("WebhookEndpoint %q has never delivered anything in this namespace", rec.Spec.EndpointRef.Name)})
		t := metav1.NewTime(now)
		rec.Status.CompletionTime = &t
		return ctrl.Result{}, patchStatus(ctx, r.Client, before, &rec, status)
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading endpoint %s: %w", endpointID, err)
	}

	if err := r.apply(ctx, &rec, &ep, now); err != nil {
		return ctrl.Result{}, err
	}
	items, err := r.Engine.RecoveryItems(ctx, string(rec.UID))
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the items of recovery %s: %w", req.NamespacedName, err)
	}
	rec.Status = recoveryStatus(&rec, items, now)
	if err := patchStatus(ctx, r.Client, before, &rec, status); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if finished(&rec) {
		return r.expire(ctx, &rec, now)
	}
	follow := r.FollowInterval
	if follow <= 0 {
		follow = defaultFollowInterval
	}
	return ctrl.Result{RequeueAfter: follow}, nil
}

// apply runs the action on every matching delivery exhausted before the
// start. Deliveries already applied by this recovery come back as replays
// and change nothing.
func (r *DeliveryRecoveryReconciler) apply(ctx context.Context, rec *hookv1.DeliveryRecovery, ep *ledger.Endpoint, now time.Time) error {
	// status.startTime is stored to the second: the cut-off is the end of
	// that second, the same on every reconcile and after a restart.
	cutoff := rec.Status.StartTime.Time.Truncate(time.Second).Add(time.Second)
	params := &ledger.ExhaustedListParams{EndpointID: ep.ID, ExhaustedBefore: cutoff, Limit: 100}
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
	matched, err := r.Engine.ExhaustedList(ctx, params)
	if err != nil {
		return fmt.Errorf("selecting exhausted deliveries: %w", err)
	}
	for i := range matched {
		ed := &matched[i]
		action := modeAction(rec.Spec.Action, ed, ep.Policy.ReplayWindow, now)
		if _, err := r.Engine.Recover(ctx, string(rec.UID), ed.Delivery.ID, action); err != nil {
			return err
		}
	}
	return nil
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
// retrigger it (it follows its items on a timer).
func (r *DeliveryRecoveryReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("deliveryrecovery").
		For(&hookv1.DeliveryRecovery{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// refuseUndecodable fails a recovery the Go types could not fully decode,
// without applying anything: a selector bound that was left out would widen
// what it selects.
func (r *DeliveryRecoveryReconciler) refuseUndecodable(ctx context.Context, rec *hookv1.DeliveryRecovery, err error, now time.Time) error {
	if failed := meta.FindStatusCondition(rec.Status.Conditions, hookv1.ConditionFailed); failed != nil &&
		failed.Status == metav1.ConditionTrue && failed.Reason == hookv1.ReasonInvalidSpec {
		return nil
	}
	before := rec.DeepCopy()
	t := metav1.NewTime(now)
	meta.SetStatusCondition(&rec.Status.Conditions, metav1.Condition{Type: hookv1.ConditionFailed, Status: metav1.ConditionTrue,
		Reason: hookv1.ReasonInvalidSpec, ObservedGeneration: rec.Generation, LastTransitionTime: t, Message: conditionMessage(err)})
	if rec.Status.CompletionTime == nil {
		rec.Status.CompletionTime = &t
	}
	if err := patchStatus(ctx, r.Client, before, rec, func(d *hookv1.DeliveryRecovery) any { return d.Status }); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
