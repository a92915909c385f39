package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// patchStatus writes obj's status as a merge patch against before, the copy
// taken at the start of the reconcile, and only when the status changed, so
// that a reconcile that learns nothing new writes nothing and does not
// trigger itself again. It never sends spec: the status subresource ignores
// it, and the patch only holds what differs.
func patchStatus[T client.Object](ctx context.Context, c client.Client, before, obj T, status func(T) any) error {
	if equality.Semantic.DeepEqual(status(before), status(obj)) {
		return nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("patching status of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	return nil
}
