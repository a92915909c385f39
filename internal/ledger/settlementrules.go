package ledger

import (
	"fmt"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/truncate"
)

// The rules of Settlement that both drivers apply identically: what an
// acknowledgement or its timeout does to a delivery, the limits of the
// sweeps, and how retention is read from policies. The drivers gather the
// facts and write the outcome.
//
// Secrets (the Store doc): an event's secrets are scrubbed by the
// transaction that leaves it with no pending delivery when the longest
// SecretGracePeriod among the policies of the endpoints of its deliveries
// is 0; otherwise SecretsScrubDue = now + that period and SecretsScrubDue
// (the method) scrubs them later, unless a delivery became pending again
// meanwhile (then SecretsScrubDue is cleared, and the transition that ends
// that delivery arms it again). An event that reached no endpoint at all
// has no pending delivery from the start: EventInsertMany does not keep its
// secrets (SecretsScrubAt = its CreatedAt). Events that never carried
// secrets are never marked. Once scrubbed, SecretsScrubDue keeps the time
// the grace period ended (nil when there was none).
//
// Retention (Prune): an event is terminal once none of its deliveries is
// pending; its terminal time is the latest TerminalAt of its deliveries
// (its CreatedAt when it has none). Its payload retention and evidence
// retention are the longest among the policies of the endpoints of its
// deliveries (deleted endpoints keep their last policy), a policy's value
// of 0 standing for the PruneParams default; an event without deliveries
// uses the defaults. A retention that is still 0 keeps the event forever.
// Evidence pruning never deletes an event with an unresolved exhausted
// delivery: unresolved work stays until a recovery resolves it (its
// payload is pruned like any other). Pruning a payload also drops any
// secret left (SecretsScrubAt set). EndpointStats counters are not
// decreased by pruning: delivered and cancelled count what happened, not
// what the ledger still holds.

// Sweep limits: AckExpiredList, SecretsScrubDue and Prune (PruneParams.Limit).
const (
	DefaultSweepLimit = 500
	MaxSweepLimit     = 10000
)

// SweepLimit returns the effective limit of a sweep: DefaultSweepLimit when
// unset, at most MaxSweepLimit.
func SweepLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultSweepLimit
	case limit > MaxSweepLimit:
		return MaxSweepLimit
	default:
		return limit
	}
}

// AckRejectedReason is the start of EndpointStats.LastFailureReason when a
// receiver rejects an event.
const AckRejectedReason = "acknowledgement rejected"

// TruncateAckReason returns a receiver's reason as valid UTF-8 of at most
// MaxAckReason bytes, cut at a character boundary.
func TruncateAckReason(reason string) string {
	return truncate.String(reason, MaxAckReason, "")
}

// AckTransition is what an acknowledgement, or its timeout, does to a
// delivery in awaiting_ack. The acknowledgement deadline is cleared; the
// lease, attempts and LastStatus do not change.
type AckTransition struct {
	State DeliveryState // delivered, exhausted or scheduled
	// DueAt is when the retry is due (State scheduled).
	DueAt time.Time
	// LastError replaces the delivery's LastError when set.
	LastError    *string
	Reason       ExhaustReason
	Resolution   Resolution
	TerminalAt   *time.Time
	Success      bool // EndpointStats.LastSuccessAt = Now
	Failure      bool // EndpointStats.LastFailureAt = Now
	FailureCause string
}

// Transition returns what the acknowledgement does: processed delivers,
// rejected exhausts with AckRejected (resolution unresolved, LastError =
// the truncated reason). Another Outcome is an error.
func (p *AckRecordParams) Transition() (AckTransition, error) {
	now := p.Now.UTC()
	switch p.Outcome {
	case AckProcessed:
		return AckTransition{State: StateDelivered, TerminalAt: &now, Success: true}, nil
	case AckRejected:
		reason := TruncateAckReason(p.Reason)
		cause := AckRejectedReason
		if reason != "" {
			cause += ": " + reason
		}
		return AckTransition{
			State: StateExhausted, LastError: &reason, Reason: ExhaustAckRejected,
			Resolution: ResolutionUnresolved, TerminalAt: &now, Failure: true, FailureCause: cause,
		}, nil
	default:
		return AckTransition{}, fmt.Errorf("acknowledgement outcome %q is not one of %s, %s", p.Outcome, AckProcessed, AckRejected)
	}
}

// Transition returns what the timeout does: Next scheduled is a retry due
// at Next.DueAt, Next exhausted gives up with Next.Reason (resolution
// unresolved). Both count as a failure with AckTimeoutReason, which is also
// the delivery's LastError. Another Next is an error.
func (p *AckTimeoutParams) Transition() (AckTransition, error) {
	if err := p.Next.Validate(); err != nil {
		return AckTransition{}, err
	}
	now := p.Now.UTC()
	reason := AckTimeoutReason
	tr := AckTransition{State: p.Next.State, LastError: &reason, Failure: true, FailureCause: AckTimeoutReason}
	switch p.Next.State {
	case StateScheduled:
		tr.DueAt = p.Next.DueAt
	case StateExhausted:
		tr.Reason, tr.Resolution, tr.TerminalAt = p.Next.Reason, ResolutionUnresolved, &now
	default:
		return AckTransition{}, fmt.Errorf("next state %s after an acknowledgement timeout: want %s or %s", p.Next.State, StateScheduled, StateExhausted)
	}
	return tr, nil
}

// Apply moves d, in memory, through the transition.
func (tr AckTransition) Apply(d *Delivery) {
	d.State = tr.State
	d.AckDeadline = nil
	if tr.State == StateScheduled {
		d.DueAt = tr.DueAt
	}
	if tr.LastError != nil {
		d.LastError = *tr.LastError
	}
	if tr.State == StateExhausted {
		d.ExhaustReason, d.Resolution = tr.Reason, tr.Resolution
	}
	if tr.TerminalAt != nil {
		t := *tr.TerminalAt
		d.TerminalAt = &t
	}
}

// Stats notes the transition of a delivery of endpoint, at now, in s.
func (tr AckTransition) Stats(s StatsDelta, endpoint string, now time.Time) {
	s.Move(endpoint, StateAwaitingAck, ResolutionNone, tr.State, tr.Resolution)
	s.Outcome(endpoint, tr.Success, tr.Failure, now, tr.FailureCause)
}

// PruneLimit is the effective PruneParams.Limit.
func (p *PruneParams) PruneLimit() int { return SweepLimit(p.Limit) }
