package ledger

import (
	"fmt"
	"time"
)

// This file holds the small rules that every Store implementation must
// apply identically, so that the SQLite and PostgreSQL drivers cannot drift
// apart on details the conformance suite checks.

// List limits (the Limit of DeliveryBrowseParams and EventBrowseParams).
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// ListLimit returns the effective list limit: DefaultListLimit when
// unset, at most MaxListLimit.
func ListLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultListLimit
	case limit > MaxListLimit:
		return MaxListLimit
	default:
		return limit
	}
}

// FailureReason is the EndpointStats.LastFailureReason of a failed attempt:
// its Error when set, else "HTTP <status>".
func FailureReason(a Attempt) string {
	if a.Error != "" {
		return a.Error
	}
	return fmt.Sprintf("HTTP %d", a.StatusCode)
}

// AckTimeoutReason is the LastError of a delivery, and the
// EndpointStats.LastFailureReason of its endpoint, when its acknowledgement
// did not come before its deadline (AckTimeoutRecord).
const AckTimeoutReason = "acknowledgement timed out"

// FirstAttemptTime is the Delivery.FirstAttemptAt set by the first recorded
// attempt: when it started, or Now when the dispatcher did not say.
func (p *AttemptRecordParams) FirstAttemptTime() time.Time {
	if p.Attempt.StartedAt.IsZero() {
		return p.Now
	}
	return p.Attempt.StartedAt
}

// Validate reports why n is not a transition AttemptRecordMany accepts; an
// invalid Next fails its item and changes nothing.
func (n Next) Validate() error {
	switch n.State {
	case StateScheduled:
		if n.DueAt.IsZero() {
			return fmt.Errorf("next state %s needs DueAt", n.State)
		}
	case StateAwaitingAck:
		if n.AckDeadline.IsZero() {
			return fmt.Errorf("next state %s needs AckDeadline", n.State)
		}
	case StateExhausted:
		if n.Reason == "" {
			return fmt.Errorf("next state %s needs a Reason", n.State)
		}
	case StateCancelled:
		// Only an expiry cancels through a record (AttemptRecordParams.Unsent).
		if n.Reason != CancelExpired {
			return fmt.Errorf("next state %s needs Reason %s", n.State, CancelExpired)
		}
	case StateDelivered:
	default:
		return fmt.Errorf("next state %q is not one of scheduled, awaiting_ack, delivered, exhausted, cancelled", n.State)
	}
	return nil
}

// StatsOutcome says how an attempt's transition shows in EndpointStats:
// delivered is a success (LastSuccessAt); scheduled (a retry) and exhausted
// are failures (LastFailureAt, LastFailureReason); awaiting_ack is neither
// yet, because transport success is not business success.
func (n Next) StatsOutcome() (success, failure bool) {
	switch n.State {
	case StateDelivered:
		return true, false
	case StateScheduled, StateExhausted:
		return false, true
	default:
		return false, false
	}
}

// DeadLetters reports whether exhausting a delivery of an event of type
// eventType produces a dead-letter event. Dead letters are never
// dead-lettered again, so that an endpoint that is its own dead-letter
// endpoint (or two that name each other) cannot loop.
func DeadLetters(eventType string) bool { return eventType != DeadLetterEventType }

// NewDeadLetterData describes the exhausted delivery d (as it is after the
// transition) of an event of type eventType, exhausted at now, from an
// endpoint owned by owner.
func NewDeadLetterData(d Delivery, eventType, owner string, now time.Time) DeadLetterData {
	return DeadLetterData{
		DeliveryID:  d.ID,
		EventID:     d.EventID,
		EventType:   eventType,
		Endpoint:    d.EndpointID,
		Owner:       owner,
		Reason:      d.ExhaustReason,
		Attempts:    d.Attempts,
		LastStatus:  d.LastStatus,
		LastError:   d.LastError,
		ExhaustedAt: now.UTC(),
	}
}
