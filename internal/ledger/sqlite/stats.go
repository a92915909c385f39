package sqlite

import (
	"context"
	"database/sql"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// applyStats writes a transaction's stats changes (ledger.StatsDelta), one
// statement per endpoint in endpoint order; the statement does what
// ledger.StatsChange.Apply says.
func applyStats(t *wtx, st *sql.Stmt, ds ledger.StatsDelta) error {
	stmt := t.stmt(st)
	for _, id := range ds.Endpoints() {
		c := ds[id]
		n := &c.Counts
		if _, err := stmt.ExecContext(t.ctx, id, n[ledger.CounterPending], n[ledger.CounterInFlight],
			n[ledger.CounterAwaitingAck], n[ledger.CounterDelivered], n[ledger.CounterExhaustedUnresolved],
			n[ledger.CounterCancelled], nullNanosPtr(c.SuccessAt), nullNanosPtr(c.FailureAt), c.FailureReason); err != nil {
			return translate("update stats of "+id, err)
		}
	}
	return nil
}

// EndpointStats implements ledger.Store. The stats of a deleted endpoint
// stay readable.
func (s *Store) EndpointStats(ctx context.Context, endpointID string) (ledger.EndpointStats, error) {
	var st ledger.EndpointStats
	if err := scanStats(s.rs.statsGet.QueryRowContext(ctx, endpointID), &st); err != nil {
		return ledger.EndpointStats{}, translate("stats of endpoint "+endpointID, err)
	}
	return st, nil
}

func scanStats(sc scanner, st *ledger.EndpointStats) error {
	var success, failure sql.NullInt64
	if err := sc.Scan(&st.EndpointID, &st.Pending, &st.InFlight, &st.AwaitingAck, &st.Delivered,
		&st.ExhaustedUnresolved, &st.Cancelled, &success, &failure, &st.LastFailureReason); err != nil {
		return err
	}
	st.LastSuccessAt = fromNullNanos(success)
	st.LastFailureAt = fromNullNanos(failure)
	return nil
}

// endpointActivitySQL reads every endpoint's counters, one row each, with
// its latest deferral: a walk of endpoint_stats in key order, and one
// lookup of the last bucket in retry_deferrals' primary key per endpoint.
const endpointActivitySQL = `
	SELECT s.endpoint_id, s.pending, s.in_flight, s.awaiting_ack, s.delivered, s.exhausted_unresolved, s.cancelled,
		s.last_success_at, s.last_failure_at, s.last_failure_reason,
		(SELECT max(d.last_at) FROM retry_deferrals d WHERE d.endpoint_id = s.endpoint_id)
	FROM endpoint_stats s ORDER BY s.endpoint_id`

// EndpointActivityList implements ledger.Store.
func (s *Store) EndpointActivityList(ctx context.Context) ([]ledger.EndpointActivity, error) {
	rows, err := s.r.QueryContext(ctx, endpointActivitySQL)
	if err != nil {
		return nil, translate("endpoint activity", err)
	}
	defer func() { _ = rows.Close() }()
	var out []ledger.EndpointActivity
	for rows.Next() {
		var a ledger.EndpointActivity
		var success, failure, deferral sql.NullInt64
		if err := rows.Scan(&a.Stats.EndpointID, &a.Stats.Pending, &a.Stats.InFlight, &a.Stats.AwaitingAck, &a.Stats.Delivered,
			&a.Stats.ExhaustedUnresolved, &a.Stats.Cancelled, &success, &failure, &a.Stats.LastFailureReason, &deferral); err != nil {
			return nil, translate("endpoint activity", err)
		}
		a.Stats.LastSuccessAt, a.Stats.LastFailureAt, a.LastDeferralAt = fromNullNanos(success), fromNullNanos(failure), fromNullNanos(deferral)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("endpoint activity", err)
	}
	return out, nil
}
