package sqlite

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// delta is what one transaction changes in one endpoint's stats.
type delta struct {
	pending, inFlight, awaitingAck, delivered, exhausted, cancelled int64
	success, failure                                                time.Time // zero: unchanged
	reason                                                          string
}

// enter counts a delivery entering state.
func (d *delta) enter(state ledger.DeliveryState, n int64) {
	switch state {
	case ledger.StateScheduled:
		d.pending += n
	case ledger.StateInFlight:
		d.inFlight += n
	case ledger.StateAwaitingAck:
		d.awaitingAck += n
	case ledger.StateDelivered:
		d.delivered += n
	case ledger.StateExhausted:
		d.exhausted += n
	case ledger.StateCancelled:
		d.cancelled += n
	}
}

// move counts a delivery moving from one state to another.
func (d *delta) move(from, to ledger.DeliveryState) {
	d.enter(from, -1)
	d.enter(to, 1)
}

// deltas accumulates a transaction's stats changes per endpoint, so that
// each endpoint's row is written once per transaction however large the
// batch.
type deltas map[string]*delta

func (ds deltas) get(endpoint string) *delta {
	d, ok := ds[endpoint]
	if !ok {
		d = &delta{}
		ds[endpoint] = d
	}
	return d
}

// apply writes the deltas, in endpoint order.
func (ds deltas) apply(t *wtx, st *sql.Stmt) error {
	ids := make([]string, 0, len(ds))
	for id := range ds {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	stmt := t.stmt(st)
	for _, id := range ids {
		d := ds[id]
		if _, err := stmt.ExecContext(t.ctx, id, d.pending, d.inFlight, d.awaitingAck, d.delivered, d.exhausted,
			d.cancelled, nullNanos(d.success), nullNanos(d.failure), d.reason); err != nil {
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
