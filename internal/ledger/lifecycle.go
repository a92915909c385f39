package ledger

import (
	"context"
	"errors"
	"time"
)

// Lifecycle is the part of the Store that applies the lessons beyond plain
// delivery: acknowledgements (a 2xx is not business success), one-time
// secrets that do not outlive their use, retention of payloads and
// evidence (Settlement), and retry budgets and recovery operations
// (Recovery). Both drivers implement it; the conformance suite covers it
// like the rest of the Store.
type Lifecycle interface {
	Settlement
	Recovery
	HeldAcks
}

// Settlement settles what happens after an attempt: acknowledgements, the
// scrubbing of one-time secrets, and retention.
type Settlement interface {
	// AckRecord applies a receiver's acknowledgement to a delivery in
	// awaiting_ack: processed → delivered; rejected → exhausted with reason
	// AckRejected (resolution unresolved, LastError = the receiver's reason,
	// dead-lettered like any exhaustion). A delivery in another state gives
	// ErrNotAwaitingAck and nothing changes; an unknown one ErrNotFound.
	AckRecord(ctx context.Context, params *AckRecordParams) (AckResult, error)
	// AckExpiredList lists deliveries in awaiting_ack whose AckDeadline is at
	// or before now, earliest deadline first.
	AckExpiredList(ctx context.Context, now time.Time, limit int) ([]Delivery, error)
	// AckTimeoutRecord moves a delivery whose acknowledgement did not come in
	// time to Next: scheduled (a retry on the policy; the accepted attempt
	// counts as failed, so Attempts does not change) or exhausted (reason
	// AckTimeout). It applies only while the delivery is still awaiting_ack
	// with AckDeadline <= Now, else ErrNotAwaitingAck, so a late ack and the
	// timeout cannot both win.
	AckTimeoutRecord(ctx context.Context, params *AckTimeoutParams) (AckResult, error)

	// SecretsScrubDue scrubs the secrets of events whose grace period ended
	// at or before now and that still have no pending delivery, up to limit;
	// it returns how many were scrubbed. (With a grace period of 0 the scrub
	// happens in the transaction that ends the last pending delivery, see
	// the Store doc.)
	SecretsScrubDue(ctx context.Context, now time.Time, limit int) (int, error)
	// Compact makes scrubbed and pruned bytes unrecoverable from the
	// database files: SQLite checkpoints and truncates its WAL (pages are
	// overwritten on delete: secure_delete is on); PostgreSQL vacuums the
	// tables that held secrets.
	Compact(ctx context.Context) error
	// Prune removes, in one bounded batch, the payloads (event data and
	// attempt response excerpts) of events that have been terminal for
	// longer than their payload retention, and whole events (with their
	// deliveries and attempts, idempotency key included) terminal for longer
	// than their evidence retention. An event's retention is the longest
	// among the policies of the endpoints it was delivered to; events
	// without deliveries use the params' defaults.
	Prune(ctx context.Context, params *PruneParams) (PruneResult, error)
}

// Recovery bounds automatic retries and resolves exhausted deliveries.
type Recovery interface {
	// RetryBudgetAcquire takes one retry from an endpoint's budget for the
	// minute of Now: allowed while retries < RatioPercent × first attempts
	// / 100 + MinPerMinute, counting the first attempts recorded by
	// AttemptRecordMany in that minute, and paced evenly over the minute
	// (NextRetryAt). It is atomic across processes: two engines on one
	// PostgreSQL cannot spend the same allowance. Refused, it says when the
	// next retry may be taken.
	RetryBudgetAcquire(ctx context.Context, params *RetryBudgetParams) (RetryBudgetAnswer, error)
	// RetryDeferrals: the retries the budget put off (deferrals.go).
	RetryDeferrals

	// ExhaustedList lists an endpoint's unresolved exhausted deliveries
	// matching the selector, oldest exhaustion first.
	ExhaustedList(ctx context.Context, params *ExhaustedListParams) ([]ExhaustedDelivery, error)
	// RecoveryApply applies one recovery action to one exhausted delivery,
	// idempotently: the (OperationKey, DeliveryID) pair is applied once, and
	// a repeated call returns the recorded result with Replayed set. See
	// RecoveryAction for what each action does.
	RecoveryApply(ctx context.Context, params *RecoveryApplyParams) (RecoveryItem, error)
	// RecoveryItemsList returns the items of an operation with the current
	// state of the deliveries they created, so that the operation can be
	// followed to its outcome.
	RecoveryItemsList(ctx context.Context, operationKey string) ([]RecoveryItem, error)
	// RecoveryOperationStart records an operation the first time it starts
	// and returns that first record on every later call, whatever those
	// calls pass (Created tells which): the operation's cutoff (StartedAt)
	// and the hash of what it was asked to do outlive the object that
	// named it, so a re-created DeliveryRecovery finds them. Concurrent
	// first calls create one record.
	RecoveryOperationStart(ctx context.Context, params *RecoveryOperationParams) (RecoveryOperation, error)

	// ReplayList lists the events of a namespace created in [Since, Until)
	// whose type ReplaySelects, oldest first (by ID, which sorts by
	// creation to the millisecond), for a replay to consider.
	ReplayList(ctx context.Context, params *ReplayListParams) ([]ReplayCandidate, error)
	// ReplayApply sends one event to one endpoint of its namespace for a
	// replay operation, idempotently: the (OperationKey, EventID) pair is
	// applied once, and a repeated call returns the recorded item (Action
	// Replay, no DeliveryID) with Replayed set. PlanReplay decides: an
	// event already on its way to the endpoint is Skipped; one that cannot
	// be sent under its own identity is Refused with the reason a Retry
	// gives, or reissued to the endpoint (OnUnreplayable Reissue: a copy,
	// or a reissue request answered as for a Reissue); otherwise a new
	// delivery of the same event (same webhook-id) to the endpoint is
	// scheduled at Now: Outcome Replayed. The event's unresolved exhausted
	// delivery to the endpoint, if any, is the new delivery's RetryOf and
	// is resolved retried (reissued by a copy). Other deliveries never
	// change. An unknown event is ErrNotFound, an endpoint that does not
	// exist ErrEndpointDeleted; nothing is recorded then.
	ReplayApply(ctx context.Context, params *ReplayApplyParams) (RecoveryItem, error)
}

