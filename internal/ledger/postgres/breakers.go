package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// This file implements ledger.Breakers on the endpoint_breakers table
// (migration 00013); package ledger runs the transactions (breaker.go).
// Each transaction first locks the endpoint's row FOR NO KEY UPDATE: the
// breaker transactions of one endpoint run one after the other across
// processes, publishes fanning out to it (FOR KEY SHARE) are not held up,
// and EndpointDelete (FOR UPDATE) waits for them or they for it. The
// deliveries come after the endpoint, as in EndpointDelete (doc.go's lock
// order), and are taken with SKIP LOCKED.

const (
	// The lock and the read are two statements: under READ COMMITTED the
	// read's snapshot is taken once the lock is held, so it sees what the
	// transaction that held it before committed (a join read under the
	// lock would see the breaker as it was when the statement began).
	breakerLockSQL  = `SELECT id FROM endpoints WHERE id = $1 AND deleted_at IS NULL FOR NO KEY UPDATE`
	breakerWriteSQL = `
		INSERT INTO endpoint_breakers (endpoint_id, open, closed_at, state) VALUES ($1, $2, $3, $4)
		ON CONFLICT (endpoint_id) DO UPDATE SET open = EXCLUDED.open, closed_at = EXCLUDED.closed_at, state = EXCLUDED.state`
	breakerHoldSQL = `UPDATE endpoints SET breaker_open = $2 WHERE id = $1 AND breaker_open <> $2`
	breakerGetSQL  = `SELECT state FROM endpoint_breakers WHERE endpoint_id = $1`
	breakerListSQL = `SELECT state FROM endpoint_breakers WHERE open OR closed_at >= $1 ORDER BY endpoint_id`

	// breakerLeaseSQL leases deliveries of endpoint $1 like claimSQL: $5
	// NULL, the earliest due scheduled one or expired lease (a probe);
	// else the scheduled ones, due or not, that started before $5.
	breakerLeaseSQL = `
	WITH picked AS (
		SELECT d.id, d.due_at, d.seq, d.state AS prev_state, ep.version
		FROM deliveries d JOIN endpoints ep ON ep.id = d.endpoint_id
		WHERE d.endpoint_id = $1 AND (
			($5::bigint IS NULL AND d.state IN ('scheduled', 'in_flight') AND d.due_at <= $2
				AND (d.state = 'scheduled' OR d.lease_until <= $2))
			OR ($5::bigint IS NOT NULL AND d.state = 'scheduled'
				AND coalesce(d.first_attempt_at, d.created_at) < $5))
		ORDER BY d.due_at, d.seq
		LIMIT $6
		FOR UPDATE OF d SKIP LOCKED
	), claimed AS (
		UPDATE deliveries d SET state = 'in_flight', lease_owner = $3, lease_until = $4
		FROM picked WHERE d.id = picked.id
		RETURNING ` + deliveryColumns + `, d.seq, picked.prev_state, picked.version
	)
	SELECT ` + deliveryColumns + `, d.prev_state, d.version, ` + eventColumns + `
	FROM claimed d JOIN events e ON e.id = d.event_id LEFT JOIN event_secrets sec ON sec.event_id = e.id
	ORDER BY d.due_at, d.seq`
)

// BreakerGet implements ledger.Breakers.
func (s *Store) BreakerGet(ctx context.Context, endpointID string) (ledger.Breaker, error) {
	var state []byte
	if err := s.pool.QueryRow(ctx, breakerGetSQL, endpointID).Scan(&state); err != nil {
		return ledger.Breaker{}, translate("read the breaker of "+endpointID, err)
	}
	return ledger.UnmarshalBreaker(state)
}

// BreakerList implements ledger.Breakers.
func (s *Store) BreakerList(ctx context.Context, closedSince time.Time) ([]ledger.Breaker, error) {
	const op = "list breakers"
	rows, err := s.pool.Query(ctx, breakerListSQL, nanos(closedSince))
	if err != nil {
		return nil, translate(op, err)
	}
	var out []ledger.Breaker
	var state []byte
	if _, err := pgx.ForEachRow(rows, []any{&state}, func() error {
		b, err := ledger.UnmarshalBreaker(state)
		out = append(out, b)
		return err
	}); err != nil {
		return nil, translate(op, err)
	}
	return out, nil
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

// BreakerTx implements ledger.BreakerTransactor.
func (d driver) BreakerTx(ctx context.Context, op string, fn func(ledger.BreakerStatements) error) error {
	return d.tx(ctx, op, func(tx *txn) error { return fn(breakerTx{tx}) })
}

// breakerTx runs ledger.BreakerStatements in one transaction.
type breakerTx struct{ tx *txn }

// BreakerRead implements ledger.BreakerStatements.
func (b breakerTx) BreakerRead(ctx context.Context, endpointID string) (ledger.Breaker, bool, error) {
	var id string
	var state []byte
	batch := &pgx.Batch{}
	batch.Queue(breakerLockSQL, endpointID).QueryRow(func(row pgx.Row) error { return row.Scan(&id) })
	batch.Queue(breakerGetSQL, endpointID).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&state); !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		return nil
	})
	if err := b.tx.SendBatch(ctx, batch).Close(); err != nil {
		return ledger.Breaker{}, false, err // ErrNoRows (no endpoint) becomes ledger.ErrNotFound
	}
	if state == nil {
		return ledger.Breaker{EndpointID: endpointID}, false, nil
	}
	br, err := ledger.UnmarshalBreaker(state)
	return br, err == nil, err
}

// BreakerWrite implements ledger.BreakerStatements.
func (b breakerTx) BreakerWrite(ctx context.Context, br *ledger.Breaker) error {
	state, err := ledger.MarshalBreaker(br)
	if err != nil {
		return err
	}
	var closedAt *int64
	if br.ClosedAt != nil {
		n := nanos(*br.ClosedAt)
		closedAt = &n
	}
	batch := &pgx.Batch{}
	batch.Queue(breakerWriteSQL, br.EndpointID, br.Open, closedAt, state)
	batch.Queue(breakerHoldSQL, br.EndpointID, br.Open)
	return b.tx.SendBatch(ctx, batch).Close()
}

// LeaseOf implements ledger.BreakerStatements.
func (b breakerTx) LeaseOf(ctx context.Context, endpointID, owner string, now, until time.Time, startedBefore *time.Time, limit int) ([]ledger.ClaimedDelivery, error) {
	var before *int64
	if startedBefore != nil {
		n := nanos(*startedBefore)
		before = &n
	}
	rows, err := b.tx.Query(ctx, breakerLeaseSQL, endpointID, nanos(now), owner, nanos(until), before, limit)
	if err != nil {
		return nil, err
	}
	return scanClaimed(b.tx, rows, nil)
}
