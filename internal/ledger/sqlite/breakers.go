package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// This file implements ledger.Breakers on the endpoint_breakers table
// (migration 0013); package ledger runs the transactions (breaker.go).
// The single writer orders them: no lock is needed.

const (
	breakerReadSQL = `SELECT b.state FROM endpoints e LEFT JOIN endpoint_breakers b ON b.endpoint_id = e.id
		WHERE e.id = ?1 AND e.deleted = 0`
	breakerWriteSQL = `INSERT INTO endpoint_breakers (endpoint_id, open, closed_at, state) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (endpoint_id) DO UPDATE SET open = excluded.open, closed_at = excluded.closed_at, state = excluded.state`
	breakerHoldSQL = `UPDATE endpoints SET breaker_open = ?2 WHERE id = ?1`
	breakerGetSQL  = `SELECT state FROM endpoint_breakers WHERE endpoint_id = ?1`
	breakerListSQL = `SELECT state FROM endpoint_breakers WHERE open <> 0 OR closed_at >= ?1 ORDER BY endpoint_id`
	// A probe: the endpoint's earliest due delivery, or an expired lease.
	breakerProbeSQL = `SELECT id, endpoint_id, state, due_at FROM deliveries
		WHERE endpoint_id = ?1 AND ((state = 'scheduled' AND due_at <= ?2) OR (state = 'in_flight' AND lease_until <= ?2))
		ORDER BY due_at, id LIMIT ?3`
	// Held past their horizon: scheduled, started before ?2.
	breakerExpiredSQL = `SELECT id, endpoint_id, state, due_at FROM deliveries
		WHERE endpoint_id = ?1 AND state = 'scheduled' AND coalesce(first_attempt_at, created_at) < ?2
		ORDER BY due_at, id LIMIT ?3`
	breakerForgetSQL = `DELETE FROM endpoint_breakers WHERE endpoint_id = ?1`
)

// BreakerGet implements ledger.Breakers.
func (s *Store) BreakerGet(ctx context.Context, endpointID string) (ledger.Breaker, error) {
	op := "read the breaker of " + endpointID
	var state []byte
	if err := s.r.QueryRowContext(ctx, breakerGetSQL, endpointID).Scan(&state); err != nil {
		return ledger.Breaker{}, translate(op, err)
	}
	return ledger.UnmarshalBreaker(state)
}

// BreakerList implements ledger.Breakers.
func (s *Store) BreakerList(ctx context.Context, closedSince time.Time) ([]ledger.Breaker, error) {
	const op = "list breakers"
	rows, err := s.rs.breakerList.QueryContext(ctx, nanos(closedSince))
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []ledger.Breaker
	for rows.Next() {
		var state []byte
		if err := rows.Scan(&state); err != nil {
			return nil, translate(op, err)
		}
		b, err := ledger.UnmarshalBreaker(state)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		out = append(out, b)
	}
	return out, translate(op, rows.Err())
}

// BreakerOpen implements ledger.Breakers.
func (s *Store) BreakerOpen(ctx context.Context, p *ledger.BreakerOpenParams) (ledger.Breaker, bool, error) {
	return ledger.BreakerOpen(ctx, driver{s}, p)
}

// BreakerProbe implements ledger.Breakers.
func (s *Store) BreakerProbe(ctx context.Context, p *ledger.BreakerProbeParams) ([]ledger.ClaimedDelivery, error) {
	return ledger.BreakerProbe(ctx, driver{s}, p)
}

// BreakerProbeDone implements ledger.Breakers.
func (s *Store) BreakerProbeDone(ctx context.Context, p *ledger.BreakerProbeDoneParams) (ledger.Breaker, bool, error) {
	return ledger.BreakerProbeDone(ctx, driver{s}, p)
}

// BreakerProbeNow implements ledger.Breakers.
func (s *Store) BreakerProbeNow(ctx context.Context, endpointID string, now time.Time) (ledger.Breaker, error) {
	return ledger.BreakerProbeNow(ctx, driver{s}, endpointID, now)
}