// ErrNotAwaitingAck means the delivery is not waiting for an
// acknowledgement (never was, or already finished).
var ErrNotAwaitingAck = errors.New("delivery is not awaiting an acknowledgement")

// AckOutcome is what a receiver's acknowledgement says.
type AckOutcome string

const (
	AckProcessed AckOutcome = "processed"
	AckRejected  AckOutcome = "rejected"
)

// MaxAckReason bounds the receiver's reason kept with a rejection.
const MaxAckReason = 256

// AckRecordParams is one acknowledgement.
type AckRecordParams struct {
	DeliveryID string
	Outcome    AckOutcome
	// Reason is the receiver's reason (rejections), at most MaxAckReason
	// bytes; the store truncates.
	Reason string
	Now    time.Time
}

// AckTimeoutParams moves a timed-out delivery on.
type AckTimeoutParams struct {
	DeliveryID string
	Next       Next
	Now        time.Time
}

// AckResult is the delivery after an acknowledgement or a timeout.
type AckResult struct {
	Delivery   Delivery
	DeadLetter *Delivery
}

// PruneParams bounds one prune batch.
type PruneParams struct {
	Now time.Time
	// Limit bounds the events touched per call (default 500), so that
	// pruning never holds the writer long enough to stall dispatch.
	Limit int
	// Retention of events that have no delivery.
	DefaultPayloadRetention  time.Duration
	DefaultEvidenceRetention time.Duration
}

// PruneResult counts what one Prune call removed.
type PruneResult struct {
	PayloadsPruned int
	EventsDeleted  int
}

// RetryBudgetParams asks for one retry.
type RetryBudgetParams struct {
	EndpointID string
	Budget     RetryBudget
	Now        time.Time
}

// ExhaustedListParams selects unresolved exhausted deliveries of one
// endpoint; criteria are ANDed, empty ones do not filter.
type ExhaustedListParams struct {
	EndpointID  string
	DeliveryIDs []string
	EventIDs    []string
	// EventTypes are patterns as in Endpoint.EventTypes.
	EventTypes []string
	// ExhaustedAfter (inclusive) and ExhaustedBefore (exclusive) bound
	// TerminalAt.
	ExhaustedAfter  time.Time
	ExhaustedBefore time.Time
	// Limit defaults to 100, at most 10000.
	Limit int
}

// ExhaustedDelivery is an unresolved exhausted delivery with what a
// recovery needs to know about its event.
type ExhaustedDelivery struct {
	Delivery  Delivery
	EventType string
	// SecretsScrubbed: the event carried secrets and they are gone, so only
	// a reissue can resolve it.
	SecretsScrubbed bool
	// PayloadPruned: the event's data is gone.
	PayloadPruned bool
	// FirstAttemptAt of the event (its earliest delivery attempt), from
	// which the replay window is measured; the event's CreatedAt if none.
	ReplayFrom time.Time
	// The event's contract (docs/adr/0038): its type's ReplayClass, its
	// ValidUntil, and the replay window of its PolicyOverride (0 without
	// one: the endpoint's applies). AutoAction reads them.
	ReplayClass          ReplayClass
	ValidUntil           *time.Time
	OverrideReplayWindow time.Duration
}

