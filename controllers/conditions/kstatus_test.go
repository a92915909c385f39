package conditions

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

func TestStalledFromReady(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	for _, c := range []struct {
		status      metav1.ConditionStatus
		reason      string
		wantStalled bool
	}{
		{metav1.ConditionTrue, hookv1.ReasonReconciled, false},
		{metav1.ConditionFalse, hookv1.ReasonRetryPolicyNotFound, true},
		{metav1.ConditionFalse, hookv1.ReasonRetryPolicyNotReady, true},
		{metav1.ConditionFalse, hookv1.ReasonSigningSecretNotFound, true},
		{metav1.ConditionFalse, hookv1.ReasonSigningSecretInvalid, true},
		{metav1.ConditionFalse, hookv1.ReasonDestinationForbidden, true},
		{metav1.ConditionFalse, hookv1.ReasonURLInvalid, true},
		{metav1.ConditionFalse, hookv1.ReasonHeadersInvalid, true},
		{metav1.ConditionFalse, hookv1.ReasonInvalidSpec, true},
		{metav1.ConditionFalse, hookv1.ReasonReplayWindowTooShort, true},
		{metav1.ConditionFalse, hookv1.ReasonInternalError, false},
		{metav1.ConditionFalse, hookv1.ReasonNamespaceTerminating, false},
	} {
		// A Stalled left from before must go when Ready no longer warrants it.
		conds := []metav1.Condition{
			{Type: hookv1.ConditionReady, Status: c.status, Reason: c.reason, Message: "why " + c.reason, ObservedGeneration: 4, LastTransitionTime: now},
			{Type: hookv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "Old", Message: "old", LastTransitionTime: now},
		}
		StalledFromReady(&conds)
		s := meta.FindStatusCondition(conds, hookv1.ConditionStalled)
		switch {
		case !c.wantStalled && s != nil:
			t.Errorf("Ready=%s/%s: Stalled %+v, want none", c.status, c.reason, s)
		case c.wantStalled && (s == nil || s.Status != metav1.ConditionTrue || s.Reason != c.reason || s.Message != "why "+c.reason || s.ObservedGeneration != 4):
			t.Errorf("Ready=%s/%s: Stalled %+v, want True with Ready's reason, message and generation", c.status, c.reason, s)
		}
	}
}
