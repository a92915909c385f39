package webhookendpoint

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

// A DeliveryRecovery resolves exhausted deliveries that its endpoint's
// status counts and names (DeliveriesExhausted, the counters). When a
// recovery's progress changes (it starts, an item settles, it completes),
// its endpoint is reconciled at once rather than at its next periodic
// refresh, so that an admin waiting on the endpoint's condition after a
// recovery does not wait for a timer. The recovery controller writes its
// status whenever its items move, so its writes are the signal.

// endpointOfRecovery maps a DeliveryRecovery to the WebhookEndpoint it
// names, in its namespace.
func endpointOfRecovery(_ context.Context, o client.Object) []reconcile.Request {
	rec, ok := o.(*hookv1.DeliveryRecovery)
	if !ok || rec.Spec.EndpointRef.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: rec.Namespace, Name: rec.Spec.EndpointRef.Name}}}
}

// recoveryProgressed passes the DeliveryRecovery updates that change its
// progress; a created or deleted recovery has resolved nothing yet, or
// nothing more.
func recoveryProgressed() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldR, okOld := e.ObjectOld.(*hookv1.DeliveryRecovery)
			newR, okNew := e.ObjectNew.(*hookv1.DeliveryRecovery)
			if !okOld || !okNew {
				return true
			}
			return recoveryProgressChanged(&oldR.Status, &newR.Status)
		},
	}
}

// recoveryProgressChanged reports whether a recovery's status moved in a
// way its endpoint's status can follow: its state or its counts.
func recoveryProgressChanged(before, after *hookv1.DeliveryRecoveryStatus) bool {
	return before.State != after.State || before.Counts != after.Counts
}
