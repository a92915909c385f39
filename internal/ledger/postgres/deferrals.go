package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// This file implements ledger.RetryDeferrals on the retry_deferrals table
// (migration 00012). A record is a transaction of its own that locks its
// bucket, then its endpoint's stats shard 0 (deferralStampSQL): the
// store's lock order (doc.go), as no transaction locks a bucket after a
// stats row; the prune skips the buckets it would wait for.

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

// deferralStampSQL stamps an endpoint's activity changed: a deferral moves
// no counter, but EndpointActivitySince must return it (LastDeferralAt).
// Not from retry_deferrals.last_at: that is the caller's clock, not the
// server's. One shard is enough; shard 0 always exists (EndpointUpsert),
// and an update of another that leaves writes alone would be skipped by
// migration 00011's trigger.
const deferralStampSQL = `UPDATE endpoint_stats SET changed_at = ` + changeStampSQL + `
	WHERE endpoint_id = $1 AND shard = 0`

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

// RetryDeferralAdd implements ledger.DeferralStatements, and stamps the
// endpoint's activity changed in the same transaction: queued, after the
// bucket, for the next pipeline (the prune's or COMMIT's).
func (d deferralTx) RetryDeferralAdd(ctx context.Context, p *ledger.RetryDeferralParams, minute int64) (int64, error) {
	var deferred int64
	if err := d.tx.QueryRow(ctx, deferralRecordSQL, p.EndpointID, minute, p.Count, nanos(p.Now)).Scan(&deferred); err != nil {
		return 0, err
	}
	b := &pgx.Batch{}
	b.Queue(deferralStampSQL, p.EndpointID)
	d.tx.queue("stamp the endpoint's activity", b)
	return deferred, nil
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
