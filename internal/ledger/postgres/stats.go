package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// applyStats writes a transaction's stats changes (see queueStats).
func applyStats(ctx context.Context, tx pgx.Tx, s ledger.StatsDelta) error {
	b := &pgx.Batch{}
	queueStats(b, s)
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("update endpoint stats: %w", err)
	}
	return nil
}

// queueStats adds to b the statements that write a transaction's stats
// changes: lock the rows in endpoint-ID order (the order every transaction
// uses, so two never deadlock), then update them in one statement, which
// does what ledger.StatsChange.Apply says.
func queueStats(b *pgx.Batch, s ledger.StatsDelta) {
	ids := s.Endpoints()
	if len(ids) == 0 {
		return
	}
	var cols [ledger.NumCounters][]int64
	successAt := make([]*int64, len(ids))
	failureAt := make([]*int64, len(ids))
	reasons := make([]string, len(ids))
	for i, id := range ids {
		d := s[id]
		for c := range cols {
			cols[c] = append(cols[c], d.Counts[c])
		}
		successAt[i], failureAt[i], reasons[i] = nullNanos(d.SuccessAt), nullNanos(d.FailureAt), d.FailureReason
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
		ids, cols[ledger.CounterPending], cols[ledger.CounterInFlight], cols[ledger.CounterAwaitingAck],
		cols[ledger.CounterDelivered], cols[ledger.CounterExhaustedUnresolved], cols[ledger.CounterCancelled],
		successAt, failureAt, reasons)
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
