package conditions

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// UpdateStatus is each reconcile's one status write. It writes obj's status
// when it differs from before, the copy taken at the start of the
// reconcile, so that a reconcile that learns nothing new writes nothing and
// does not trigger itself again.
//
// It is an Update, not a patch: it replaces the whole status through the
// status subresource (never spec), guarded by the resourceVersion read at
// the start. Conditions of other writers are kept because the new status
// starts from the one read (every <kind>Status function sets only the
// conditions it owns), and the resourceVersion guard makes a write that
// raced another writer a conflict instead of a lost update: the reconcile
// runs again on the fresh object (RequeueOnConflict). A merge patch of the
// difference would leave out fields whose value did not change from the
// zero value, so a counter that stays 0 would never be written and
// `kubectl get` would show an empty column; a merge patch of the whole
// status would not remove fields that became empty.
func UpdateStatus[T client.Object](ctx context.Context, c client.Client, before, obj T, status func(T) any) error {
	if equality.Semantic.DeepEqual(status(before), status(obj)) {
		return nil
	}
	if err := c.Status().Update(ctx, obj); err != nil {
		return fmt.Errorf("writing status of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// conflictRetry is how soon a reconcile whose write met a conflict runs
// again: long enough for the informer to deliver the newer object.
const conflictRetry = 250 * time.Millisecond

// RequeueOnConflict turns a conflict into a quiet, prompt retry. Conflicts
// are routine (the cache had not yet seen the controller's own previous
// write, or another writer got there first) and the retry reads the fresh
// object; returning them as errors would log a stack trace for each. Any
// other error is returned as is.
//
// A write refused because the namespace is being deleted is no error
// either: nothing more is to be done for an object whose namespace is
// going away, and its deletion reconciles it once more.
func RequeueOnConflict(ctx context.Context, res ctrl.Result, err error) (ctrl.Result, error) {
	switch {
	case err == nil:
	case apierrors.IsConflict(err):
		log.FromContext(ctx).V(1).Info("write conflicted with a newer version; retrying", "error", err.Error())
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	case NamespaceTerminating(err):
		log.FromContext(ctx).V(1).Info("the namespace is being deleted; nothing to do", "error", err.Error())
		return ctrl.Result{}, nil
	}
	return res, err
}

// NamespaceTerminating reports whether the API server refused a write
// because the object's namespace is being deleted (the NamespaceLifecycle
// admission plugin's cause), however deeply err wraps it.
func NamespaceTerminating(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}
