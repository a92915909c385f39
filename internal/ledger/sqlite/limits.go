package sqlite

import (
	"context"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// EndpointRateTake implements ledger.Limits (ledger.EndpointRateTake runs
// the transaction). The embedded ledger serves one process, whose engine
// keeps its limits in memory; this keeps the drivers one contract.
func (s *Store) EndpointRateTake(ctx context.Context, p *ledger.RateTakeParams) (ledger.RateAnswer, error) {
	return ledger.EndpointRateTake(ctx, driver{s}, p)
}

// EndpointSlotsLease implements ledger.Limits.
func (s *Store) EndpointSlotsLease(ctx context.Context, p *ledger.SlotsLeaseParams) ([]int, error) {
	return ledger.EndpointSlotsLease(ctx, driver{s}, p)
}

// LimitTx implements ledger.LimitTransactor: one write transaction, which
// the single writer serializes.
func (d driver) LimitTx(ctx context.Context, op string, fn func(ledger.LimitStatements) error) error {
	return d.writeOp(ctx, op, func(t *wtx) error { return fn(limitTx{t}) })
}

// limitTx runs ledger.LimitStatements in one write transaction.
type limitTx struct{ t *wtx }

// RateSchedule implements ledger.LimitStatements.
func (l limitTx) RateSchedule(_ context.Context, endpointID string) (int64, error) {
	var tat int64
	err := l.t.tx.QueryRowContext(l.t.ctx, `
		INSERT INTO endpoint_rates (endpoint_id, tat) VALUES (?, 0)
		ON CONFLICT (endpoint_id) DO UPDATE SET tat = tat
		RETURNING tat`, endpointID).Scan(&tat)
	return tat, translate("read a rate schedule", err)
}

// RateScheduleSet implements ledger.LimitStatements.
func (l limitTx) RateScheduleSet(_ context.Context, endpointID string, tat int64) error {
	_, err := l.t.tx.ExecContext(l.t.ctx, `UPDATE endpoint_rates SET tat = ? WHERE endpoint_id = ?`, tat, endpointID)
	return translate("write a rate schedule", err)
}

// SlotLeases implements ledger.LimitStatements.
func (l limitTx) SlotLeases(_ context.Context, endpointID string, now time.Time) ([]ledger.SlotLease, error) {
	if _, err := l.t.tx.ExecContext(l.t.ctx, `DELETE FROM endpoint_slot_leases WHERE endpoint_id = ? AND until <= ?`,
		endpointID, now.UnixNano()); err != nil {
		return nil, translate("delete expired slot leases", err)
	}
	rows, err := l.t.tx.QueryContext(l.t.ctx, `SELECT holder, held, want FROM endpoint_slot_leases WHERE endpoint_id = ?`, endpointID)
	if err != nil {
		return nil, translate("read slot leases", err)
	}
	defer func() { _ = rows.Close() }()
	var out []ledger.SlotLease
	for rows.Next() {
		var lease ledger.SlotLease
		if err := rows.Scan(&lease.Holder, &lease.Held, &lease.Want); err != nil {
			return nil, translate("read slot leases", err)
		}
		out = append(out, lease)
	}
	return out, translate("read slot leases", rows.Err())
}

// SlotLeaseSet implements ledger.LimitStatements.
func (l limitTx) SlotLeaseSet(_ context.Context, endpointID string, lease ledger.SlotLease, until time.Time) error {
	_, err := l.t.tx.ExecContext(l.t.ctx, `
		INSERT INTO endpoint_slot_leases (endpoint_id, holder, held, want, until) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (endpoint_id, holder) DO UPDATE SET held = excluded.held, want = excluded.want, until = excluded.until`,
		endpointID, lease.Holder, lease.Held, lease.Want, until.UnixNano())
	return translate("write a slot lease", err)
}

// WaitingList implements ledger.Limits (deliveries_due holds the
// scheduled rows by due time).
func (s *Store) WaitingList(ctx context.Context, now time.Time) ([]ledger.Waiting, error) {
	rows, err := s.r.QueryContext(ctx, `
		SELECT endpoint_id, count(*), min(due_at) FROM deliveries
		WHERE state = 'scheduled' AND due_at <= ?
		GROUP BY endpoint_id ORDER BY endpoint_id`, now.UnixNano())
	if err != nil {
		return nil, translate("list waiting deliveries", err)
	}
	defer func() { _ = rows.Close() }()
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
