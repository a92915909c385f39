package postgres

import (
	"context"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// rateScheduleSQL reads an endpoint's schedule, creating it at 0, and
// locks its row until the transaction ends (the update of a conflict
// locks it as FOR UPDATE would).
const rateScheduleSQL = `
	INSERT INTO endpoint_rates AS r (endpoint_id, tat) VALUES ($1, 0)
	ON CONFLICT (endpoint_id) DO UPDATE SET tat = r.tat
	RETURNING r.tat`

// slotLockSQL serializes the leases of one endpoint: a holder's first
// lease has no row to lock yet. It is a statement of its own, so that
// the statements after it (READ COMMITTED) see every lease committed
// before the lock was granted.
const slotLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1, 47))`

// EndpointRateTake implements ledger.Limits (ledger.EndpointRateTake runs
// the transaction).
func (s *Store) EndpointRateTake(ctx context.Context, p *ledger.RateTakeParams) (ledger.RateAnswer, error) {
	return ledger.EndpointRateTake(ctx, driver{s}, p)
}

// EndpointSlotsLease implements ledger.Limits.
func (s *Store) EndpointSlotsLease(ctx context.Context, p *ledger.SlotsLeaseParams) ([]int, error) {
	return ledger.EndpointSlotsLease(ctx, driver{s}, p)
}

// LimitTx implements ledger.LimitTransactor.
func (d driver) LimitTx(ctx context.Context, op string, fn func(ledger.LimitStatements) error) error {
	return d.tx(ctx, op, func(tx *txn) error { return fn(limitTx{tx}) })
}

// limitTx runs ledger.LimitStatements in one transaction.
type limitTx struct{ tx *txn }

// RateSchedule implements ledger.LimitStatements.
func (l limitTx) RateSchedule(ctx context.Context, endpointID string) (int64, error) {
	var tat int64
	err := l.tx.QueryRow(ctx, rateScheduleSQL, endpointID).Scan(&tat)
	return tat, err
}

// RateScheduleSet implements ledger.LimitStatements.
func (l limitTx) RateScheduleSet(ctx context.Context, endpointID string, tat int64) error {
	_, err := l.tx.Exec(ctx, `UPDATE endpoint_rates SET tat = $2 WHERE endpoint_id = $1`, endpointID, tat)
	return err
}

// SlotLeases implements ledger.LimitStatements.
func (l limitTx) SlotLeases(ctx context.Context, endpointID string, now time.Time) ([]ledger.SlotLease, error) {
	if _, err := l.tx.Exec(ctx, slotLockSQL, endpointID); err != nil {
		return nil, err
	}
	if _, err := l.tx.Exec(ctx, `DELETE FROM endpoint_slot_leases WHERE endpoint_id = $1 AND until <= $2`, endpointID, nanos(now)); err != nil {
		return nil, err
	}
	rows, err := l.tx.Query(ctx, `SELECT holder, held, want FROM endpoint_slot_leases WHERE endpoint_id = $1`, endpointID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ledger.SlotLease
	for rows.Next() {
		var (
			lease      ledger.SlotLease
			held, want int64
		)
		if err := rows.Scan(&lease.Holder, &held, &want); err != nil {
			return nil, err
		}
		lease.Held, lease.Want = int(held), int(want)
		out = append(out, lease)
	}
	return out, rows.Err()
}

// SlotLeaseSet implements ledger.LimitStatements.
func (l limitTx) SlotLeaseSet(ctx context.Context, endpointID string, lease ledger.SlotLease, until time.Time) error {
	_, err := l.tx.Exec(ctx, `
		INSERT INTO endpoint_slot_leases (endpoint_id, holder, held, want, until) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (endpoint_id, holder) DO UPDATE SET held = EXCLUDED.held, want = EXCLUDED.want, until = EXCLUDED.until`,
		endpointID, lease.Holder, int64(lease.Held), int64(lease.Want), nanos(until))
	return err
}

// WaitingList implements ledger.Limits (deliveries_claimable holds the
// scheduled rows by due time).
func (s *Store) WaitingList(ctx context.Context, now time.Time) ([]ledger.Waiting, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT endpoint_id, count(*), min(due_at) FROM deliveries
		WHERE state = 'scheduled' AND due_at <= $1
		GROUP BY endpoint_id ORDER BY endpoint_id`, nanos(now))
	if err != nil {
		return nil, translate("list waiting deliveries", err)
	}
	defer rows.Close()
	var out []ledger.Waiting
	for rows.Next() {
		var (
			w      ledger.Waiting
			oldest int64
		)
		if err := rows.Scan(&w.EndpointID, &w.Deliveries, &oldest); err != nil {
			return nil, translate("list waiting deliveries", err)
		}
		w.OldestDue = time.Unix(0, oldest).UTC()
		out = append(out, w)
	}
	return out, translate("list waiting deliveries", rows.Err())
}

var (
	_ ledger.Limits          = (*Store)(nil)
	_ ledger.LimitTransactor = driver{}
)
