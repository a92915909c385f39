package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// statsDelta accumulates the changes a transaction makes to endpoint_stats,
// so that each endpoint's row is written once, at the end of the
// transaction (the row is a hot spot: holding its lock briefly matters).
type statsDelta map[string]*endpointDelta

type endpointDelta struct {
	counts        [numCounters]int64
	successAt     *int64
	failureAt     *int64
	failureReason string
}

// Counter positions, in endpoint_stats column order.
const (
	cPending = iota
	cInFlight
	cAwaitingAck
	cDelivered
	cExhaustedUnresolved
	cCancelled
	numCounters
)

// counter returns the counter that counts deliveries in state (exhausted
// ones count while unresolved), or -1.
func counter(state ledger.DeliveryState, res ledger.Resolution) int {
	switch state {
	case ledger.StateScheduled:
		return cPending
	case ledger.StateInFlight:
		return cInFlight
	case ledger.StateAwaitingAck:
		return cAwaitingAck
	case ledger.StateDelivered:
		return cDelivered
	case ledger.StateExhausted:
		if res == ledger.ResolutionUnresolved {
			return cExhaustedUnresolved
		}
	case ledger.StateCancelled:
		return cCancelled
	}
	return -1
}

func (s statsDelta) of(endpointID string) *endpointDelta {
	d := s[endpointID]
	if d == nil {
		d = &endpointDelta{}
		s[endpointID] = d
	}
	return d
}

// add counts n more deliveries of endpointID in state.
func (s statsDelta) add(endpointID string, state ledger.DeliveryState, res ledger.Resolution, n int64) {
	if c := counter(state, res); c >= 0 {
		s.of(endpointID).counts[c] += n
	}
}

// move counts one delivery of endpointID leaving one state for another.
func (s statsDelta) move(endpointID string, from ledger.DeliveryState, fromRes ledger.Resolution, to ledger.DeliveryState, toRes ledger.Resolution) {
	s.add(endpointID, from, fromRes, -1)
	s.add(endpointID, to, toRes, 1)
}

// outcome notes an attempt's success or failure at the instant at (nanos).
func (s statsDelta) outcome(endpointID string, success, failure bool, at int64, reason string) {
	d := s.of(endpointID)
	if success && (d.successAt == nil || at >= *d.successAt) {
		d.successAt = &at
	}
	if failure && (d.failureAt == nil || at >= *d.failureAt) {
		d.failureAt = &at
		d.failureReason = reason
	}
}

// apply writes the accumulated changes (see queue).
func (s statsDelta) apply(ctx context.Context, tx pgx.Tx) error {
	b := &pgx.Batch{}
	s.queue(b)
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("update endpoint stats: %w", err)
	}
	return nil
}

// queue adds the statements that write the accumulated changes to b: lock
// the rows in endpoint-ID order (the order every transaction uses, so two
// never deadlock), then update them in one statement. Last-outcome times
// only move forward.
func (s statsDelta) queue(b *pgx.Batch) {
	ids := make([]string, 0, len(s))
	for id, d := range s {
		if d.counts != [numCounters]int64{} || d.successAt != nil || d.failureAt != nil {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	slices.Sort(ids)
	var cols [numCounters][]int64
	successAt := make([]*int64, len(ids))
	failureAt := make([]*int64, len(ids))
	reasons := make([]string, len(ids))
	for i, id := range ids {
		d := s[id]
		for c := range cols {
			cols[c] = append(cols[c], d.counts[c])
		}
		successAt[i], failureAt[i], reasons[i] = d.successAt, d.failureAt, d.failureReason
	}
	b.Queue(`SELECT 1 FROM endpoint_stats WHERE endpoint_id = ANY($1) ORDER BY endpoint_id FOR NO KEY UPDATE`, ids)
	b.Queue(`
		UPDATE endpoint_stats s SET
			pending = s.pending + u.pending,
			in_flight = s.in_flight + u.in_flight,
			awaiting_ack = s.awaiting_ack + u.awaiting_ack,
			delivered = s.delivered + u.delivered,
			exhausted_unresolved = s.exhausted_unresolved + u.exhausted_unresolved,
			cancelled = s.cancelled + u.cancelled,
			last_success_at = GREATEST(s.last_success_at, u.success_at),
			last_failure_at = GREATEST(s.last_failure_at, u.failure_at),
			last_failure_reason = CASE
				WHEN u.failure_at >= COALESCE(s.last_failure_at, u.failure_at) THEN u.failure_reason
				ELSE s.last_failure_reason END
		FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[],
			$7::bigint[], $8::bigint[], $9::bigint[], $10::text[])
			AS u(endpoint_id, pending, in_flight, awaiting_ack, delivered, exhausted_unresolved,
				cancelled, success_at, failure_at, failure_reason)
		WHERE s.endpoint_id = u.endpoint_id`,
		ids, cols[cPending], cols[cInFlight], cols[cAwaitingAck], cols[cDelivered],
		cols[cExhaustedUnresolved], cols[cCancelled], successAt, failureAt, reasons)
}

// EndpointStats implements ledger.Store. A deleted endpoint's counters stay
// readable; only an endpoint never registered is ErrNotFound.
func (s *Store) EndpointStats(ctx context.Context, endpointID string) (ledger.EndpointStats, error) {
	st := ledger.EndpointStats{EndpointID: endpointID}
	var successAt, failureAt *int64
	err := s.pool.QueryRow(ctx, `
		SELECT s.pending, s.in_flight, s.awaiting_ack, s.delivered, s.exhausted_unresolved, s.cancelled,
			s.last_success_at, s.last_failure_at, s.last_failure_reason
		FROM endpoint_stats s WHERE s.endpoint_id = $1`, endpointID,
	).Scan(&st.Pending, &st.InFlight, &st.AwaitingAck, &st.Delivered, &st.ExhaustedUnresolved, &st.Cancelled,
		&successAt, &failureAt, &st.LastFailureReason)
	if err != nil {
		return ledger.EndpointStats{}, translate("endpoint stats "+endpointID, err)
	}
	st.LastSuccessAt, st.LastFailureAt = fromNullNanos(successAt), fromNullNanos(failureAt)
	return st, nil
}
