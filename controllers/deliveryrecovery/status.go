package deliveryrecovery

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// maxStatusItems bounds status.items.
const maxStatusItems = 100

// startFacts are what decide whether a recovery may start: its endpoint
// as the API server and the engine know it, and, once started, the
// operation's record in the ledger.
type startFacts struct {
	EndpointName string
	// Endpoint is the WebhookEndpoint object; nil when it does not exist.
	Endpoint *hookv1.WebhookEndpoint
	// Registered is set when the engine knows the endpoint.
	Registered bool
	// SpecHash is the hash of this object's spec (recoverySpecHash).
	SpecHash string
	// Operation is the ledger's record; nil before the start.
	Operation *ledger.RecoveryOperation
}

// block is why a recovery does not run now. Permanent blocks fail it for
// good; the others make it wait until its endpoint changes.
type block struct {
	Permanent       bool
	Reason, Message string
}

// recoveryBlocked decides whether a recovery may run: nil when it may.
// A permanent block wins over a transient one. What can still change is
// transient (the endpoint is created later, its
// RetryPolicy or Secret resolves, the engine registers it); only what
// cannot is permanent: a spec, which is immutable, that differs from what
// this name already ran with.
func recoveryBlocked(f *startFacts) *block {
	if op := f.Operation; op != nil && op.SpecHash != f.SpecHash {
		return &block{Permanent: true, Reason: hookv1.ReasonSpecConflict, Message: fmt.Sprintf(
			"a DeliveryRecovery of this name already ran (started %s) with another spec; a recovery's name is its identity: "+
				"create one with a new name (metadata.generateName) to recover again", op.StartedAt.UTC().Format(time.RFC3339))}
	}
	wait := func(msg string, args ...any) *block {
		return &block{Reason: hookv1.ReasonWaitingForEndpoint, Message: fmt.Sprintf(msg, args...)}
	}
	switch ep := f.Endpoint; {
	case ep == nil:
		return wait("waiting for WebhookEndpoint %q: it does not exist in this namespace yet", f.EndpointName)
	case ep.DeletionTimestamp != nil:
		return wait("waiting for WebhookEndpoint %q: it is being deleted", f.EndpointName)
	case !f.Registered:
		msg := "it has not been reconciled yet"
		if c := meta.FindStatusCondition(ep.Status.Conditions, hookv1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
			msg = fmt.Sprintf("it is not Ready (%s: %s)", c.Reason, c.Message)
		}
		return wait("waiting for WebhookEndpoint %q to be registered with the delivery engine: %s", f.EndpointName, msg)
	}
	return nil
}

