package quota

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// quotaFinalizer holds a WebhookQuota until its limits are gone from the
// ledger.
const quotaFinalizer = "hookkeeper.dev/quota"

// defaultQuotaRefresh is how often status.used is read again.
const defaultQuotaRefresh = time.Minute

// QuotaLedger is what the WebhookQuota controller needs of the ledger
// (ledger.Quotas; the store implements it). Every replica's publishes are
// checked against what it holds, so registering there is enough.
type QuotaLedger interface {
	QuotaSet(ctx context.Context, p *ledger.QuotaSetParams) (ledger.NamespaceQuota, error)
	QuotaDelete(ctx context.Context, namespace string) error
	QuotaGet(ctx context.Context, namespace string, now time.Time) (ledger.NamespaceQuota, error)
}

// WebhookQuotaReconciler registers a namespace's WebhookQuota in the
// ledger, removes it once the object is deleted, and writes status.used
// from the ledger when it changed.
type WebhookQuotaReconciler struct {
	client.Client
	Ledger QuotaLedger
	Clock  interface{ Now() time.Time }
	// RefreshPeriod is how often status.used is read again (default one
	// minute); a status write happens only when it moved.
	RefreshPeriod time.Duration
}

// +kubebuilder:rbac:groups=hookkeeper.dev,resources=webhookquotas,verbs=list;watch;patch
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=webhookquotas/status,verbs=update

// Reconcile registers the quota's hard limits and writes its status.
func (r *WebhookQuotaReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	return conditions.RequeueOnConflict(ctx, res, err)
}

func (r *WebhookQuotaReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var q hookv1.WebhookQuota
	if err := r.Get(ctx, req.NamespacedName, &q); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !q.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, &q)
	}
	now := r.now()
	before := q.DeepCopy()
	hard, problem := quotaHard(&q)
	if problem != "" {
		// Not registered: the ledger keeps what it held, if anything.
		q.Status = quotaStatus(before, nil, problem, now)
		return ctrl.Result{}, r.writeStatus(ctx, before, &q)
	}
	if !controllerutil.ContainsFinalizer(&q, quotaFinalizer) {
		orig := q.DeepCopy()
		controllerutil.AddFinalizer(&q, quotaFinalizer)
		if err := r.Patch(ctx, &q, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
		before = q.DeepCopy()
	}
	held, err := r.Ledger.QuotaGet(ctx, q.Namespace, now)
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return ctrl.Result{}, fmt.Errorf("reading the quota of %s from the ledger: %w", q.Namespace, err)
	}
	if err != nil || held.Hard != hard {
		if held, err = r.Ledger.QuotaSet(ctx, &ledger.QuotaSetParams{Namespace: q.Namespace, Hard: hard, Now: now}); err != nil {
			return ctrl.Result{}, fmt.Errorf("registering the quota of %s in the ledger: %w", q.Namespace, err)
		}
	}
	q.Status = quotaStatus(before, &held, "", now)
	return ctrl.Result{RequeueAfter: r.refresh()}, r.writeStatus(ctx, before, &q)
}

