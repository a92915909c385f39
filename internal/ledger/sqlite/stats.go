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
