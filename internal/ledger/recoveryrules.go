package ledger

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The rules of Recovery that both drivers apply identically: the retry
// budget's arithmetic, the ExhaustedList limit, what an exhausted delivery
// looks like to a recovery, and the decision RecoveryApply takes for one
// item. The drivers only gather the facts and write the outcome.

// ExhaustedList limits (ExhaustedListParams.Limit).
const (
	DefaultExhaustedLimit = 100
	MaxExhaustedLimit     = 10000
)

// ExhaustedLimit returns the effective ExhaustedList limit.
func ExhaustedLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultExhaustedLimit
	case limit > MaxExhaustedLimit:
		return MaxExhaustedLimit
	default:
		return limit
	}
}

// BudgetMinute is the retry-budget bucket of now: its Unix minute.
func BudgetMinute(now time.Time) int64 {
	s := now.Unix()
	m := s / 60
	if s < 0 && s%60 != 0 {
		m-- // floor, not truncation, before 1970
	}
	return m
}

// BudgetRetention is how long a retry-budget bucket is kept: older buckets
// no longer decide anything and may be deleted.
const BudgetRetention = time.Hour

// Allowance is how many retries the budget allows in a minute in which
// firstAttempts first attempts were recorded: RatioPercent × firstAttempts
// / 100 (rounded down) + MinPerMinute. A retry is allowed while the retries
// already taken are fewer.
func (b RetryBudget) Allowance(firstAttempts int64) int64 {
	return int64(b.RatioPercent)*firstAttempts/100 + int64(b.MinPerMinute)
}

// SpendsRetryBudget reports whether an attempt of d takes one retry from
// its endpoint's retry budget: every attempt after the first, and a
// re-send's first attempt. A recovery or a replay then costs the receiver
// no more than the retries the budget allows, whoever asked for them
// (docs/adr/0035).
func (d *Delivery) SpendsRetryBudget() bool { return d.Attempts > 0 || d.Resend }

// SecretsScrubbed reports whether e carried one-time secrets that are gone.
func (e *Event) SecretsScrubbed() bool { return len(e.SecretNames) > 0 && len(e.Secrets) == 0 }

// PayloadPruned reports whether e's data was removed by retention.
func (e *Event) PayloadPruned() bool { return e.PayloadPrunedAt != nil || len(e.Data) == 0 }

// ReplayFrom is the instant from which an event's replay window is
// measured: the earliest first attempt among its deliveries
// (firstAttempt, nil when none was attempted), else its creation.
func ReplayFrom(firstAttempt *time.Time, createdAt time.Time) time.Time {
	if firstAttempt != nil {
		return *firstAttempt
	}
	return createdAt
}

// RecoveryFacts is what RecoveryApply knows about one delivery when it
// decides: the delivery, its event (as stored), its endpoint's policy, and
// when the event was first attempted.
type RecoveryFacts struct {
	Delivery Delivery
	Event    Event
	// Policy is the delivery's endpoint's policy; EndpointDeleted is set
	// when that endpoint no longer exists (nothing may be sent to it).
	Policy          Policy
	EndpointDeleted bool
	// ReplayFrom is ReplayFrom of the event.
	ReplayFrom time.Time
}

// RecoveryStep is what RecoveryApply does for one item.
type RecoveryStep int

const (
	// StepRefuse records a refusal and changes nothing else.
	StepRefuse RecoveryStep = iota
	// StepRetry inserts a new delivery of the same event (RetryOf).
	StepRetry
	// StepReissueCopy inserts a copy of the event (ReissueOf) with one
	// delivery to the same endpoint.
	StepReissueCopy
	// StepReissueRequest inserts a hookkeeper.reissue.requested event for
	// the namespace's subscribers (refused with NoReissueHandler when
	// there is none).
	StepReissueRequest
	// StepDismiss resolves the delivery as dismissed.
	StepDismiss
	// StepReplay inserts a new delivery of the same event to the replay's
	// endpoint (RetryOf its unresolved exhausted delivery there, if any).
	StepReplay
	// StepSkip records that the event is already on its way to the
	// endpoint and changes nothing else.
	StepSkip
)

