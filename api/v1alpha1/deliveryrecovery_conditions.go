package v1alpha1

// Reasons of a DeliveryRecovery's conditions. Complete and Failed always
// agree with status.state:
//
//	state     Complete                                Failed
//	Waiting   False WaitingForEndpoint                False NotFailed
//	Running   False Running | BudgetExhausted         False NotFailed
//	Complete  True  AllItemsSettled | NothingMatched  False NotFailed
//	Failed    False Failed                            True  SpecConflict | InvalidSpec
const (
	// ReasonWaitingForEndpoint (Complete=False, transient): the endpoint
	// does not exist yet, is being deleted, or is not registered with the
	// delivery engine yet. The recovery starts once it is.
	ReasonWaitingForEndpoint = "WaitingForEndpoint"
	// ReasonRunning (Complete=False): the recovery started and some items
	// have not reached their outcome yet.
	ReasonRunning = "Running"
	// ReasonBudgetExhausted (Complete=False): the recovery runs, and its
	// re-sends wait for the endpoint's retry budget, which deferred retries
	// or re-sends within the last 2 minutes: a recovery's re-sends draw on
	// the budget like retries (docs/adr/0035) and go out as later minutes
	// allow, none dropped. The message says how many wait and the budget.
	ReasonBudgetExhausted = "BudgetExhausted"
	// ReasonAllItemsSettled (Complete=True): every item reached its
	// outcome (delivered, failed again, refused or dismissed).
	ReasonAllItemsSettled = "AllItemsSettled"
	// ReasonNothingMatched (Complete=True): no unresolved exhausted delivery
	// of the endpoint matched the selector (for a Replay: no event matched
	// the window and types).
	ReasonNothingMatched = "NothingMatched"
	// ReasonFailed (Complete=False): the recovery failed and will not run;
	// the Failed condition says why.
	ReasonFailed = "Failed"
	// ReasonNotFailed (Failed=False): the recovery is waiting, running or
	// complete.
	ReasonNotFailed = "NotFailed"
	// ReasonSpecConflict (Failed=True, permanent): an earlier
	// DeliveryRecovery of this name ran with another spec; a recovery's name
	// is its identity. (Failed=True with InvalidSpec: the stored spec has
	// values the operator cannot decode, and nothing was selected.)
	ReasonSpecConflict = "SpecConflict"
	// ReasonNoneRefused (ReissueRequired=False): no item was refused for
	// want of a reissue.
	ReasonNoneRefused = "NoneRefused"
)

// Reasons an item is refused, in status.items[].reason. The delivery engine
// refuses a recovery action for one delivery with these (the controller
// maps the engine's refusals onto them in one place); a refused delivery
// stays unresolved. RefusedReissueRequired is also the reason of
// ReissueRequired=True.
const (
	// RefusedReissueRequired: a Retry was refused because the event's
	// one-time secrets were scrubbed; only a Reissue can resolve it.
	RefusedReissueRequired = "ReissueRequired"
	// RefusedReplayWindowExceeded: a Retry was refused because the event is
	// older than its policy's replay window; only a Reissue can resolve it.
	RefusedReplayWindowExceeded = "ReplayWindowExceeded"
	// RefusedPayloadExpired: a Retry was refused because the event's
	// payload was pruned after its retention; only a Reissue can resolve it.
	RefusedPayloadExpired = "PayloadExpired"
	// RefusedNoReissueHandler: a Reissue was refused because no endpoint in
	// the namespace subscribes to hookkeeper.reissue.requested, so nobody can
	// mint the event again.
	RefusedNoReissueHandler = "NoReissueHandler"
	// RefusedAlreadyResolved: another recovery resolved the delivery first.
	RefusedAlreadyResolved = "AlreadyResolved"
	// RefusedNotReplayable: a Retry, a Reissue or a replay was refused
	// because the event's WebhookEventType says replay: Never; only a
	// Dismiss resolves it.
	RefusedNotReplayable = "NotReplayable"
	// RefusedExpired: a Retry or a replay was refused because the event's
	// validUntil has passed (nothing is sent late); a Reissue asks its
	// producer for a fresh event.
	RefusedExpired = "Expired"
)

// SkippedAlreadyPending is the reason of a Replay's Skipped item: a
// delivery of the event to the endpoint is scheduled, in flight or
// awaiting its acknowledgement, so it is already on its way and the
// replay sends nothing.
const SkippedAlreadyPending = "AlreadyPending"