func (r *WebhookQuotaReconciler) writeStatus(ctx context.Context, before, q *hookv1.WebhookQuota) error {
	err := conditions.UpdateStatus(ctx, r.Client, before, q, func(q *hookv1.WebhookQuota) any { return q.Status })
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// finalize removes the namespace's quota from the ledger, then lets the
// object go.
func (r *WebhookQuotaReconciler) finalize(ctx context.Context, q *hookv1.WebhookQuota) error {
	if !controllerutil.ContainsFinalizer(q, quotaFinalizer) {
		return nil
	}
	if err := r.Ledger.QuotaDelete(ctx, q.Namespace); err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return fmt.Errorf("removing the quota of %s from the ledger: %w", q.Namespace, err)
	}
	orig := q.DeepCopy()
	controllerutil.RemoveFinalizer(q, quotaFinalizer)
	if err := r.Patch(ctx, q, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

func (r *WebhookQuotaReconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

func (r *WebhookQuotaReconciler) refresh() time.Duration {
	if r.RefreshPeriod <= 0 {
		return defaultQuotaRefresh
	}
	return r.RefreshPeriod
}

// quotaHard is the ledger's form of q's spec.hard, or why it cannot be
// applied.
func quotaHard(q *hookv1.WebhookQuota) (ledger.QuotaHard, string) {
	if err := q.DecodeError(); err != nil {
		return ledger.QuotaHard{}, err.Error()
	}
	if q.Name != hookv1.WebhookQuotaName {
		return ledger.QuotaHard{}, fmt.Sprintf("a namespace has one WebhookQuota, named %q: this one is not in effect", hookv1.WebhookQuotaName)
	}
	h := q.Spec.Hard
	var out ledger.QuotaHard
	if h.PublishesPerSecond != nil {
		out.PublishesPerSecond = int64(*h.PublishesPerSecond)
	}
	if h.PublishBurst != nil {
		out.PublishBurst = int64(*h.PublishBurst)
	}
	if h.EventsPerDay != nil {
		out.EventsPerDay = *h.EventsPerDay
	}
	if b := h.PayloadBytesRetained; b != nil {
		if b.Sign() <= 0 {
			return ledger.QuotaHard{}, fmt.Sprintf("spec.hard.payloadBytesRetained must be at least 1 byte, not %s", b.String())
		}
		out.PayloadBytesRetained = b.Value() // rounded up to a whole byte
	}
	if out == (ledger.QuotaHard{}) || out.Validate() != nil {
		return ledger.QuotaHard{}, "spec.hard must set at least one positive limit"
	}
	return out, ""
}

// quotaStatus is the status of a quota registered as held (nil: not
// registered, for problem). updatedAt moves only with used, so that a
// refresh that finds nothing new writes nothing.
func quotaStatus(q *hookv1.WebhookQuota, held *ledger.NamespaceQuota, problem string, now time.Time) hookv1.WebhookQuotaStatus {
	status := *q.Status.DeepCopy()
	status.ObservedGeneration = q.Generation
	c := metav1.Condition{Type: hookv1.ConditionReady, ObservedGeneration: q.Generation, LastTransitionTime: metav1.NewTime(now)}
	if held == nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, hookv1.ReasonInvalidSpec, problem
		meta.SetStatusCondition(&status.Conditions, c)
		return status
	}
	c.Status, c.Reason = metav1.ConditionTrue, hookv1.ReasonReconciled
	c.Message = fmt.Sprintf("publishes of namespace %s are held to spec.hard on every replica; over a limit they are refused with 429 QuotaExceeded", q.Namespace)
	meta.SetStatusCondition(&status.Conditions, c)
	used := &hookv1.WebhookQuotaUsed{
		EventsPerDay:         held.Used.EventsToday,
		PayloadBytesRetained: *resource.NewQuantity(held.Used.PayloadBytesRetained, resource.BinarySI),
		RefusedToday:         held.Used.RefusedToday,
	}
	if status.Used == nil || status.Used.EventsPerDay != used.EventsPerDay || status.Used.RefusedToday != used.RefusedToday ||
		status.Used.PayloadBytesRetained.Cmp(used.PayloadBytesRetained) != 0 {
		status.Used = used
		status.UpdatedAt = &metav1.Time{Time: now}
	}
	return status
}

// SetupWithManager registers the controller: on spec changes and
// deletion; status.used is refreshed on RefreshPeriod.
func (r *WebhookQuotaReconciler) SetupWithManager(mgr ctrl.Manager) error {
	specOrDeletion := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectNew.GetGeneration() != e.ObjectOld.GetGeneration() ||
			!e.ObjectNew.GetDeletionTimestamp().Equal(e.ObjectOld.GetDeletionTimestamp())
	}}
	return ctrl.NewControllerManagedBy(mgr).
		For(&hookv1.WebhookQuota{}, builder.WithPredicates(specOrDeletion)).
		Named("webhookquota").
		Complete(r)
}
