package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// budgetDeferralWindow mirrors engine.BudgetDeferralWindow: the condition
// stays True this long after the last deferral, so it clears at the first
// resync after deferrals stop.
const budgetDeferralWindow = 2 * time.Minute

// retryBudgetReporter is the part of the engine that knows the retries its
// retry budget deferred (*engine.Engine implements it).
type retryBudgetReporter interface {
	RetryBudgetDeferrals(endpointID string) (count int64, first, last time.Time)
}

// budgetDeferrals is one endpoint's latest streak of deferred retries.
type budgetDeferrals struct {
	Count       int64
	First, Last time.Time
}

// retryBudgetCondition: True while retries were deferred within the
// window before now, naming how many since when and the budget; False
// otherwise.
func retryBudgetCondition(d budgetDeferrals, budget *ledger.RetryBudget, generation int64, now time.Time) metav1.Condition {
	c := metav1.Condition{Type: hookv1.ConditionRetryBudgetLimited, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)}
	if d.Count == 0 || now.Sub(d.Last) > budgetDeferralWindow {
		c.Status, c.Reason = metav1.ConditionFalse, hookv1.ReasonWithinBudget
		c.Message = "no retry was deferred by the retry budget in the last " + budgetDeferralWindow.String()
		if budget == nil {
			c.Message = "the endpoint's RetryPolicy sets no retry budget"
		}
		return c
	}
	c.Status, c.Reason = metav1.ConditionTrue, hookv1.ReasonRetriesDeferred
	c.Message = fmt.Sprintf("%d retries deferred by the retry budget since %s (the last at %s); they are sent in later minutes, never dropped",
		d.Count, formatTime(d.First), formatTime(d.Last))
	if budget != nil {
		c.Message += fmt.Sprintf(". Budget: %d%% of the minute's first attempts plus %d retries per minute (spec.retryBudget of the RetryPolicy)",
			budget.RatioPercent, budget.MinPerMinute)
	}
	return c
}

// setRetryBudgetCondition sets RetryBudgetLimited from the engine's
// deferrals and announces a new streak with one Warning Event. Without an
// engine that reports deferrals it does nothing.
func (r *WebhookEndpointReconciler) setRetryBudgetCondition(ctx context.Context, ep, before *hookv1.WebhookEndpoint, now time.Time) error {
	rep, ok := r.Engine.(retryBudgetReporter)
	if !ok {
		return nil
	}
	id := ledger.EndpointID(ep.Namespace, ep.Name)
	var d budgetDeferrals
	d.Count, d.First, d.Last = rep.RetryBudgetDeferrals(id)
	var budget *ledger.RetryBudget
	if registered, err := r.Engine.Endpoint(ctx, id); err == nil {
		budget = registered.Policy.Budget
	} else if d.Count > 0 {
		return fmt.Errorf("reading the endpoint's retry budget from the delivery engine: %w", err)
	}
	c := retryBudgetCondition(d, budget, ep.Generation, now)
	meta.SetStatusCondition(&ep.Status.Conditions, c)
	if c.Status == metav1.ConditionTrue && !meta.IsStatusConditionTrue(before.Status.Conditions, hookv1.ConditionRetryBudgetLimited) && r.Recorder != nil {
		r.Recorder.Eventf(ep, nil, corev1.EventTypeWarning, hookv1.ReasonRetriesDeferred, "Deliver", "%s", ownedMessage(c.Message, ep.Spec.Owner))
	}
	return nil
}