// RecoveryAction is what a recovery does for one delivery.
//
//   - Retry: a new delivery of the same event (same webhook-id) to the same
//     endpoint, due at once, linked by RetryOf; the original gains
//     resolution retried. Refused with ReissueRequired when the event's
//     secrets were scrubbed, ReplayWindowExceeded when Now is past
//     ReplayFrom + the endpoint policy's ReplayWindow, PayloadExpired when
//     its data was pruned.
//   - Reissue: a new event identity linked by ReissueOf. When the event is
//     complete (payload present) and carries no secrets, the engine copies
//     it (new ID NewEventID, same type and data) with one delivery to the
//     same endpoint: Outcome Reissued, the original resolution reissued.
//     Otherwise a hookkeeper.reissue.requested event (ID NewEventID, data
//     ReissueRequestData, no secrets) is inserted for the namespace's
//     endpoints subscribed to it: Outcome AwaitingReissue; when the
//     producer publishes the replacement with ReissueOf = the original
//     event, EventInsertMany completes the item (Outcome Reissued,
//     NewEventID the replacement, the original resolution reissued). No
//     subscriber: Refused with NoReissueHandler.
//   - Dismiss: resolution dismissed, nothing is sent.
//
// The original delivery is never reset: it keeps its state and attempts and
// only gains a resolution. A delivery that is no longer unresolved is
// Refused with AlreadyResolved.
type RecoveryAction string

const (
	RecoveryRetry   RecoveryAction = "Retry"
	RecoveryReissue RecoveryAction = "Reissue"
	RecoveryDismiss RecoveryAction = "Dismiss"
)

// RecoveryOutcome is where a recovery item stands.
type RecoveryOutcome string

const (
	OutcomeRetried         RecoveryOutcome = "Retried"
	OutcomeReissued        RecoveryOutcome = "Reissued"
	OutcomeAwaitingReissue RecoveryOutcome = "AwaitingReissue"
	OutcomeRefused         RecoveryOutcome = "Refused"
	OutcomeDismissed       RecoveryOutcome = "Dismissed"
)

// Refusal reasons of a recovery item.
const (
	RefusedReissueRequired      = "ReissueRequired"
	RefusedReplayWindowExceeded = "ReplayWindowExceeded"
	RefusedPayloadExpired       = "PayloadExpired"
	RefusedNoReissueHandler     = "NoReissueHandler"
	RefusedAlreadyResolved      = "AlreadyResolved"
)

// ReissueRequestedEventType is the type of the event that asks a producer
// to mint fresh material for an event that cannot be replayed.
const ReissueRequestedEventType = "hookkeeper.reissue.requested"

// ReissueRequestData is the data of a hookkeeper.reissue.requested event.
// It carries no secrets: the producer mints new ones.
type ReissueRequestData struct {
	OriginalEventID string   `json:"originalEventID"`
	EventType       string   `json:"eventType"`
	DeliveryID      string   `json:"deliveryID"`
	Endpoint        string   `json:"endpoint"`
	Operation       string   `json:"operation"`
	SecretNames     []string `json:"secretNames,omitempty"`
}

// RecoveryApplyParams applies Action to one delivery for one operation.
type RecoveryApplyParams struct {
	OperationKey string
	DeliveryID   string
	Action       RecoveryAction
	// NewEventID and NewDeliveryID are generated by the caller (NewID) and
	// used when the action creates an event or a delivery.
	NewEventID    string
	NewDeliveryID string
	Now           time.Time
}

// RecoveryItem is the recorded result of RecoveryApply, and its progress.
type RecoveryItem struct {
	OperationKey  string
	DeliveryID    string
	EventID       string
	Action        RecoveryAction
	Outcome       RecoveryOutcome
	Reason        string
	NewEventID    string
	NewDeliveryID string
	// NewDeliveryState is the current state of NewDeliveryID ("" if none),
	// for following the item to delivered or exhausted again.
	NewDeliveryState DeliveryState
	CreatedAt        time.Time
	// Replayed is set when RecoveryApply found the pair already applied.
	Replayed bool
}

// RecoveryOperationParams starts an operation.
type RecoveryOperationParams struct {
	// Key is the operation's identity (see RecoveryOperationKey), the key
	// of its items in RecoveryApply.
	Key string
	// SpecHash identifies what the operation was asked to do; a later
	// start under the same key with another hash is the caller's to refuse.
	SpecHash string
	// ObjectUID is the UID of the object that starts it, so that a later
	// object of the same name can tell it did not start it.
	ObjectUID string
	// Now becomes StartedAt of a new record.
	Now time.Time
}

// RecoveryOperation is an operation's first record.
type RecoveryOperation struct {
	Key      string
	SpecHash string
	// ObjectUID is the UID of the object that first started it.
	ObjectUID string
	// StartedAt is when the operation first started: it considers only
	// deliveries exhausted before it.
	StartedAt time.Time
	// Created is set when this call created the record.
	Created bool
}
