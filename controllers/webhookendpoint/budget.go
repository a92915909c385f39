package webhookendpoint

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// retryBudgetCondition: True while the streak of retries deferred by the
// retry budget (on any replica: the ledger counts them) still holds at
// now, naming how many since when and the budget; False otherwise.
func retryBudgetCondition(d ledger.DeferralStreak, budget *ledger.RetryBudget, generation int64, now time.Time) metav1.Condition {
	c := metav1.Condition{Type: hookv1.ConditionRetryBudgetLimited, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)}
	if !d.Active(now) {
		c.Status, c.Reason = metav1.ConditionFalse, hookv1.ReasonWithinBudget
		c.Message = "no retry was deferred by the retry budget in the last " + ledger.DeferralWindow.String()
		if budget == nil {
			c.Message = "the endpoint's RetryPolicy sets no retry budget"
		}
		return c
	}
	c.Status, c.Reason = metav1.ConditionTrue, hookv1.ReasonRetriesDeferred
	c.Message = fmt.Sprintf("%d retries deferred by the retry budget (recovery re-sends included) since %s (the last at %s); they are sent in later minutes, never dropped",
		d.Count, conditions.FormatTime(d.First), conditions.FormatTime(d.Last))
	if budget != nil {
		c.Message += fmt.Sprintf(". Budget: %d%% of the minute's first attempts plus %d retries per minute (spec.retryBudget of the RetryPolicy)",
			budget.RatioPercent, budget.MinPerMinute)
	}
	return c
}
