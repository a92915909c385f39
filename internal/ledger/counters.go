package ledger

import (
	"slices"
	"time"
)

// The counter rule of EndpointStats, stated once for both drivers: every
// transition moves one delivery out of the counter of its old state and
// into the counter of its new one (exhausted deliveries count while
// unresolved), and an outcome moves LastSuccessAt or LastFailureAt forward,
// never back. A transaction accumulates its changes in a StatsDelta and the
// driver writes each endpoint's StatsChange once, in endpoint order; the
// driver's statement must do what StatsChange.Apply does.

// Counter is one of the delivery counts of EndpointStats.
type Counter int

const (
	CounterPending Counter = iota
	CounterInFlight
	CounterAwaitingAck
	CounterDelivered
	CounterExhaustedUnresolved
	CounterCancelled
	NumCounters
)

// CounterOf returns the counter that counts a delivery in state with
// resolution res; ok is false when none does (a resolved exhaustion).
func CounterOf(state DeliveryState, res Resolution) (c Counter, ok bool) {
	switch state {
	case StateScheduled:
		return CounterPending, true
	case StateInFlight:
		return CounterInFlight, true
	case StateAwaitingAck:
		return CounterAwaitingAck, true
	case StateDelivered:
		return CounterDelivered, true
	case StateExhausted:
		return CounterExhaustedUnresolved, res == ResolutionUnresolved
	case StateCancelled:
		return CounterCancelled, true
	}
	return 0, false
}

// StatsChange is what one transaction changes in one endpoint's stats.
type StatsChange struct {
	// Counts are added to the counters, indexed by Counter.
	Counts [NumCounters]int64
	// SuccessAt and FailureAt are the latest outcomes noted (nil: none).
	SuccessAt, FailureAt *time.Time
	// FailureReason goes with FailureAt.
	FailureReason string
}

// Empty reports whether c changes nothing.
func (c *StatsChange) Empty() bool {
	return c.Counts == [NumCounters]int64{} && c.SuccessAt == nil && c.FailureAt == nil
}

// Apply adds c to st: the specification of the drivers' stats statements.
// Counters add; LastSuccessAt and LastFailureAt only move forward, and
// LastFailureReason changes with LastFailureAt (a failure at the same
// instant as the recorded one replaces its reason).
func (c *StatsChange) Apply(st *EndpointStats) {
	for i, p := range []*int64{&st.Pending, &st.InFlight, &st.AwaitingAck, &st.Delivered, &st.ExhaustedUnresolved, &st.Cancelled} {
		*p += c.Counts[i]
	}
	if c.SuccessAt != nil && (st.LastSuccessAt == nil || !c.SuccessAt.Before(*st.LastSuccessAt)) {
		t := *c.SuccessAt
		st.LastSuccessAt = &t
	}
	if c.FailureAt != nil && (st.LastFailureAt == nil || !c.FailureAt.Before(*st.LastFailureAt)) {
		t := *c.FailureAt
		st.LastFailureAt, st.LastFailureReason = &t, c.FailureReason
	}
}

// StatsDelta accumulates a transaction's stats changes per endpoint, so
// that each endpoint's row is written once per transaction however large
// the batch (the row is a hot spot: its lock is held briefly).
type StatsDelta map[string]*StatsChange

// Of returns endpoint's change, creating it.
func (s StatsDelta) Of(endpoint string) *StatsChange {
	c := s[endpoint]
	if c == nil {
		c = &StatsChange{}
		s[endpoint] = c
	}
	return c
}

// Add counts n more deliveries of endpoint in state with resolution res.
func (s StatsDelta) Add(endpoint string, state DeliveryState, res Resolution, n int64) {
	if c, ok := CounterOf(state, res); ok {
		s.Of(endpoint).Counts[c] += n
	}
}

// Move counts one delivery of endpoint leaving (from, fromRes) for (to, toRes).
func (s StatsDelta) Move(endpoint string, from DeliveryState, fromRes Resolution, to DeliveryState, toRes Resolution) {
	s.Add(endpoint, from, fromRes, -1)
	s.Add(endpoint, to, toRes, 1)
}

// Outcome notes a success or a failure (with its reason) of endpoint at
// at; the latest of each in the transaction is kept.
func (s StatsDelta) Outcome(endpoint string, success, failure bool, at time.Time, reason string) {
	if !success && !failure {
		return
	}
	c := s.Of(endpoint)
	at = at.UTC()
	if success && (c.SuccessAt == nil || !at.Before(*c.SuccessAt)) {
		c.SuccessAt = &at
	}
	if failure && (c.FailureAt == nil || !at.Before(*c.FailureAt)) {
		c.FailureAt, c.FailureReason = &at, reason
	}
}

// Endpoints returns the endpoints with a change, in ID order: the order in
// which drivers lock and write their rows.
func (s StatsDelta) Endpoints() []string {
	ids := make([]string, 0, len(s))
	for id, c := range s {
		if !c.Empty() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
