package postgres

import (
	"context"
	"errors"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// This file implements ledger.RetryDeferrals on the retry_deferrals table
// (migration 00012). A record is a transaction of its own that touches no
// other table, so it stays outside the store's lock order (doc.go).

// deferralRecordSQL adds deferred retries to their minute's bucket; ON
// CONFLICT DO UPDATE makes concurrent records from any process add up. It
// returns the bucket's count: equal to the count added when the bucket is
// new.
const deferralRecordSQL = `
	INSERT INTO retry_deferrals AS d (endpoint_id, minute, deferred, first_at, last_at)
	VALUES ($1, $2, $3, $4, $4)
	ON CONFLICT (endpoint_id, minute) DO UPDATE SET
		deferred = d.deferred + EXCLUDED.deferred,
		first_at = LEAST(d.first_at, EXCLUDED.first_at),
		last_at  = GREATEST(d.last_at, EXCLUDED.last_at)
	RETURNING d.deferred`

// deferralPruneSQL deletes buckets older than $1, skipping any a
// concurrent transaction holds (a later call gets them).
const deferralPruneSQL = `
	DELETE FROM retry_deferrals WHERE (endpoint_id, minute) IN (
		SELECT endpoint_id, minute FROM retry_deferrals WHERE minute < $1
		FOR UPDATE SKIP LOCKED)`

// deferralBucketsSQL lists an endpoint's buckets from minute $2 on, newest
// first.
const deferralBucketsSQL = `
	SELECT minute, deferred, first_at, last_at FROM retry_deferrals
	WHERE endpoint_id = $1 AND minute >= $2
	ORDER BY minute DESC`

// RetryDeferralRecord implements ledger.RetryDeferrals (ledger.RetryDeferralRecord).
func (s *Store) RetryDeferralRecord(ctx context.Context, p *ledger.RetryDeferralParams) error {
	return ledger.RetryDeferralRecord(ctx, driver{s}, p)
}

// RetryDeferralTx implements ledger.DeferralTransactor.
func (d driver) RetryDeferralTx(ctx context.Context, op string, fn func(ledger.DeferralStatements) error) error {
	return d.tx(ctx, op, func(tx *txn) error { return fn(deferralTx{tx}) })
}

// deferralTx runs ledger.DeferralStatements in one transaction.
type deferralTx struct{ tx *txn }

// RetryDeferralAdd implements ledger.DeferralStatements.
func (d deferralTx) RetryDeferralAdd(ctx context.Context, p *ledger.RetryDeferralParams, minute int64) (int64, error) {
	var deferred int64
	err := d.tx.QueryRow(ctx, deferralRecordSQL, p.EndpointID, minute, p.Count, nanos(p.Now)).Scan(&deferred)
	return deferred, err
}

// RetryDeferralPrune implements ledger.DeferralStatements.
func (d deferralTx) RetryDeferralPrune(ctx context.Context, before int64) error {
	_, err := d.tx.Exec(ctx, deferralPruneSQL, before)
	return err
}

// RetryDeferralBuckets implements ledger.RetryDeferrals.
func (s *Store) RetryDeferralBuckets(ctx context.Context, p *ledger.RetryDeferralBucketsParams) ([]ledger.DeferralBucket, error) {
	if p == nil {
		return nil, errors.New("list deferred retries: nil params")
	}
	op := "list deferred retries of " + p.EndpointID
	rows, err := s.pool.Query(ctx, deferralBucketsSQL, p.EndpointID, p.SinceMinute)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	out, err := ledger.CollectDeferralBuckets(rows)
	if err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}