// recoverySpecHash identifies what a recovery was asked to do: its spec
// without ttlSecondsAfterFinished (which only says how long the object is
// kept), with its sets in a fixed order.
func recoverySpecHash(spec *hookv1.DeliveryRecoverySpec) (string, error) {
	s := spec.DeepCopy()
	s.TTLSecondsAfterFinished = nil
	if sel := s.Selector; sel != nil {
		slices.Sort(sel.DeliveryIDs)
		slices.Sort(sel.EventIDs)
		slices.Sort(sel.EventTypes)
	}
	if rp := s.Replay; rp != nil {
		slices.Sort(rp.EventTypes)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("hashing the spec: %w", err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// AutoAction decides what Auto does for one exhausted delivery: retry
// while the same event can still be replayed (its secrets and payload
// present, within the replay window), reissue otherwise.
//
// The event's type may say more (ledger.ExhaustedDelivery.AutoAction): a
// ReissueOnly or Never type, or an event past its validUntil, is never
// retried, and a type's own policy brings its replay window.
func AutoAction(ed *ledger.ExhaustedDelivery, replayWindow time.Duration, now time.Time) ledger.RecoveryAction {
	return ed.AutoAction(replayWindow, now)
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
		return AutoAction(ed, replayWindow, now)
	}
}

// itemOutcome is where one item stands, following what the recovery
// created to its end.
func itemOutcome(it *ledger.RecoveryItem) (hookv1.ItemOutcome, bool) {
	switch it.Outcome {
	case ledger.OutcomeSkipped:
		return hookv1.ItemSkipped, true
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
	switch it.Outcome {
	case ledger.OutcomeReissued:
		return hookv1.ItemReissued, it.NewDeliveryID == ""
	case ledger.OutcomeReplayed:
		return hookv1.ItemReplayed, false
	}
	return hookv1.ItemRetried, false
}

// recoveryProgress is what a reconcile learned: why the recovery does
// not run (Block), or its operation and items, and, while some of its
// re-sends wait, its endpoint's retry budget (Budget, nil when the
// endpoint has none or nothing waits).
type recoveryProgress struct {
	Block     *block
	Operation *ledger.RecoveryOperation
	Items     []ledger.RecoveryItem
	Budget    *budgetFacts
}

// budgetFacts are the retry budget a recovery's re-sends draw on and the
// endpoint's latest streak of deferrals, on any replica.
type budgetFacts struct {
	Budget    ledger.RetryBudget
	Deferrals ledger.DeferralStreak
}

// waitingResends counts the items whose re-send (a retry, a replay or a
// reissued copy) is scheduled: not sent yet, or waiting to be sent again.
func waitingResends(items []ledger.RecoveryItem) int {
	n := 0
	for i := range items {
		it := &items[i]
		if (it.Outcome == ledger.OutcomeRetried || it.Outcome == ledger.OutcomeReplayed || it.Outcome == ledger.OutcomeReissued) &&
			it.NewDeliveryID != "" && it.NewDeliveryState == ledger.StateScheduled {
			n++
		}
	}
	return n
}

// budgetWait says why waiting re-sends wait when it is the retry budget:
// its streak of deferrals still holds at now. ok is false otherwise.
func budgetWait(f *budgetFacts, waiting int, now time.Time) (message string, ok bool) {
	if f == nil || waiting == 0 || !f.Deferrals.Active(now) {
		return "", false
	}
	d, b := &f.Deferrals, &f.Budget
	message = fmt.Sprintf("%d re-sends wait for the endpoint's retry budget (%d retries per minute plus %d%% of the minute's first attempts, "+
		"spec.retryBudget of its RetryPolicy), which re-sends draw on like retries: it deferred %d retries and re-sends since %s, the last at %s; "+
		"they go out as later minutes allow, none is dropped",
		waiting, b.MinPerMinute, b.RatioPercent, d.Count, conditions.FormatTime(d.First), conditions.FormatTime(d.Last))
	if b.MinPerMinute == 0 {
		message += "; with minRetriesPerMinute 0 nothing is re-sent in a minute without first attempts"
	}
	return message, true
}

// recoveryStatus computes a DeliveryRecovery's status at now: the state,
// counts, the bounded item list and the conditions, all for the current
// generation.
func recoveryStatus(rec *hookv1.DeliveryRecovery, p *recoveryProgress, now time.Time) hookv1.DeliveryRecoveryStatus {
	st := *rec.Status.DeepCopy()
	st.ObservedGeneration = rec.Generation
	if p.Operation != nil {
		t := metav1.NewTime(p.Operation.StartedAt)
		st.StartTime = &t
	}
	st.Counts, st.Items = itemCounts(p.Items)

	var state hookv1.RecoveryState
	var reason, message string
	switch {
	case p.Block != nil && p.Block.Permanent:
		state, reason, message = hookv1.RecoveryFailed, p.Block.Reason, p.Block.Message
	case p.Block != nil:
		state, reason, message = hookv1.RecoveryWaiting, p.Block.Reason, p.Block.Message
	default:
		state, reason, message = itemsState(&st.Counts, p.Items, rec.Spec.Action == hookv1.RecoveryModeReplay)
		if wait, ok := budgetWait(p.Budget, waitingResends(p.Items), now); ok && state == hookv1.RecoveryRunning {
			reason, message = hookv1.ReasonBudgetExhausted, message+"; "+wait
		}
		if op := p.Operation; op != nil && op.ObjectUID != string(rec.UID) {
			message += fmt.Sprintf("; this operation first started at %s under an earlier DeliveryRecovery of this name and does not act again",
				op.StartedAt.UTC().Format(time.RFC3339))
		}
	}
	setRecoveryConditions(&st, rec.Generation, state, reason, message, now)

	meta.SetStatusCondition(&st.Conditions, reissueRequiredCondition(p.Items, rec.Spec.Action == hookv1.RecoveryModeReplay, rec.Generation, now))
	return st
}

// undecodableRecoveryStatus fails a recovery the Go types could not fully
// decode, without selecting anything: a selector bound that was left out
// would widen what it selects.
func undecodableRecoveryStatus(rec *hookv1.DeliveryRecovery, now time.Time) hookv1.DeliveryRecoveryStatus {
	st := *rec.Status.DeepCopy()
	st.ObservedGeneration = rec.Generation
	setRecoveryConditions(&st, rec.Generation, hookv1.RecoveryFailed, hookv1.ReasonInvalidSpec, conditions.Undecodable(rec.Undecodable), now)
	return st
}

// reissueRequiredCondition: True while items were refused a Retry (or a
// Replay) because their events' one-time secrets were scrubbed.
func reissueRequiredCondition(items []ledger.RecoveryItem, replay bool, generation int64, now time.Time) metav1.Condition {
	n := 0
	for i := range items {
		if items[i].Outcome == ledger.OutcomeRefused && refusalOf(items[i].Reason).Reason == hookv1.RefusedReissueRequired {
			n++
		}
	}
	c := metav1.Condition{Type: hookv1.ConditionReissueRequired, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now),
		Status: metav1.ConditionFalse, Reason: hookv1.ReasonNoneRefused, Message: "no item needs a reissue"}
	switch {
	case n > 0 && replay:
		c.Status, c.Reason = metav1.ConditionTrue, hookv1.RefusedReissueRequired
		c.Message = fmt.Sprintf("%d events cannot be replayed: their one-time secrets were scrubbed, or their types allow only a reissue; create a Replay with replay.onUnreplayable: Reissue (under a new name) for them", n)
	case n > 0:
		c.Status, c.Reason = metav1.ConditionTrue, hookv1.RefusedReissueRequired
		c.Message = fmt.Sprintf("%d deliveries cannot be retried: their events' one-time secrets were scrubbed, or their types allow only a reissue; create a DeliveryRecovery with action Reissue or Auto for them", n)
	}
	return c
}

// itemsState is where a started recovery (a replay when replay is set)
// stands by its items.
func itemsState(c *hookv1.RecoveryCounts, items []ledger.RecoveryItem, replay bool) (hookv1.RecoveryState, string, string) {
	settled := 0
	for i := range items {
		if _, done := itemOutcome(&items[i]); done {
			settled++
		}
	}
	switch {
	case len(items) == 0 && replay:
		return hookv1.RecoveryComplete, hookv1.ReasonNothingMatched, "no event of the namespace matched the replay's window and types"
	case len(items) == 0:
		return hookv1.RecoveryComplete, hookv1.ReasonNothingMatched, "no unresolved exhausted delivery of the endpoint matched the selector"
	case settled == len(items) && replay:
		return hookv1.RecoveryComplete, hookv1.ReasonAllItemsSettled, fmt.Sprintf("%d of %d items settled: %d delivered, %d failed again, %d refused, %d skipped (already on their way)",
			settled, len(items), c.Delivered, c.FailedAgain, c.Refused, c.Skipped)
	case settled == len(items):
		return hookv1.RecoveryComplete, hookv1.ReasonAllItemsSettled, fmt.Sprintf("%d of %d items settled: %d delivered, %d failed again, %d refused, %d dismissed",
			settled, len(items), c.Delivered, c.FailedAgain, c.Refused, c.Dismissed)
	default:
		return hookv1.RecoveryRunning, hookv1.ReasonRunning, fmt.Sprintf("%d of %d items settled; %d await the producer's reissue", settled, len(items), c.AwaitingReissue)
	}
}

// setRecoveryConditions sets state and the Complete and Failed conditions
// so that they always agree:
//
//	state     Complete                    Failed
//	Waiting   False WaitingForEndpoint    False NotFailed
//	Running   False Running               False NotFailed
//	Complete  True  AllItemsSettled|...   False NotFailed
//	Failed    False Failed                True  <why>
//
// completionTime is set once, on reaching Complete or Failed.
func setRecoveryConditions(st *hookv1.DeliveryRecoveryStatus, generation int64, state hookv1.RecoveryState, reason, message string, now time.Time) {
	st.State = state
	cond := func(typ string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message,
			ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)})
	}
	notFailed := "the operation has not failed"
	switch state {
	case hookv1.RecoveryFailed:
		cond(hookv1.ConditionComplete, metav1.ConditionFalse, hookv1.ReasonFailed, "the operation failed and will not run: "+message)
		cond(hookv1.ConditionFailed, metav1.ConditionTrue, reason, message)
	case hookv1.RecoveryComplete:
		cond(hookv1.ConditionComplete, metav1.ConditionTrue, reason, message)
		cond(hookv1.ConditionFailed, metav1.ConditionFalse, hookv1.ReasonNotFailed, notFailed)
	default:
		cond(hookv1.ConditionComplete, metav1.ConditionFalse, reason, message)
		cond(hookv1.ConditionFailed, metav1.ConditionFalse, hookv1.ReasonNotFailed, notFailed)
	}
	conditions.SetRecoveryKstatus(&st.Conditions, state, generation, metav1.NewTime(now))
	if (state == hookv1.RecoveryComplete || state == hookv1.RecoveryFailed) && st.CompletionTime == nil {
		t := metav1.NewTime(now)
		st.CompletionTime = &t
	}
}

