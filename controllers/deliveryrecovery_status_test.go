package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func TestAutoAction(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		ed   ledger.ExhaustedDelivery
		want ledger.RecoveryAction
	}{
		{"a replayable event is retried", ledger.ExhaustedDelivery{ReplayFrom: now.Add(-time.Hour)}, ledger.RecoveryRetry},
		{"scrubbed secrets need a reissue", ledger.ExhaustedDelivery{SecretsScrubbed: true, ReplayFrom: now}, ledger.RecoveryReissue},
		{"a pruned payload needs a reissue", ledger.ExhaustedDelivery{PayloadPruned: true, ReplayFrom: now}, ledger.RecoveryReissue},
		{"past the replay window needs a reissue", ledger.ExhaustedDelivery{ReplayFrom: now.Add(-73 * time.Hour)}, ledger.RecoveryReissue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := autoAction(&tt.ed, 72*time.Hour, now); got != tt.want {
				t.Errorf("autoAction = %s, want %s", got, tt.want)
			}
			if got := modeAction(hookv1.RecoveryModeDismiss, &tt.ed, 72*time.Hour, now); got != ledger.RecoveryDismiss {
				t.Errorf("Dismiss mode gave %s", got)
			}
		})
	}
}

func TestRecoveryStatus(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	rec := &hookv1.DeliveryRecovery{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	item := func(outcome ledger.RecoveryOutcome, reason string, newState ledger.DeliveryState) ledger.RecoveryItem {
		it := ledger.RecoveryItem{DeliveryID: "dlv_" + string(outcome) + string(newState), EventID: "evt_1", Outcome: outcome, Reason: reason, NewDeliveryState: newState}
		if newState != "" {
			it.NewDeliveryID = "dlv_new"
		}
		return it
	}
	tests := []struct {
		name         string
		items        []ledger.RecoveryItem
		wantComplete metav1.ConditionStatus
		wantReason   string
		wantRR       metav1.ConditionStatus
		wantCounts   hookv1.RecoveryCounts
	}{
		{name: "nothing matched completes at once", wantComplete: metav1.ConditionTrue, wantReason: ReasonNothingMatched, wantRR: metav1.ConditionFalse},
		{name: "a retry still in flight keeps it running",
			items:        []ledger.RecoveryItem{item(ledger.OutcomeRetried, "", ledger.StateScheduled)},
			wantComplete: metav1.ConditionFalse, wantReason: ReasonRunning, wantRR: metav1.ConditionFalse,
			wantCounts: hookv1.RecoveryCounts{Matched: 1, Retried: 1}},
		{name: "delivered, failed again, dismissed and refused all settle",
			items: []ledger.RecoveryItem{
				item(ledger.OutcomeRetried, "", ledger.StateDelivered), item(ledger.OutcomeRetried, "", ledger.StateExhausted),
				item(ledger.OutcomeDismissed, "", ""), item(ledger.OutcomeRefused, ledger.RefusedReissueRequired, ""),
			},
			wantComplete: metav1.ConditionTrue, wantReason: ReasonAllSettled, wantRR: metav1.ConditionTrue,
			wantCounts: hookv1.RecoveryCounts{Matched: 4, Retried: 2, Dismissed: 1, Refused: 1, Delivered: 1, FailedAgain: 1}},
		{name: "a reissue waits for the producer",
			items:        []ledger.RecoveryItem{item(ledger.OutcomeAwaitingReissue, "", "")},
			wantComplete: metav1.ConditionFalse, wantReason: ReasonRunning, wantRR: metav1.ConditionFalse,
			wantCounts: hookv1.RecoveryCounts{Matched: 1, AwaitingReissue: 1}},
		{name: "a delivered replacement completes a reissue",
			items:        []ledger.RecoveryItem{item(ledger.OutcomeReissued, "", ledger.StateDelivered)},
			wantComplete: metav1.ConditionTrue, wantReason: ReasonAllSettled, wantRR: metav1.ConditionFalse,
			wantCounts: hookv1.RecoveryCounts{Matched: 1, Reissued: 1, Delivered: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := recoveryStatus(rec, tt.items, now)
			c := meta.FindStatusCondition(st.Conditions, hookv1.ConditionComplete)
			if c == nil || c.Status != tt.wantComplete || c.Reason != tt.wantReason {
				t.Fatalf("Complete = %+v, want %s/%s", c, tt.wantComplete, tt.wantReason)
			}
			if rr := meta.FindStatusCondition(st.Conditions, hookv1.ConditionReissueRequired); rr == nil || rr.Status != tt.wantRR {
				t.Fatalf("ReissueRequired = %+v, want %s", rr, tt.wantRR)
			}
			if st.Counts != tt.wantCounts {
				t.Fatalf("counts = %+v, want %+v", st.Counts, tt.wantCounts)
			}
			if (st.CompletionTime != nil) != (tt.wantComplete == metav1.ConditionTrue) {
				t.Fatalf("completionTime = %v with Complete %s", st.CompletionTime, tt.wantComplete)
			}
			if len(st.Items) != len(tt.items) {
				t.Fatalf("%d items listed, want %d", len(st.Items), len(tt.items))
			}
		})
	}
}
