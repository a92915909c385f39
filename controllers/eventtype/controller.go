package eventtype

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/controllers/retrypolicy"
	"github.com/hookkeeper/hookkeeper/internal/catalog"
	"github.com/hookkeeper/hookkeeper/internal/eventtype"
)

// WebhookEventTypeReconciler writes a WebhookEventType's status: whether
// its contract is in effect (Ready), its schema's state and how many
// endpoints subscribe to it. It decides nothing for publishes: the publish
// core reads the contract on every replica (EventTypeContracts).
type WebhookEventTypeReconciler struct {
	client.Client
	Clock interface{ Now() time.Time }
}

// +kubebuilder:rbac:groups=hookkeeper.dev,resources=webhookeventtypes,verbs=list;watch
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=webhookeventtypes/status,verbs=update
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=retrypolicies,verbs=list;watch
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=webhookendpoints,verbs=list;watch

// Reconcile gathers the type, the types that name the same type, its
// policy and the endpoints of the namespace, and writes the status.
func (r *WebhookEventTypeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return conditions.RequeueOnConflict(ctx, ctrl.Result{}, r.reconcile(ctx, req))
}

func (r *WebhookEventTypeReconciler) reconcile(ctx context.Context, req ctrl.Request) error {
	var et hookv1.WebhookEventType
	if err := r.Get(ctx, req.NamespacedName, &et); err != nil {
		return client.IgnoreNotFound(err)
	}
	facts := eventTypeFacts{Undecodable: et.DecodeError()}
	holder, err := holderOf(ctx, r.Client, et.Namespace, et.Spec.Type)
	if err != nil {
		return err
	}
	if holder != nil && holder.UID != et.UID {
		facts.HeldBy = holder.Name
	}
	if et.Spec.Schema != nil {
		_, facts.SchemaErr = catalog.Compile(et.Spec.Schema.Raw)
		facts.HasSchema = true
	}
	if ref := et.Spec.RetryPolicyRef; ref != nil {
		if _, facts.PolicyProblem, err = retrypolicy.Named(ctx, r.Client, et.Namespace, ref.Name); err != nil {
			return fmt.Errorf("reading RetryPolicy %s: %w", ref.Name, err)
		}
	}
	var endpoints hookv1.WebhookEndpointList
	if err := r.List(ctx, &endpoints, client.InNamespace(et.Namespace)); err != nil {
		return fmt.Errorf("listing the endpoints of %s: %w", et.Namespace, err)
	}
	for _, ep := range endpoints.Items {
		patterns := make([]string, len(ep.Spec.EventTypes))
		for i, p := range ep.Spec.EventTypes {
			patterns[i] = string(p)
		}
		if eventtype.MatchAny(patterns, et.Spec.Type) {
			facts.Endpoints++
		}
	}
	before := et.DeepCopy()
	et.Status = eventTypeStatus(&et, facts, r.now())
	if err := conditions.UpdateStatus(ctx, r.Client, before, &et, func(e *hookv1.WebhookEventType) any { return e.Status }); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return nil
}

func (r *WebhookEventTypeReconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// eventTypeFacts is what a reconcile of a WebhookEventType found.
type eventTypeFacts struct {
	// Undecodable is set when stored values could not be decoded.
	Undecodable error
	// HeldBy names the older WebhookEventType holding the same type; "".
	HeldBy        string
	HasSchema     bool
	SchemaErr     error
	PolicyProblem *conditions.Problem
	Endpoints     int32
}

// eventTypeStatus is the status of et given facts: Ready, in order of
// what wins, False for a conflict, a schema that does not compile, or a
// policy that cannot be used; True otherwise.
func eventTypeStatus(et *hookv1.WebhookEventType, f eventTypeFacts, now time.Time) hookv1.WebhookEventTypeStatus {
	status := *et.Status.DeepCopy()
	status.ObservedGeneration = et.Generation
	status.Endpoints = f.Endpoints
	switch {
	case !f.HasSchema:
		status.Schema = "None"
	case f.SchemaErr != nil:
		status.Schema = "Invalid"
	default:
		status.Schema = "Valid"
	}
	c := metav1.Condition{Type: hookv1.ConditionReady, ObservedGeneration: et.Generation, LastTransitionTime: metav1.NewTime(now),
		Status: metav1.ConditionFalse}
	switch {
	case f.Undecodable != nil:
		c.Reason = hookv1.ReasonInvalidSpec
		c.Message = fmt.Sprintf("%v; every publish of %q is refused until the object is fixed", f.Undecodable, et.Spec.Type)
	case f.HeldBy != "":
		c.Reason = hookv1.ReasonTypeConflict
		c.Message = fmt.Sprintf("WebhookEventType %q, older, holds type %q in this namespace: this one is not in effect; delete one of them", f.HeldBy, et.Spec.Type)
	case f.SchemaErr != nil:
		c.Reason = hookv1.ReasonSchemaInvalid
		c.Message = fmt.Sprintf("%v; every publish of %q is refused until the schema is fixed", f.SchemaErr, et.Spec.Type)
	case f.PolicyProblem != nil:
		c.Reason = f.PolicyProblem.Reason
		c.Message = fmt.Sprintf("%s; every publish of %q is refused until it can be used", f.PolicyProblem.Message, et.Spec.Type)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, hookv1.ReasonReconciled
		c.Message = fmt.Sprintf("publishes of %q are held to this contract", et.Spec.Type)
	}
	meta.SetStatusCondition(&status.Conditions, c)
	return status
}

// SetupWithManager registers the controller: on spec changes, and when an
// endpoint, a RetryPolicy or another type of the namespace changes.
func (r *WebhookEventTypeReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := indexEventTypes(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("webhookeventtype").
		For(&hookv1.WebhookEventType{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&hookv1.WebhookEventType{}, handler.EnqueueRequestsFromMapFunc(r.typesOfNamespace),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		Watches(&hookv1.WebhookEndpoint{}, handler.EnqueueRequestsFromMapFunc(r.typesOfNamespace)).
		Watches(&hookv1.RetryPolicy{}, handler.EnqueueRequestsFromMapFunc(r.typesOfNamespace),
			builder.WithPredicates(retrypolicy.ReadinessChanged())).
		Complete(r)
}

// typesOfNamespace maps an object to every WebhookEventType of its
// namespace: few per namespace, and each counts the namespace's endpoints.
func (r *WebhookEventTypeReconciler) typesOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	var list hookv1.WebhookEventTypeList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