// BreakerClose implements ledger.Breakers.
func (s *Store) BreakerClose(ctx context.Context, endpointID string, reason ledger.BreakerCloseReason, now time.Time) (ledger.Breaker, error) {
	return ledger.BreakerClose(ctx, driver{s}, endpointID, reason, now)
}

// BreakerExpire implements ledger.Breakers.
func (s *Store) BreakerExpire(ctx context.Context, p *ledger.BreakerExpireParams) ([]ledger.ClaimedDelivery, error) {
	return ledger.BreakerExpire(ctx, driver{s}, p)
}

// BreakerTx implements ledger.BreakerTransactor: one write transaction.
func (d driver) BreakerTx(ctx context.Context, op string, fn func(ledger.BreakerStatements) error) error {
	return d.writeOp(ctx, op, func(t *wtx) error { return fn(breakerTx{t}) })
}

// breakerTx runs ledger.BreakerStatements in one write transaction.
type breakerTx struct{ t *wtx }

// BreakerRead implements ledger.BreakerStatements.
func (b breakerTx) BreakerRead(_ context.Context, endpointID string) (ledger.Breaker, bool, error) {
	var state []byte
	err := b.t.tx.QueryRowContext(b.t.ctx, breakerReadSQL, endpointID).Scan(&state)
	if err != nil {
		return ledger.Breaker{}, false, translate("read breaker", err)
	}
	if state == nil {
		return ledger.Breaker{EndpointID: endpointID}, false, nil
	}
	br, err := ledger.UnmarshalBreaker(state)
	return br, err == nil, err
}

// BreakerWrite implements ledger.BreakerStatements.
func (b breakerTx) BreakerWrite(_ context.Context, br *ledger.Breaker) error {
	state, err := ledger.MarshalBreaker(br)
	if err != nil {
		return err
	}
	if _, err := b.t.tx.ExecContext(b.t.ctx, breakerWriteSQL, br.EndpointID, br.Open, nullNanosPtr(br.ClosedAt), state); err != nil {
		return translate("write breaker", err)
	}
	_, err = b.t.tx.ExecContext(b.t.ctx, breakerHoldSQL, br.EndpointID, br.Open)
	return translate("hold the endpoint's deliveries", err)
}

// LeaseOf implements ledger.BreakerStatements with the claim's lease and
// read statements.
func (b breakerTx) LeaseOf(_ context.Context, endpointID, owner string, now, until time.Time, startedBefore *time.Time, limit int) ([]ledger.ClaimedDelivery, error) {
	const op = "lease deliveries of a held endpoint"
	query, bound := breakerProbeSQL, nanos(now)
	if startedBefore != nil {
		query, bound = breakerExpiredSQL, nanos(*startedBefore)
	}
	rows, err := b.t.tx.QueryContext(b.t.ctx, query, endpointID, bound, limit)
	if err != nil {
		return nil, translate(op, err)
	}
	var ids []string
	ds := ledger.StatsDelta{}
	for rows.Next() {
		var c candidate
		if err := rows.Scan(&c.id, &c.endpoint, &c.state, &c.due); err != nil {
			_ = rows.Close()
			return nil, translate(op, err)
		}
		ids = append(ids, c.id)
		if c.state == ledger.StateScheduled {
			ds.Move(c.endpoint, ledger.StateScheduled, ledger.ResolutionNone, ledger.StateInFlight, ledger.ResolutionNone)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, translate(op, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	s := b.t.s
	if _, err := b.t.stmt(s.ws.claimLease).ExecContext(b.t.ctx, owner, nanos(until), string(idsJSON)); err != nil {
		return nil, translate(op, err)
	}
	out, err := s.claimedRows(b.t, string(idsJSON), len(ids))
	if err != nil {
		return nil, err
	}
	return out, applyStats(b.t, s.ws.statsApply, ds)
}

// forgetBreaker drops a deleted endpoint's breaker, so that an endpoint
// created again under its name starts closed.
func forgetBreaker(t *wtx, endpointID string) error {
	_, err := t.tx.ExecContext(t.ctx, breakerForgetSQL, endpointID)
	return translate("forget the breaker", err)
}
