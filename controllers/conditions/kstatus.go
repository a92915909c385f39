package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

// The conditions kstatus (Flux, `kubectl wait`, cli-utils) reads before any
// other (hookv1.ConditionStalled, hookv1.ConditionReconciling): Stalled=True
// computes Failed with its message, Reconciling=True computes InProgress.
// Without them kstatus reads Ready=False as InProgress forever and a
// DeliveryRecovery (no Ready) as Current while it runs.

// transientReadyReasons are Ready=False reasons the operator gets past by
// itself (a retried reconcile, the namespace going away): not Stalled.
var transientReadyReasons = map[string]bool{
	hookv1.ReasonInternalError:        true,
	hookv1.ReasonNamespaceTerminating: true,
}

// StalledFromReady mirrors a Ready=False that needs a person (an invalid
// spec, a missing or invalid reference, a forbidden destination) as
// Stalled=True with the same reason and message; otherwise there is no
// Stalled condition.
func StalledFromReady(conds *[]metav1.Condition) {
	ready := meta.FindStatusCondition(*conds, hookv1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || transientReadyReasons[ready.Reason] {
		meta.RemoveStatusCondition(conds, hookv1.ConditionStalled)
		return
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: hookv1.ConditionStalled, Status: metav1.ConditionTrue,
		Reason: ready.Reason, Message: ready.Message, ObservedGeneration: ready.ObservedGeneration, LastTransitionTime: ready.LastTransitionTime})
}

// SetRecoveryKstatus sets, for a DeliveryRecovery in state,
// Reconciling=True while it waits or runs and Stalled=True (the Failed
// condition's reason and message) once it failed; neither once it
// completed. A condition that stays keeps its lastTransitionTime, so that a
// later reconcile of the same state writes the same status.
func SetRecoveryKstatus(conds *[]metav1.Condition, state hookv1.RecoveryState, generation int64, now metav1.Time) {
	var stalled, reconciling *metav1.Condition
	switch state {
	case hookv1.RecoveryFailed:
		if f := meta.FindStatusCondition(*conds, hookv1.ConditionFailed); f != nil {
			stalled = &metav1.Condition{Type: hookv1.ConditionStalled, Status: metav1.ConditionTrue,
				Reason: f.Reason, Message: f.Message, ObservedGeneration: generation, LastTransitionTime: f.LastTransitionTime}
		}
	case hookv1.RecoveryComplete:
	default:
		reason, message := string(state), "the recovery is "+string(state)
		if c := meta.FindStatusCondition(*conds, hookv1.ConditionComplete); c != nil {
			reason, message = c.Reason, c.Message
		}
		reconciling = &metav1.Condition{Type: hookv1.ConditionReconciling, Status: metav1.ConditionTrue,
			Reason: reason, Message: message, ObservedGeneration: generation, LastTransitionTime: now}
	}
	for typ, c := range map[string]*metav1.Condition{hookv1.ConditionStalled: stalled, hookv1.ConditionReconciling: reconciling} {
		if c == nil {
			meta.RemoveStatusCondition(conds, typ)
		} else {
			meta.SetStatusCondition(conds, *c)
		}
	}
}
