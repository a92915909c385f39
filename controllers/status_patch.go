package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// patchStatus writes obj's status when it differs from before, the copy
// taken at the start of the reconcile, so that a reconcile that learns
// nothing new writes nothing and does not trigger itself again.
//
// It replaces the whole status through the status subresource (never
// spec), guarded by the resourceVersion read at the start: a merge patch
// would leave out fields whose value did not change from the zero value,
// so a counter that stays 0 would never be written and `kubectl get` would
// show an empty column. A conflict (someone changed the object meanwhile)
// is returned, and the reconcile runs again on the fresh object.
func patchStatus[T client.Object](ctx context.Context, c client.Client, before, obj T, status func(T) any) error {
	if equality.Semantic.DeepEqual(status(before), status(obj)) {
		return nil
	}
	if err := c.Status().Update(ctx, obj); err != nil {
		return fmt.Errorf("writing status of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	return nil
}