// ErrEndpointDeleted is returned by RecoveryApply for a Retry or a Reissue
// of a delivery whose endpoint was deleted: nothing can be sent to it.
// Dismiss still works. Nothing is recorded, so the call may be repeated.
var ErrEndpointDeleted = fmt.Errorf("the delivery's endpoint was deleted: %w", ErrNotFound)

// PlanRecovery decides what action does for the delivery described by f at
// now, and why it is refused (reason, with StepRefuse). The checks, in
// order: a delivery that is not exhausted and unresolved is refused with
// AlreadyResolved; then, for Retry, the reasons of ResendRefusal under the
// policy in force (the event's PolicyFor the endpoint's). Reissue is
// refused with NotReplayable for an event of a type that is never
// replayed; else it copies an event that is complete, never carried
// secrets and has not expired, and asks the producer for a replacement
// otherwise. An unknown action is an error.
func PlanRecovery(action RecoveryAction, f *RecoveryFacts, now time.Time) (RecoveryStep, string, error) {
	switch action {
	case RecoveryRetry, RecoveryReissue, RecoveryDismiss:
	default:
		return StepRefuse, "", fmt.Errorf("recovery action %q is not one of Retry, Reissue, Dismiss", action)
	}
	d := &f.Delivery
	if d.State != StateExhausted || d.Resolution != ResolutionUnresolved {
		return StepRefuse, RefusedAlreadyResolved, nil
	}
	if f.EndpointDeleted && action != RecoveryDismiss {
		return StepRefuse, "", fmt.Errorf("recover delivery %s (endpoint %s): %w", d.ID, d.EndpointID, ErrEndpointDeleted)
	}
	switch action {
	case RecoveryRetry:
		if reason := ResendRefusal(&f.Event, f.Event.PolicyFor(&f.Policy).ReplayWindow, f.ReplayFrom, now); reason != "" {
			return StepRefuse, reason, nil
		}
		return StepRetry, "", nil
	case RecoveryReissue:
		if !f.Event.Reissuable() {
			return StepRefuse, RefusedNotReplayable, nil
		}
		return reissueStep(&f.Event, now), "", nil
	default:
		return StepDismiss, "", nil
	}
}

// ResendRefusal is why event e cannot be sent again under its own
// identity at now ("" when it can), in this order: its type's contract
// (ContractRefusal: NotReplayable, ReissueRequired for a type that is
// only reissued, Expired past its ValidUntil), ReissueRequired (its
// one-time secrets were scrubbed), ReplayWindowExceeded (now is after
// replayFrom + window; a 0 window has no limit), PayloadExpired (its data
// was pruned). A Retry and a Replay refuse alike.
func ResendRefusal(e *Event, window time.Duration, replayFrom, now time.Time) string {
	if reason := ContractRefusal(e, now); reason != "" {
		return reason
	}
	switch {
	case e.SecretsScrubbed():
		return RefusedReissueRequired
	case window > 0 && now.After(replayFrom.Add(window)):
		return RefusedReplayWindowExceeded
	case e.PayloadPruned():
		return RefusedPayloadExpired
	}
	return ""
}

// reissueStep is how e is reissued at now: copied when it is complete,
// never carried secrets and has not expired (a copy keeps its ValidUntil,
// so it would only be cancelled), else asked of its producer, who mints a
// fresh one.
func reissueStep(e *Event, now time.Time) RecoveryStep {
	if len(e.SecretNames) == 0 && !e.PayloadPruned() && !e.Expired(now) {
		return StepReissueCopy
	}
	return StepReissueRequest
}

// Outcome is the RecoveryOutcome of a step that was carried out.
func (s RecoveryStep) Outcome() RecoveryOutcome {
	switch s {
	case StepRetry:
		return OutcomeRetried
	case StepReissueCopy:
		return OutcomeReissued
	case StepReissueRequest:
		return OutcomeAwaitingReissue
	case StepDismiss:
		return OutcomeDismissed
	case StepReplay:
		return OutcomeReplayed
	case StepSkip:
		return OutcomeSkipped
	default:
		return OutcomeRefused
	}
}

// Resolution is the resolution the original delivery gains when the step
// is carried out (none for a refusal or a pending reissue request).
func (s RecoveryStep) Resolution() Resolution {
	switch s {
	case StepRetry, StepReplay:
		return ResolutionRetried
	case StepReissueCopy:
		return ResolutionReissued
	case StepDismiss:
		return ResolutionDismissed
	default:
		return ResolutionNone
	}
}

