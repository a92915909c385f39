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
// type and whose filter (when it has one) p.Filter says the event
// matches. Both drivers call it for each endpoint of the namespace, inside
// the insert's transaction.
func (p *EventInsertParams) Receives(endpointID string, patterns []string, filter string) bool {
	if p.Endpoint != "" {
		return endpointID == p.Endpoint
	}
	if !eventtype.MatchAny(patterns, p.Type) {
		return false
	}
	// Without an evaluator a filter matches nothing: an insert that forgot
	// it never sends an endpoint what its filter would have refused.
	return filter == "" || (p.Filter != nil && p.Filter(endpointID, filter))
}

// FilterFunc reports whether an event matches an endpoint's filter
// expression (Endpoint.Filter, never ""). The publish core supplies it
// (package eventfilter), so that the ledger knows nothing of the
// expression language; an expression it cannot evaluate is no match.
type FilterFunc func(endpointID, filter string) bool

// CheckTarget refuses p when it is addressed to one endpoint and matches,
// the number of live endpoints of its namespace that Receive it, is 0.
func CheckTarget(p *EventInsertParams, matches int) error {
	if p.Endpoint == "" || matches > 0 {
		return nil
	}
	return &TargetError{Namespace: p.Namespace, Endpoint: p.Endpoint}
}
