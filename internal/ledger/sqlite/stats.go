package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// changeStamp is the stamp of a change for EndpointActivitySince: the wall
// clock, which the feed's one writer and its readers share, as the store
// serves one process (a step back shorter than ActivityOverlap loses
// nothing). Not the callers' "now", which tests pin.
func changeStamp() int64 { return time.Now().UnixNano() }

// applyStats writes a transaction's stats changes (ledger.StatsDelta), one
// statement per endpoint in endpoint order; the statement does what
// ledger.StatsChange.Apply says, and stamps the endpoint changed.
func applyStats(t *wtx, st *sql.Stmt, ds ledger.StatsDelta) error {
	stmt := t.stmt(st)
	changed := changeStamp()
	for _, id := range ds.Endpoints() {
		c := ds[id]
		n := &c.Counts
		if _, err := stmt.ExecContext(t.ctx, id, n[ledger.CounterPending], n[ledger.CounterInFlight],
			n[ledger.CounterAwaitingAck], n[ledger.CounterDelivered], n[ledger.CounterExhaustedUnresolved],
			n[ledger.CounterCancelled], nullNanosPtr(c.SuccessAt), nullNanosPtr(c.FailureAt), c.FailureReason, changed); err != nil {
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

// endpointActivitySQL reads the counters of the endpoints stamped changed
// at or after ?1, one row each, with its latest deferral: a walk of
// endpoint_stats in key order, and one lookup of the last bucket in
// retry_deferrals' primary key per endpoint read. changed_at has no index
// (migration 0017): the walk filters the narrow rows, and only the ones
// that changed cost a lookup, a scan and an allocation.
const endpointActivitySQL = `
	SELECT s.endpoint_id, s.pending, s.in_flight, s.awaiting_ack, s.delivered, s.exhausted_unresolved, s.cancelled,
		s.last_success_at, s.last_failure_at, s.last_failure_reason,
		(SELECT max(d.last_at) FROM retry_deferrals d WHERE d.endpoint_id = s.endpoint_id)
	FROM endpoint_stats s WHERE s.changed_at >= ?1 ORDER BY s.endpoint_id`

// EndpointActivityList implements ledger.Store: EndpointActivitySince from
// the zero cursor.
func (s *Store) EndpointActivityList(ctx context.Context) ([]ledger.EndpointActivity, error) {
	list, _, err := s.EndpointActivitySince(ctx, ledger.ActivityCursor{})
	return list, err
}

// EndpointActivitySince implements ledger.Store. The next cursor is the
// clock read before the query, so before its snapshot: a change that
// commits after the snapshot was stamped (changeStamp) no earlier than
// ActivityOverlap before it, unless its transaction stayed open longer.
func (s *Store) EndpointActivitySince(ctx context.Context, c ledger.ActivityCursor) ([]ledger.EndpointActivity, ledger.ActivityCursor, error) {
	next := ledger.ActivityCursor{At: changeStamp()}
	rows, err := s.r.QueryContext(ctx, endpointActivitySQL, c.From(s.activityOverlap))
	if err != nil {
		return nil, c, translate("endpoint activity", err)
	}
	defer func() { _ = rows.Close() }()
	var out []ledger.EndpointActivity
	for rows.Next() {
		var a ledger.EndpointActivity
		var success, failure, deferral sql.NullInt64
		if err := rows.Scan(&a.Stats.EndpointID, &a.Stats.Pending, &a.Stats.InFlight, &a.Stats.AwaitingAck, &a.Stats.Delivered,
			&a.Stats.ExhaustedUnresolved, &a.Stats.Cancelled, &success, &failure, &a.Stats.LastFailureReason, &deferral); err != nil {
			return nil, c, translate("endpoint activity", err)
		}
		a.Stats.LastSuccessAt, a.Stats.LastFailureAt, a.LastDeferralAt = fromNullNanos(success), fromNullNanos(failure), fromNullNanos(deferral)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, c, translate("endpoint activity", err)
	}
	return out, next, nil
}