// NewReissueRequestData describes the reissue request of operation for
// delivery d of event e.
func NewReissueRequestData(d *Delivery, e *Event, operation string) ReissueRequestData {
	return ReissueRequestData{
		OriginalEventID: e.ID,
		EventType:       e.Type,
		DeliveryID:      d.ID,
		Endpoint:        d.EndpointID,
		Operation:       operation,
		SecretNames:     e.SecretNames,
	}
}

// NewExhaustedDelivery describes an unresolved exhausted delivery for
// ExhaustedList from its event's type and what is left of the event.
func NewExhaustedDelivery(d Delivery, eventType string, secretNames []string, hasSecrets, payloadPruned bool, replayFrom time.Time) ExhaustedDelivery {
	return ExhaustedDelivery{
		Delivery:        d,
		EventType:       eventType,
		SecretsScrubbed: len(secretNames) > 0 && !hasSecrets,
		PayloadPruned:   payloadPruned,
		ReplayFrom:      replayFrom,
	}
}

// ValidateRecoveryApply reports why params cannot be applied at all.
func ValidateRecoveryApply(p *RecoveryApplyParams) error {
	switch {
	case p == nil:
		return fmt.Errorf("recovery apply: nil params")
	case p.OperationKey == "" || p.DeliveryID == "":
		return fmt.Errorf("recovery apply: OperationKey and DeliveryID are required")
	}
	return nil
}

// ValidateRecoveryOperation reports why an operation cannot be started.
func ValidateRecoveryOperation(p *RecoveryOperationParams) error {
	switch {
	case p == nil:
		return fmt.Errorf("recovery operation start: nil params")
	case p.Key == "" || p.SpecHash == "":
		return fmt.Errorf("recovery operation start: Key and SpecHash are required")
	case p.Now.IsZero():
		return fmt.Errorf("recovery operation start: Now is required")
	}
	return nil
}

// RecoveryOperationKey is the ledger identity of the DeliveryRecovery
// named name in namespace: its name, not its UID, so that deleting the
// object and applying it again (a TTL followed by a GitOps sync) finds the
// same operation and acts no second time. See docs/adr/0007.
func RecoveryOperationKey(namespace, name string) string {
	return "drec:" + namespace + "/" + name
}

// NewIDs returns the IDs of the event and the delivery an item may create:
// the caller's, or fresh ones when the caller left them empty.
func (p *RecoveryApplyParams) NewIDs() (eventID, deliveryID string) {
	eventID, deliveryID = p.NewEventID, p.NewDeliveryID
	if eventID == "" {
		eventID = NewID("evt", p.Now)
	}
	if deliveryID == "" {
		deliveryID = NewID("dlv", p.Now)
	}
	return eventID, deliveryID
}

// BudgetBucket is the first attempts one transaction adds to one
// endpoint's retry-budget minute.
type BudgetBucket struct {
	EndpointID string
	Minute     int64
	Count      int64
}

// FirstAttempts counts a transaction's first attempts per budget bucket,
// for AttemptRecordMany to add in one place whatever the driver.
type FirstAttempts map[BudgetBucket]int64

// Note counts res, the result of p, when it recorded a delivery's first
// attempt. A re-send's first attempt is not one (Delivery.Resend): it spent
// the budget instead, and counting it would raise the allowance it draws
// from.
func (fa FirstAttempts) Note(p *AttemptRecordParams, res AttemptRecordResult) {
	if res.Err == nil && !p.Unsent && res.Delivery.Attempts == 1 && !res.Delivery.Resend {
		fa[BudgetBucket{EndpointID: res.Delivery.EndpointID, Minute: BudgetMinute(p.Now)}]++
	}
}

// Buckets returns the counts ordered by endpoint and minute, the order in
// which drivers lock the buckets.
func (fa FirstAttempts) Buckets() []BudgetBucket {
	out := make([]BudgetBucket, 0, len(fa))
	for k, n := range fa {
		k.Count = n
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b BudgetBucket) int {
		return cmp.Or(strings.Compare(a.EndpointID, b.EndpointID), cmp.Compare(a.Minute, b.Minute))
	})
	return out
}
