package webhookendpoint

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/eventfilter"
)

// filterProblem is why spec.filter cannot be used, nil when it can or
// there is none: it is compiled and its cost estimated here, once per
// reconcile, so that fan-out never meets an expression it must refuse. The
// message is eventfilter's, with the position of the error.
func filterProblem(spec *hookv1.WebhookEndpointSpec) *conditions.Problem {
	if spec.Filter == "" {
		return nil
	}
	if _, err := eventfilter.Compile(spec.Filter); err != nil {
		return &conditions.Problem{Reason: hookv1.ReasonFilterInvalid, Message: "spec." + err.Error()} // "spec.filter: 1:14: …"
	}
	return nil
}

// filterOverrunThreshold is how many overruns of one filter, since the
// endpoint's configuration last changed, make it over budget: one is a
// hostile event, three a filter that keeps costing too much.
const filterOverrunThreshold = 3

// filterOverBudget is why the endpoint's filter is over its budget, nil
// when it is not: it exceeded it filterOverrunThreshold times on this
// replica (o, the engine's count for the current filter; nil when none),
// or Ready already said so at this generation (the engine's count is lost
// on a restart, and the condition lasts until the spec changes).
func filterOverBudget(ready *metav1.Condition, generation int64, o *engine.FilterOverruns) *conditions.Problem {
	if o != nil && o.Count >= filterOverrunThreshold {
		return &conditions.Problem{Reason: hookv1.ReasonFilterOverBudget, Message: fmt.Sprintf(
			"spec.filter exceeded its evaluation budget %d times since the spec last changed, the last at %s (%s): the events it could not decide were not delivered to this endpoint; make the filter cheaper (docs/filters.md)",
			o.Count, conditions.FormatTime(o.Last), o.LastReason)}
	}
	if ready != nil && ready.Reason == hookv1.ReasonFilterOverBudget && ready.ObservedGeneration == generation {
		return &conditions.Problem{Reason: hookv1.ReasonFilterOverBudget, Message: strings.TrimSuffix(ready.Message, readyOverBudgetSuffix)}
	}
	return nil
}

// overrunMemo is what the controller last announced of an endpoint's
// filter overruns.
type overrunMemo struct {
	At    time.Time
	Count int64
}

// overrunEvent decides whether to emit a FilterOverBudget Event for the
// filter's overruns o: one at the first overrun (or the first of a new
// count, after the spec changed), then, while they go on, at most one per
// interval. It returns the memo to keep; nil forgets it.
func overrunEvent(memo *overrunMemo, o *engine.FilterOverruns, now time.Time, interval time.Duration) (bool, *overrunMemo) {
	if o == nil || o.Count == 0 {
		return false, nil
	}
	if memo != nil && o.Count >= memo.Count && (o.Count == memo.Count || now.Sub(memo.At) < interval) {
		return false, memo
	}
	return true, &overrunMemo{At: now, Count: o.Count}
}

// overrunNote is the FilterOverBudget Event's note.
func overrunNote(o *engine.FilterOverruns) string {
	times := fmt.Sprintf("%d times", o.Count)
	if o.Count == 1 {
		times = "once"
	}
	return fmt.Sprintf("spec.filter exceeded its evaluation budget %s since the spec last changed, the last at %s (%s): the events it could not decide were not delivered to this endpoint",
		times, conditions.FormatTime(o.Last), o.LastReason)
}
