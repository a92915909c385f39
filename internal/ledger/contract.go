package ledger

import (
	"fmt"
	"time"
)

// An event type's contract (a WebhookEventType) as the ledger keeps it on
// each event it validated: the publish core stamps it (EventInsertParams'
// TypeGeneration, ReplayClass, ValidUntil, PolicyOverride), the stores keep
// it on the event's row, and every replica decides from the row, never
// from the Kubernetes object (docs/adr/0038). The rules below are pure;
// the drivers only store and read the fields.

// ReplayClass is what a type allows once an event of it was sent: a retry
// under its own identity, only a reissue, or neither.
type ReplayClass string

const (
	// ReplayRetryable (also ""): retried and reissued as any event.
	ReplayRetryable ReplayClass = "Retryable"
	// ReplayReissueOnly: never sent again under its identity (a Retry, a
	// replay are refused with ReissueRequired even while its secrets
	// exist); a reissue is allowed.
	ReplayReissueOnly ReplayClass = "ReissueOnly"
	// ReplayNever: neither retried nor reissued by a recovery or a replay
	// (refused with NotReplayable); only Dismiss resolves it.
	ReplayNever ReplayClass = "Never"
)

// Validate reports an unknown class.
func (c ReplayClass) Validate() error {
	switch c {
	case "", ReplayRetryable, ReplayReissueOnly, ReplayNever:
		return nil
	}
	return fmt.Errorf("replay class %q is not one of Retryable, ReissueOnly, Never", c)
}

// CancelExpired is the reason of a delivery cancelled because its event's
// ValidUntil passed before it was delivered (Delivery.ExhaustReason of a
// cancelled delivery; empty for one cancelled by its endpoint's deletion).
// It is never sent again, needs no owner (no resolution), and its history
// stays: attempts made before are kept, and it counts in the outcome
// evidence as OutcomeExpired.
const CancelExpired ExhaustReason = "Expired"

// OutcomeExpired is the Outcome of an outcome bucket counting deliveries
// cancelled with CancelExpired.
const OutcomeExpired = string(CancelExpired)

// RefusedNotReplayable refuses a Retry, a Reissue and a replay of an
// event whose type's ReplayClass is Never: only Dismiss resolves it.
const RefusedNotReplayable = "NotReplayable"

// RefusedExpired refuses a Retry and a replay of an event whose ValidUntil
// has passed: the new delivery could only be cancelled Expired.
const RefusedExpired = "Expired"

// Expired reports whether e may no longer be sent at now: its ValidUntil
// is set and now is at or after it.
func (e *Event) Expired(now time.Time) bool {
	return e.ValidUntil != nil && !now.Before(*e.ValidUntil)
}

// PolicyFor is the policy that decides e's deliveries to an endpoint whose
// policy is endpoint: the type's PolicyOverride for the schedule (backoff,
// horizon, attempt timeout, retried classes) and the replay window, with
// the endpoint's circuit breaker and retry budget, which guard the
// receiver whatever it is sent, and the endpoint's retention, by which the
// stores keep and prune what the endpoint's deliveries leave behind
// (docs/adr/0038). Without an override it is endpoint itself.
func (e *Event) PolicyFor(endpoint *Policy) *Policy {
	if e.PolicyOverride == nil {
		return endpoint
	}
	p := *e.PolicyOverride
	p.Breaker, p.Budget = endpoint.Breaker, endpoint.Budget
	p.SecretGracePeriod, p.PayloadRetention, p.EvidenceRetention =
		endpoint.SecretGracePeriod, endpoint.PayloadRetention, endpoint.EvidenceRetention
	return &p
}

// ContractRefusal is why a recovery or a replay may not send e again under
// its own identity because of its type's contract ("" when the contract
// allows it): NotReplayable (Never), ReissueRequired (ReissueOnly),
// Expired (ValidUntil passed at now).
func ContractRefusal(e *Event, now time.Time) string {
	switch e.ReplayClass {
	case ReplayNever:
		return RefusedNotReplayable
	case ReplayReissueOnly:
		return RefusedReissueRequired
	}
	if e.Expired(now) {
		return RefusedExpired
	}
	return ""
}

// Reissuable reports whether a recovery or a replay may reissue e: not
// when its type's ReplayClass is Never.
func (e *Event) Reissuable() bool { return e.ReplayClass != ReplayNever }

// copyContract gives e, the copy of src that a reissue inserts
// (ReissueOf), src's contract: the same type generation, replay class and
// policy, and the same ValidUntil, which a copy never lengthens.
func (e *Event) copyContract(src *Event) {
	e.TypeGeneration, e.ReplayClass, e.PolicyOverride, e.ValidUntil =
		src.TypeGeneration, src.ReplayClass, src.PolicyOverride, src.ValidUntil
}

// contractOf sets ev's contract from p's (ValidUntil in UTC).
func (p *EventInsertParams) contractOf(ev *Event) {
	ev.TypeGeneration, ev.ReplayClass, ev.PolicyOverride = p.TypeGeneration, p.ReplayClass, p.PolicyOverride
	ev.ValidUntil = nil
	if p.ValidUntil != nil {
		t := p.ValidUntil.UTC()
		ev.ValidUntil = &t
	}
}

// NewEvent is the event p inserts, before its ID is known to be new: the
// drivers store it as returned.
func (p *EventInsertParams) NewEvent() Event {
	ev := Event{
		ID: p.ID, Namespace: p.Namespace, Type: p.Type, Data: p.Data, Secrets: p.Secrets,
		SecretNames: p.SecretNames, ReissueOf: p.ReissueOf, IdempotencyKey: p.IdempotencyKey,
		BodyHash: p.BodyHash, CreatedAt: p.Now.UTC(), Trace: p.Trace,
	}
	p.contractOf(&ev)
	if ev.ID == "" {
		ev.ID = NewID("evt", p.Now)
	}
	return ev
}

// ValidateContract reports why p's contract cannot be stored.
func (p *EventInsertParams) ValidateContract() error {
	if err := p.ReplayClass.Validate(); err != nil {
		return fmt.Errorf("event %s: %w", p.ID, err)
	}
	if p.TypeGeneration < 0 {
		return fmt.Errorf("event %s: type generation %d is negative", p.ID, p.TypeGeneration)
	}
	return nil
}

// AutoAction is what a recovery with action Auto does for ed at now,
// under its endpoint's replay window endpointWindow: Retry while the same
// event may be sent again (its contract allows it, its secrets and payload
// are there, within the replay window in force), else Reissue, which is
// refused NotReplayable for a type that is never replayed (only Dismiss
// resolves those).
func (ed *ExhaustedDelivery) AutoAction(endpointWindow time.Duration, now time.Time) RecoveryAction {
	window := endpointWindow
	if ed.OverrideReplayWindow > 0 {
		window = ed.OverrideReplayWindow
	}
	switch {
	case ed.ReplayClass == ReplayNever, ed.ReplayClass == ReplayReissueOnly:
		return RecoveryReissue
	case ed.ValidUntil != nil && !now.Before(*ed.ValidUntil):
		return RecoveryReissue
	case ed.SecretsScrubbed, ed.PayloadPruned:
		return RecoveryReissue
	case window > 0 && now.After(ed.ReplayFrom.Add(window)):
		return RecoveryReissue
	default:
		return RecoveryRetry
	}
}
