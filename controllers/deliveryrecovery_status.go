package controllers

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// maxStatusItems bounds status.items.
const maxStatusItems = 100

// Condition reasons of a DeliveryRecovery.
const (
	ReasonRunning          = "Running"
	ReasonAllSettled       = "AllItemsSettled"
	ReasonNothingMatched   = "NothingMatched"
	ReasonEndpointNotFound = "EndpointNotFound"
	ReasonNoneRefused      = "NoneRefused"
)

// autoAction decides what Auto does for one exhausted delivery: retry
// while the same event can still be replayed (its secrets and payload
// present, within the replay window), reissue otherwise.
func autoAction(ed *ledger.ExhaustedDelivery, replayWindow time.Duration, now time.Time) ledger.RecoveryAction {
	switch {
	case ed.SecretsScrubbed, ed.PayloadPruned:
		return ledger.RecoveryReissue
	case replayWindow > 0 && now.After(ed.ReplayFrom.Add(replayWindow)):
		return ledger.RecoveryReissue
	default:
		return ledger.RecoveryRetry
	}
}

// modeAction maps the spec's action to the ledger's for one delivery.
func modeAction(mode hookv1.RecoveryMode, ed *ledger.ExhaustedDelivery, replayWindow time.Duration, now time.Time) ledger.RecoveryAction {
	switch mode {
	case hookv1.RecoveryModeRetry:
		return ledger.RecoveryRetry
	case hookv1.RecoveryModeReissue:
		return ledger.RecoveryReissue
	case hookv1.RecoveryModeDismiss:
		return ledger.RecoveryDismiss
	default:
		return autoAction(ed, replayWindow, now)
	}
}

// itemOutcome is where one item stands, following what the recovery
// created to its end.
func itemOutcome(it *ledger.RecoveryItem) (hookv1.ItemOutcome, bool) {
	switch it.Outcome {
	case ledger.OutcomeRefused:
		return hookv1.ItemRefused, true
	case ledger.OutcomeDismissed:
		return hookv1.ItemDismissed, true
	case ledger.OutcomeAwaitingReissue:
		return hookv1.ItemAwaitingReissue, false
	}
	switch it.NewDeliveryState {
	case ledger.StateDelivered:
		return hookv1.ItemDelivered, true
	case ledger.StateExhausted, ledger.StateCancelled:
		return hookv1.ItemFailedAgain, true
	}
	if it.Outcome == ledger.OutcomeReissued {
		return hookv1.ItemReissued, it.NewDeliveryID == ""
	}
	return hookv1.ItemRetried, false
}

// recoveryStatus computes a DeliveryRecovery's status from its items at
// now: counts, the bounded item list, and the Complete and ReissueRequired
// conditions. Complete is True once every item has settled.
func recoveryStatus(rec *hookv1.DeliveryRecovery, items []ledger.RecoveryItem, now time.Time) hookv1.DeliveryRecoveryStatus {
	st := *rec.Status.DeepCopy()
	st.ObservedGeneration = rec.Generation
	st.Counts = hookv1.RecoveryCounts{Matched: int32(len(items))}
	st.Items = nil
	settled, reissueRequired := 0, 0
	for i := range items {
		it := &items[i]
		outcome, done := itemOutcome(it)
		if done {
			settled++
		}
		c := &st.Counts
		switch it.Outcome {
		case ledger.OutcomeRetried:
			c.Retried++
		case ledger.OutcomeReissued:
			c.Reissued++
		case ledger.OutcomeAwaitingReissue:
			c.AwaitingReissue++
		case ledger.OutcomeRefused:
			c.Refused++
			if it.Reason == ledger.RefusedReissueRequired {
				reissueRequired++
			}
		case ledger.OutcomeDismissed:
			c.Dismissed++
		}
		switch outcome {
		case hookv1.ItemDelivered:
			c.Delivered++
		case hookv1.ItemFailedAgain:
			c.FailedAgain++
		}
		if len(st.Items) < maxStatusItems {
			st.Items = append(st.Items, hookv1.RecoveryItem{
				DeliveryID: it.DeliveryID, EventID: it.EventID, Action: hookv1.RecoveryAction(it.Action),
				Outcome: outcome, Reason: it.Reason, Message: itemMessage(it), NewDeliveryID: it.NewDeliveryID, NewEventID: it.NewEventID,
			})
		}
	}

	complete := metav1.Condition{Type: hookv1.ConditionComplete, ObservedGeneration: rec.Generation, LastTransitionTime: metav1.NewTime(now)}
	switch {
	case len(items) == 0:
		complete.Status, complete.Reason, complete.Message = metav1.ConditionTrue, ReasonNothingMatched,
			"no unresolved exhausted delivery of the endpoint matched the selector"
	case settled == len(items):
		complete.Status, complete.Reason = metav1.ConditionTrue, ReasonAllSettled
		complete.Message = fmt.Sprintf("%d of %d items settled: %d delivered, %d failed again, %d refused, %d dismissed",
			settled, len(items), st.Counts.Delivered, st.Counts.FailedAgain, st.Counts.Refused, st.Counts.Dismissed)
	default:
		complete.Status, complete.Reason = metav1.ConditionFalse, ReasonRunning
		complete.Message = fmt.Sprintf("%d of %d items settled; %d await the producer's reissue", settled, len(items), st.Counts.AwaitingReissue)
	}
	meta.SetStatusCondition(&st.Conditions, complete)
	if complete.Status == metav1.ConditionTrue && st.CompletionTime == nil {
		t := metav1.NewTime(now)
		st.CompletionTime = &t
	}

	rr := metav1.Condition{Type: hookv1.ConditionReissueRequired, ObservedGeneration: rec.Generation, LastTransitionTime: metav1.NewTime(now),
		Status: metav1.ConditionFalse, Reason: ReasonNoneRefused, Message: "no item needs a reissue"}
	if reissueRequired > 0 {
		rr.Status, rr.Reason = metav1.ConditionTrue, ledger.RefusedReissueRequired
		rr.Message = fmt.Sprintf("%d deliveries cannot be retried: their events' one-time secrets were scrubbed; create a DeliveryRecovery with action Reissue or Auto for them", reissueRequired)
	}
	meta.SetStatusCondition(&st.Conditions, rr)
	return st
}

func itemMessage(it *ledger.RecoveryItem) string {
	switch it.Reason {
	case ledger.RefusedReissueRequired:
		return "the event's one-time secrets were scrubbed: only a reissue can resolve it"
	case ledger.RefusedReplayWindowExceeded:
		return "the event is past its replay window: only a reissue can resolve it"
	case ledger.RefusedPayloadExpired:
		return "the event's payload was pruned: only a reissue can resolve it"
	case ledger.RefusedNoReissueHandler:
		return "no endpoint in the namespace subscribes to hookkeeper.reissue.requested"
	case ledger.RefusedAlreadyResolved:
		return "the delivery was already resolved by another recovery"
	}
	return ""
}
