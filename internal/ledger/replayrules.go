package ledger

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/eventtype"
)

// The rules of a replay that both drivers apply identically: which events
// a replay considers, and what ReplayApply does with one of them. The
// drivers only gather the facts and write the outcome (replay.go).

// RecoveryReplay is the action of a replay item: the event is sent again,
// under its own identity, to the replay's endpoint (see ReplayApply).
const RecoveryReplay RecoveryAction = "Replay"

// Outcomes of a replay item beside Reissued, AwaitingReissue and Refused.
const (
	// OutcomeReplayed: a new delivery of the event to the endpoint.
	OutcomeReplayed RecoveryOutcome = "Replayed"
	// OutcomeSkipped: the event was already on its way to the endpoint.
	OutcomeSkipped RecoveryOutcome = "Skipped"
)

// SkippedAlreadyPending is the reason of a Skipped replay item: a delivery
// of the event to the endpoint is scheduled, in flight or awaiting its
// acknowledgement, so it is already on its way.
const SkippedAlreadyPending = "AlreadyPending"

// ReplayFallback is what a replay does with an event it cannot send again
// under its own identity (ResendRefusal).
type ReplayFallback string

const (
	// ReplayRefuse records the refusal with its reason, like a Retry.
	ReplayRefuse ReplayFallback = "Refuse"
	// ReplayReissue reissues it to the endpoint, like Auto: a copy when
	// the event is complete and never carried secrets, else a reissue
	// request to its producer.
	ReplayReissue ReplayFallback = "Reissue"
)

// ReservedTypePrefix is the prefix of the engine's own event types
// (dead-letter notices, reissue requests, test events): each is addressed
// to particular endpoints, so no replay selects them.
const ReservedTypePrefix = "hookkeeper."

// ReplaySelects reports whether a replay whose patterns are patterns
// considers an event of type typ: patterns select it (as they select a
// fan-out) and it is not one of the engine's own events.
func ReplaySelects(patterns []string, typ string) bool {
	return !strings.HasPrefix(typ, ReservedTypePrefix) && eventtype.MatchAny(patterns, typ)
}

// ReplayFacts is what ReplayApply knows about one event and the replay's
// endpoint when it decides.
type ReplayFacts struct {
	Event Event
	// EndpointID is the replay's endpoint; Policy its policy.
	EndpointID string
	Policy     Policy
	// EndpointDeleted is set when the endpoint does not exist or was
	// deleted (nothing may be sent to it).
	EndpointDeleted bool
	// ReplayFrom is ReplayFrom of the event.
	ReplayFrom time.Time
	// Pending is set when a delivery of the event to the endpoint is
	// scheduled, in flight or awaiting its acknowledgement.
	Pending bool
	// Unresolved is the event's unresolved exhausted delivery to the
	// endpoint (the latest), or nil: a replay resolves it.
	Unresolved *Delivery
}

// ErrReplayNamespace is returned by ReplayApply for an event of another
// namespace than the endpoint's: a replay never crosses namespaces.
var ErrReplayNamespace = errors.New("a replay sends only events of its endpoint's namespace")

// PlanReplay decides what a replay does with the event described by f at
// now, and why it refuses or skips it (reason). The checks, in order: an
// endpoint that is gone is ErrEndpointDeleted, an event of another
// namespace ErrReplayNamespace and one of the engine's own types an error
// (nothing is recorded for any of them); an event already on its way to
// the endpoint is skipped (AlreadyPending); one that cannot be sent again
// under its own identity (ResendRefusal under the policy in force, the
// same reasons as a Retry) is refused with that reason, or reissued with
// fallback ReplayReissue unless its type is never replayed (then refused
// with NotReplayable whatever the fallback);
// anything else is replayed.
func PlanReplay(fallback ReplayFallback, f *ReplayFacts, now time.Time) (RecoveryStep, string, error) {
	switch fallback {
	case ReplayRefuse, ReplayReissue:
	default:
		return StepRefuse, "", fmt.Errorf("replay fallback %q is not one of Refuse, Reissue", fallback)
	}
	ev := &f.Event
	switch {
	case f.EndpointDeleted:
		return StepRefuse, "", fmt.Errorf("replay event %s to endpoint %s: %w", ev.ID, f.EndpointID, ErrEndpointDeleted)
	case !strings.HasPrefix(f.EndpointID, ev.Namespace+"/"):
		return StepRefuse, "", fmt.Errorf("replay event %s of namespace %s to endpoint %s: %w", ev.ID, ev.Namespace, f.EndpointID, ErrReplayNamespace)
	case strings.HasPrefix(ev.Type, ReservedTypePrefix):
		return StepRefuse, "", fmt.Errorf("replay event %s: the engine's own events (%s*) are not replayed", ev.ID, ReservedTypePrefix)
	case f.Pending:
		return StepSkip, SkippedAlreadyPending, nil
	}
	if reason := ResendRefusal(ev, ev.PolicyFor(&f.Policy).ReplayWindow, f.ReplayFrom, now); reason != "" {
		// A type that is never replayed is not reissued either.
		if fallback == ReplayRefuse || !ev.Reissuable() {
			return StepRefuse, reason, nil
		}
		return reissueStep(ev, now), "", nil
	}
	return StepReplay, "", nil
}

// ReplayTarget sums up the deliveries of an event to a replay's endpoint
// (any order): whether one is pending, and the latest (by ID, which sorts
// by creation) of those exhausted and unresolved.
func ReplayTarget(ds []Delivery) (pending bool, unresolved *Delivery) {
	for i := range ds {
		d := &ds[i]
		switch {
		case !d.State.Terminal():
			pending = true
		case d.State == StateExhausted && d.Resolution == ResolutionUnresolved:
			if unresolved == nil || d.ID > unresolved.ID {
				unresolved = d
			}
		}
	}
	return pending, unresolved
}

// ReplayItemKey is the key of a replay item in its operation's items: its
// event. (A recovery item's key is its delivery; the two never meet, an
// operation being one or the other.) Drivers store it where a recovery
// stores the delivery and give it back through ItemDeliveryID.
func ReplayItemKey(eventID string) string { return eventID }

// ItemDeliveryID is the DeliveryID of an item stored under key: the key
// itself for a recovery item, none for a replay item (keyed by its event;
// its new delivery's RetryOf names the exhausted delivery it resolved, if
// any).
func ItemDeliveryID(action RecoveryAction, key string) string {
	if action == RecoveryReplay {
		return ""
	}
	return key
}

// IDFloor is the smallest ID NewID(prefix, t) can return: IDs of later
// milliseconds sort after it.
func IDFloor(prefix string, t time.Time) string {
	var b [16]byte
	ms := t.UnixMilli()
	if ms < 0 {
		ms = 0
	}
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	return prefix + "_" + crockford.EncodeToString(b[:])
}

// ReplayIDSlack widens the ID range a replay walks around its window:
// event IDs carry the millisecond of their creation (NewID with the
// insert's Now), and the slack keeps an ID minted a little apart from its
// CreatedAt inside the range; the window itself is checked on CreatedAt.
const ReplayIDSlack = time.Minute

// ReplayLimit returns the effective limit of a ReplayList: as ExhaustedList's.
func ReplayLimit(limit int) int { return ExhaustedLimit(limit) }
