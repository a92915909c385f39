package ledger

import (
	"fmt"
	"time"
)

// The states of a delivery and every transition between them, each stated
// once in this package. The drivers gather the facts, call the rule and
// persist its result; where SQLite does the work in one statement for
// speed, the Go rule is the specification and the conformance suite's
// Transition cases check that the statement agrees with it.
//
//	from                        to                                   by, rule
//	-                           scheduled                            EventInsertMany, recovery retry or
//	                                                                 reissue, dead letter: StatsDelta.Add
//	-                           in_flight (leased to the publisher)  EventInsertMany with LeaseTo:
//	                                                                 EventInsertParams.NewDelivery
//	scheduled                   in_flight                            DeliveryClaim (per-endpoint cap:
//	                                                                 CapSlots)
//	in_flight (lease expired)   in_flight (new holder)               DeliveryClaim
//	in_flight                   scheduled                            DeliveryRelease, LeasesReclaim
//	in_flight                   scheduled, awaiting_ack,             AttemptRecordMany:
//	                            delivered, exhausted                 AttemptRecordParams.Transition
//	in_flight (its event        cancelled (Expired), unsent          AttemptRecordMany (Unsent), after
//	past ValidUntil)                                                 a claim or DeliveryClaimExpired
//	awaiting_ack                delivered, exhausted (AckRejected)   AckRecord: AckRecordParams.Transition
//	awaiting_ack                scheduled, exhausted                 AckTimeoutRecord:
//	                                                                 AckTimeoutParams.Transition
//	exhausted, unresolved       exhausted, retried / reissued /      RecoveryApply: PlanRecovery,
//	                            dismissed                            RecoveryStep.Resolution
//	scheduled, in_flight,       cancelled                            EndpointDelete
//	awaiting_ack
//
// Every row moves EndpointStats counters by CounterOf (a StatsDelta.Move
// from the old state to the new one; counters.go), and the attempt and
// acknowledgement rows also note an outcome (StatsDelta.Outcome). An
// exhaustion dead-letters by DeadLetters and NewDeadLetterData (rules.go);
// a first attempt counts towards the retry budget by FirstAttempts, and a
// retry or a re-send's first attempt spends it (SpendsRetryBudget,
// recoveryrules.go); the transition that ends an event's last pending
// delivery settles its secrets by SettledEvents and SettleSecrets, and
// SecretsScrubDue sweeps by ScrubDueSecrets (secretrules.go); Prune ages
// events out by PruneStages and PruneStage.Prunes (prunerules.go).

// NewDelivery is the delivery p creates to an endpoint (paused or not):
// scheduled, due at p.Now; or, when p.LeaseTo is set and the endpoint is
// neither paused nor refused by p.LeaseTo.Admit, in_flight and leased to
// p.LeaseTo, as if claimed in the same transaction. It is a Resend when p
// reissues an event (ReissueOf). Drivers insert it as returned and count it with
// StatsDelta.Add(endpointID, d.State, ResolutionNone, 1).
func (p *EventInsertParams) NewDelivery(id, eventID, endpointID string, paused bool) Delivery {
	now := p.Now.UTC()
	d := Delivery{ID: id, EventID: eventID, EndpointID: endpointID, State: StateScheduled, DueAt: now, CreatedAt: now,
		Resend: p.ReissueOf != ""}
	if p.LeaseTo != nil && !paused && p.LeaseTo.admits(endpointID) {
		until := p.LeaseTo.Until.UTC()
		d.State, d.LeaseOwner, d.LeaseUntil = StateInFlight, p.LeaseTo.Owner, &until
	}
	return d
}

// AttemptTransition is what a recorded attempt does to the delivery in
// in_flight whose lease the recorder holds: the attempt is counted, the
// lease released, and the delivery moves to the attempt's Next.
type AttemptTransition struct {
	State DeliveryState
	// DueAt is when the retry is due (State scheduled); zero keeps DueAt.
	DueAt time.Time
	// AckDeadline is set for awaiting_ack and cleared otherwise.
	AckDeadline *time.Time
	// FirstAttemptAt is the delivery's FirstAttemptAt if it has none yet.
	FirstAttemptAt time.Time
	LastStatus     int
	LastError      string
	// Reason, Resolution and TerminalAt replace the delivery's: set when
	// it ends (TerminalAt; Reason and resolution unresolved when it is
	// exhausted), empty otherwise.
	Reason     ExhaustReason
	Resolution Resolution
	TerminalAt *time.Time
	// Success and Failure are the EndpointStats outcome (Next.StatsOutcome)
	// at Now, FailureCause its LastFailureReason.
	Success, Failure bool
	FailureCause     string
	// Unsent is AttemptRecordParams.Unsent: no attempt was made, so
	// Attempts, FirstAttemptAt and the last answer stay.
	Unsent bool
}

// Transition returns what the attempt p does to its delivery, or why its
// Next is invalid (the item fails and nothing changes).
func (p *AttemptRecordParams) Transition() (AttemptTransition, error) {
	if err := p.Next.Validate(); err != nil {
		return AttemptTransition{}, err
	}
	now := p.Now.UTC()
	n := p.Next
	tr := AttemptTransition{
		State:          n.State,
		FirstAttemptAt: p.FirstAttemptTime().UTC(),
		LastStatus:     p.Attempt.StatusCode,
		LastError:      p.Attempt.Error,
	}
	switch n.State {
	case StateScheduled:
		tr.DueAt = n.DueAt
	case StateAwaitingAck:
		deadline := n.AckDeadline
		tr.AckDeadline = &deadline
	case StateDelivered:
		tr.TerminalAt = &now
	case StateExhausted:
		tr.Reason, tr.Resolution, tr.TerminalAt = n.Reason, ResolutionUnresolved, &now
	case StateCancelled:
		// Expired: no owner needed, so no resolution; never an attempt.
		if !p.Unsent {
			return AttemptTransition{}, fmt.Errorf("next state %s is recorded only for a delivery that was not sent (Unsent)", n.State)
		}
		tr.Reason, tr.TerminalAt = n.Reason, &now
	}
	if p.Unsent {
		tr.Unsent = true
		return tr, nil
	}
	tr.Success, tr.Failure = n.StatsOutcome()
	if tr.Failure {
		tr.FailureCause = FailureReason(p.Attempt)
	}
	return tr, nil
}

// Apply moves d, in memory, through the transition: the specification of
// the drivers' attempt statements.
func (tr AttemptTransition) Apply(d *Delivery) {
	d.State = tr.State
	if !tr.Unsent {
		d.Attempts++
		if d.FirstAttemptAt == nil {
			t := tr.FirstAttemptAt
			d.FirstAttemptAt = &t
		}
		d.LastStatus, d.LastError = tr.LastStatus, tr.LastError
	}
	if !tr.DueAt.IsZero() {
		d.DueAt = tr.DueAt
	}
	d.AckDeadline = nil
	if tr.AckDeadline != nil {
		t := *tr.AckDeadline
		d.AckDeadline = &t
	}
	d.ExhaustReason, d.Resolution = tr.Reason, tr.Resolution
	d.TerminalAt = nil
	if tr.TerminalAt != nil {
		t := *tr.TerminalAt
		d.TerminalAt = &t
	}
	d.LeaseOwner, d.LeaseUntil = "", nil
}

// Stats notes the transition of a delivery of endpoint, at now, in s.
func (tr AttemptTransition) Stats(s StatsDelta, endpoint string, now time.Time) {
	s.Move(endpoint, StateInFlight, ResolutionNone, tr.State, tr.Resolution)
	s.Outcome(endpoint, tr.Success, tr.Failure, now, tr.FailureCause)
}
