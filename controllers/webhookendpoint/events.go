package webhookendpoint

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The Events of a WebhookEndpoint are decided, like its status, by pure
// functions of what the reconcile observed, and emitted after the status
// was written, so that an Event never announces what the status does not
// show. (InvalidSpec is emitted even when the API server refuses the
// status: that refusal is what it announces.)

// endpointEvent is one Event to emit about the endpoint.
type endpointEvent struct {
	Type, Reason, Action, Note string
}

// endpointEvents decides the Events of a reconcile from the endpoint
// before it and after (its new status), the facts, and the memo of what
// was last announced of its exhaustions. It returns the memo to keep: nil
// forgets the endpoint; unchanged when facts.Deliveries is nil.
func endpointEvents(before, after *hookv1.WebhookEndpoint, f *endpointFacts, memo *exhaustionMemo, now time.Time, interval time.Duration) ([]endpointEvent, *exhaustionMemo) {
	var out []endpointEvent
	if len(after.Undecodable) > 0 {
		out = append(out, endpointEvent{corev1.EventTypeWarning, hookv1.ReasonInvalidSpec, "Decode", conditions.Undecodable(after.Undecodable)})
	}
	if c := meta.FindStatusCondition(after.Status.Conditions, hookv1.ConditionRetryBudgetLimited); c != nil && c.Status == metav1.ConditionTrue &&
		!meta.IsStatusConditionTrue(before.Status.Conditions, hookv1.ConditionRetryBudgetLimited) {
		out = append(out, endpointEvent{corev1.EventTypeWarning, hookv1.ReasonRetriesDeferred, "Deliver", ownedMessage(c.Message, after.Spec.Owner)})
	}
	d := f.Deliveries
	if d == nil {
		return out, memo
	}
	wasExhausted := meta.IsStatusConditionTrue(before.Status.Conditions, hookv1.ConditionDeliveriesExhausted)
	count := d.Stats.ExhaustedUnresolved
	emit, memo := exhaustionEvent(memo, wasExhausted, before.Status.Deliveries.ExhaustedUnresolved, count, now, interval)
	if emit {
		out = append(out, endpointEvent{corev1.EventTypeWarning, hookv1.ReasonDeliveriesExhausted, "Deliver", ownedMessage(exhaustionNote(count, d.Oldest), after.Spec.Owner)})
	}
	return out, memo
}

// exhaustionMemo is what the controller last announced about an endpoint's
// exhausted deliveries.
type exhaustionMemo struct {
	At    time.Time
	Count int64
}

// exhaustionEvent decides whether to emit a DeliveriesExhausted Event: one
// when the endpoint's unresolved exhausted deliveries go from none to some,
// then, while the count grows, at most one per interval, so that a thousand
// exhaustions make one or two Events, not a thousand. wasExhausted and
// prevCount are what the status said before this reconcile (after a
// restart, with no memo, they stand for what was announced). It returns the
// memo to keep; nil forgets the endpoint.
func exhaustionEvent(memo *exhaustionMemo, wasExhausted bool, prevCount, count int64, now time.Time, interval time.Duration) (bool, *exhaustionMemo) {
	if count <= 0 {
		return false, nil
	}
	if memo == nil {
		if !wasExhausted {
			return true, &exhaustionMemo{At: now, Count: count}
		}
		memo = &exhaustionMemo{Count: prevCount}
	}
	if count > memo.Count && now.Sub(memo.At) >= interval {
		return true, &exhaustionMemo{At: now, Count: count}
	}
	return false, &exhaustionMemo{At: memo.At, Count: min(memo.Count, count)}
}

// exhaustionNote is the DeliveriesExhausted Event's note.
func exhaustionNote(count int64, oldest *ledger.ExhaustedDelivery) string {
	note := fmt.Sprintf("%d deliveries exhausted and unresolved", count)
	if count == 1 {
		note = "1 delivery exhausted and unresolved"
	}
	if oldest != nil {
		note += fmt.Sprintf("; oldest %s exhausted at %s (%s)", oldest.Delivery.ID, conditions.FormatTime(exhaustedAt(oldest)), oldest.Delivery.ExhaustReason)
	}
	return note + "; create a DeliveryRecovery with action Auto to resolve them"
}
