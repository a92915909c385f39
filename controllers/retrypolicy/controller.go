package retrypolicy

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
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
	"github.com/hookkeeper/hookkeeper/controllers/index"
	"github.com/hookkeeper/hookkeeper/controllers/ledgerread"
)

// RetryPolicyReconciler writes a RetryPolicy's effective schedule, its
// worst-case horizon, how many endpoints use it, and its Ready condition.
type RetryPolicyReconciler struct {
	client.Client
	// Clock stamps condition transitions; nil means the real clock.
	Clock clock.PassiveClock
	// Recorder announces a policy that cannot be decoded (InvalidSpec).
	Recorder events.EventRecorder
	// Ledger reads the outcome buckets for status.evidence and the
	// HorizonFit advice (evidence.go); nil shows none.
	Ledger ledgerread.Reader
	// ResyncPeriod paces the refresh of the evidence (default 1m).
	ResyncPeriod time.Duration
}

func (r *RetryPolicyReconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// +kubebuilder:rbac:groups=hookkeeper.dev,resources=retrypolicies,verbs=list;watch
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=retrypolicies/status,verbs=update
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=webhookendpoints,verbs=list;watch

// Reconcile gathers the policy and the endpoints that use it, computes the
// status with retryPolicyStatus, and patches it.
func (r *RetryPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	return conditions.RequeueOnConflict(ctx, res, err)
}

func (r *RetryPolicyReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var policy hookv1.RetryPolicy
	if err := r.Get(ctx, req.NamespacedName, &policy); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	var endpoints hookv1.WebhookEndpointList
	if err := r.List(ctx, &endpoints, client.InNamespace(policy.Namespace),
		client.MatchingFields{index.RetryPolicyRef: policy.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing endpoints that use RetryPolicy %s: %w", req.NamespacedName, err)
	}

	conditions.AnnounceInvalidSpec(r.Recorder, &policy, policy.Undecodable)
	before := policy.DeepCopy()
	now := r.now()
	policy.Status = retryPolicyStatus(&policy, int32(len(endpoints.Items)), now)
	if err := r.setPolicyEvidence(ctx, &policy, now); err != nil {
		return ctrl.Result{}, err
	}
	if err := conditions.UpdateStatus(ctx, r.Client, before, &policy, func(p *hookv1.RetryPolicy) any { return p.Status }); err != nil {
		if apierrors.IsNotFound(err) || conditions.RefusedForInvalidSpec(ctx, err, policy.DecodeError()) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	log.FromContext(ctx).V(1).Info("reconciled", "attempts", policy.Status.Attempts, "horizon", policy.Status.Horizon)
	return ctrl.Result{RequeueAfter: r.evidenceResync()}, nil
}

// SetupWithManager registers the controller: it reconciles on spec changes
// (status writes do not requeue it) and when an endpoint starts or stops
// using a policy.
func (r *RetryPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := index.Endpoints(mgr, index.RetryPolicyRef); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("retrypolicy").
		For(&hookv1.RetryPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&hookv1.WebhookEndpoint{}, handler.EnqueueRequestsFromMapFunc(policyOfEndpoint)).
		Complete(r)
}

// policyOfEndpoint maps an endpoint to the policy it names. On updates the
// handler calls it for both the old and the new object, so a policy an
// endpoint stops using is recounted too.
func policyOfEndpoint(_ context.Context, o client.Object) []reconcile.Request {
	ep, ok := o.(*hookv1.WebhookEndpoint)
	if !ok || ep.Spec.RetryPolicyRef == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ep.Namespace, Name: ep.Spec.RetryPolicyRef.Name}}}
}
