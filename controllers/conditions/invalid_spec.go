package conditions

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/log"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

// An object stored under an older, looser CRD can hold a value the Go types
// cannot decode (docs/adr/0006-decodable-objects.md). Its status says so
// when it can be written; but once the CRD is strict again the API server
// refuses every write of that object, status included, because it
// re-validates the stored spec. So the refusal is also announced as a
// Warning Event, which the API server always takes.

// AnnounceInvalidSpec emits the InvalidSpec Warning Event of an object whose
// decoding left something out; undecodable is its undecodable list. The
// note names the fields and rules as the condition does, never the values.
func AnnounceInvalidSpec(rec events.EventRecorder, obj runtime.Object, undecodable []string) {
	if rec == nil || len(undecodable) == 0 {
		return
	}
	rec.Eventf(obj, nil, corev1.EventTypeWarning, hookv1.ReasonInvalidSpec, "Decode", "%s", Undecodable(undecodable))
}

// RefusedForInvalidSpec reports whether a failed status write is the
// API server refusing an object that does not decode: nothing a retry can
// change, and already announced by AnnounceInvalidSpec.
func RefusedForInvalidSpec(ctx context.Context, writeErr, decodeErr error) bool {
	if decodeErr == nil || !apierrors.IsInvalid(writeErr) {
		return false
	}
	log.FromContext(ctx).V(1).Info("the API server refuses the status of an object that does not decode; its Event says why", "reason", writeErr.Error())
	return true
}
