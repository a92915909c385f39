package ledger

import (
	"errors"
	"fmt"

	"github.com/hookkeeper/hookkeeper/internal/eventtype"
)

// ErrUnknownEndpoint refuses an event addressed (EventInsertParams.Endpoint)
// to an endpoint that does not exist, or no longer exists, in its
// namespace.
var ErrUnknownEndpoint = errors.New("event addressed to an endpoint that does not exist in its namespace")

// TargetError is ErrUnknownEndpoint for one event: nothing was inserted.
type TargetError struct {
	Namespace string
	// Endpoint is the endpoint's ID ("<namespace>/<name>").
	Endpoint string
}

func (e *TargetError) Error() string {
	return fmt.Sprintf("endpoint %s does not exist in namespace %s", e.Endpoint, e.Namespace)
}

// Is makes errors.Is(err, ErrUnknownEndpoint) hold.
func (e *TargetError) Is(target error) bool { return target == ErrUnknownEndpoint }

// Receives reports whether the live endpoint with this ID and event-type
// patterns gets a delivery of p. An event addressed to one endpoint goes
// to that endpoint whatever its patterns (the publisher named it: a test
// event reaches an endpoint that subscribes to nothing like it) and to no
// other; any other event goes to every endpoint whose patterns select its
// type and whose filter (when it has one) p.Decided says the event
// matches. A filter p.Decided does not decide is added to undecided, and
// CheckFanOut then refuses the whole event: filters are evaluated before
// the commit, never inside it (the ledger knows nothing of the expression
// language, and one tenant's expression must not hold every publish of a
// commit). Both drivers call it for each endpoint of the namespace, inside
// the insert's transaction.
func (p *EventInsertParams) Receives(endpointID string, patterns []string, filter string, undecided *[]FilterTarget) bool {
	if p.Endpoint != "" {
		return endpointID == p.Endpoint
	}
	if !eventtype.MatchAny(patterns, p.Type) {
		return false
	}
	if filter == "" {
		return true
	}
	target := FilterTarget{EndpointID: endpointID, Filter: filter}
	match, decided := p.Decided[target]
	if !decided {
		*undecided = append(*undecided, target)
	}
	return match
}

// FilterTarget is one endpoint's filter (Endpoint.Filter, never "") as
// fan-out decides it: the expression is part of it, so that a decision
// made before the filter changed does not count for the new one.
type FilterTarget struct {
	EndpointID string
	Filter     string
}

// FilterDecisions says, of each filter decided, whether the event matches
// it. The publish core evaluates them (package eventfilter) before the
// commit; an expression it cannot evaluate is no match.
type FilterDecisions map[FilterTarget]bool

// ErrUndecided: the event's type selects endpoints whose filters the
// insert does not decide (*UndecidedError).
var ErrUndecided = errors.New("event selects endpoints whose filters were not decided")

// UndecidedError refuses an event whose type selects endpoints with
// filters that EventInsertParams.Decided does not decide: the publisher's
// view of the endpoints was older than the ledger's (an endpoint was
// registered, or its filter changed, meanwhile). Nothing was inserted and
// the idempotency key stays free: decide Filters and insert again.
type UndecidedError struct {
	Filters []FilterTarget
}

func (e *UndecidedError) Error() string {
	return fmt.Sprintf("the filters of %d endpoints were not decided", len(e.Filters))
}

// Is makes errors.Is(err, ErrUndecided) hold.
func (e *UndecidedError) Is(target error) bool { return target == ErrUndecided }

// CheckTarget refuses p when it is addressed to one endpoint and matches,
// the number of live endpoints of its namespace that Receive it, is 0.
func CheckTarget(p *EventInsertParams, matches int) error {
	if p.Endpoint == "" || matches > 0 {
		return nil
	}
	return &TargetError{Namespace: p.Namespace, Endpoint: p.Endpoint}
}