// itemCounts counts the items by outcome and lists the first
// maxStatusItems of them.
func itemCounts(items []ledger.RecoveryItem) (hookv1.RecoveryCounts, []hookv1.RecoveryItem) {
	c := hookv1.RecoveryCounts{Matched: int32(len(items))}
	var list []hookv1.RecoveryItem
	for i := range items {
		it := &items[i]
		outcome, _ := itemOutcome(it)
		switch it.Outcome {
		case ledger.OutcomeRetried:
			c.Retried++
		case ledger.OutcomeReissued:
			c.Reissued++
		case ledger.OutcomeAwaitingReissue:
			c.AwaitingReissue++
		case ledger.OutcomeRefused:
			c.Refused++
		case ledger.OutcomeDismissed:
			c.Dismissed++
		case ledger.OutcomeReplayed:
			c.Replayed++
		case ledger.OutcomeSkipped:
			c.Skipped++
		}
		switch outcome {
		case hookv1.ItemDelivered:
			c.Delivered++
		case hookv1.ItemFailedAgain:
			c.FailedAgain++
		}
		if len(list) < maxStatusItems {
			list = append(list, hookv1.RecoveryItem{
				DeliveryID: it.DeliveryID, EventID: it.EventID, Action: hookv1.RecoveryAction(it.Action),
				Outcome: outcome, Reason: refusalOf(it.Reason).Reason, Message: refusalOf(it.Reason).Message,
				NewDeliveryID: it.NewDeliveryID, NewEventID: it.NewEventID,
			})
		}
	}
	return c, list
}

