package controllers

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
		stalledFromReady(&conds)
		s := meta.FindStatusCondition(conds, hookv1.ConditionStalled)
		switch {
		case !c.wantStalled && s != nil:
			t.Errorf("Ready=%s/%s: Stalled %+v, want none", c.status, c.reason, s)
		case c.wantStalled && (s == nil || s.Status != metav1.ConditionTrue || s.Reason != c.reason || s.Message != "why "+c.reason || s.ObservedGeneration != 4):
			t.Errorf("Ready=%s/%s: Stalled %+v, want True with Ready's reason, message and generation", c.status, c.reason, s)
		}
	}
}

func TestKstatusRecoveryConditions(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		state                   hookv1.RecoveryState
		reconciling, stalled    bool
		wantReason, wantMessage string
	}{
		{hookv1.RecoveryWaiting, true, false, hookv1.ReasonWaitingForEndpoint, "waiting"},
		{hookv1.RecoveryRunning, true, false, hookv1.ReasonRunning, "running"},
		{hookv1.RecoveryComplete, false, false, hookv1.ReasonAllItemsSettled, "settled"},
		{hookv1.RecoveryFailed, false, true, hookv1.ReasonSpecConflict, "conflict"},
	} {
		st := &hookv1.DeliveryRecoveryStatus{}
		// Failed first: a Stalled or Reconciling left behind must go.
		setRecoveryConditions(st, 2, hookv1.RecoveryFailed, hookv1.ReasonSpecConflict, "before", now)
		setRecoveryConditions(st, 2, hookv1.RecoveryRunning, hookv1.ReasonRunning, "before", now)
		setRecoveryConditions(st, 2, c.state, c.wantReason, c.wantMessage, now)
		r := meta.FindStatusCondition(st.Conditions, hookv1.ConditionReconciling)
		s := meta.FindStatusCondition(st.Conditions, hookv1.ConditionStalled)
		if (r != nil) != c.reconciling || (s != nil) != c.stalled {
			t.Errorf("%s: Reconciling %+v, Stalled %+v; want Reconciling %v, Stalled %v", c.state, r, s, c.reconciling, c.stalled)
			continue
		}
		for _, got := range []*metav1.Condition{r, s} {
			if got != nil && (got.Status != metav1.ConditionTrue || got.Reason != c.wantReason || got.Message != c.wantMessage) {
				t.Errorf("%s: %+v, want True %s %q", c.state, got, c.wantReason, c.wantMessage)
			}
		}
	}
}