// refusal is how an item the engine refused reads in the status.
type refusal struct {
	// Reason is one of hookv1's Refused* reasons.
	Reason  string
	Message string
}

// refusals maps the delivery engine's refusal (and skip) reasons onto the
// API's: the one place where one becomes the other.
var refusals = map[string]refusal{
	ledger.RefusedReissueRequired:      {hookv1.RefusedReissueRequired, "the event's one-time secrets were scrubbed, or its type allows only a reissue (WebhookEventType replay: ReissueOnly): only a reissue can resolve it"},
	ledger.RefusedNotReplayable:        {hookv1.RefusedNotReplayable, "the event's type may never be sent again (WebhookEventType replay: Never): only a Dismiss resolves it"},
	ledger.RefusedExpired:              {hookv1.RefusedExpired, "the event is past its validUntil: it can no longer be delivered; only a Dismiss resolves it"},
	ledger.RefusedReplayWindowExceeded: {hookv1.RefusedReplayWindowExceeded, "the event is past its replay window: only a reissue can resolve it"},
	ledger.RefusedPayloadExpired:       {hookv1.RefusedPayloadExpired, "the event's payload was pruned: only a reissue can resolve it"},
	ledger.RefusedNoReissueHandler:     {hookv1.RefusedNoReissueHandler, "no endpoint in the namespace subscribes to hookkeeper.reissue.requested"},
	ledger.RefusedAlreadyResolved:      {hookv1.RefusedAlreadyResolved, "the delivery was already resolved by another recovery"},
	ledger.SkippedAlreadyPending:       {hookv1.SkippedAlreadyPending, "a delivery of the event to the endpoint is already on its way: nothing was sent"},
}

// refusalOf is the API's reason and message for an item's ledger reason;
// zero for an item that was not refused.
func refusalOf(ledgerReason string) refusal { return refusals[ledgerReason] }
