package sqlite

import (
	"context"
	"errors"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// This file implements ledger.RetryDeferrals on the retry_deferrals table
// (migration 0012).

// deferralRecordSQL adds deferred retries to their minute's bucket and
// returns the bucket's count: equal to the count added when the bucket is
// new.
const deferralRecordSQL = `
	INSERT INTO retry_deferrals (endpoint_id, minute, deferred, first_at, last_at)
	VALUES (?1, ?2, ?3, ?4, ?4)
	ON CONFLICT (endpoint_id, minute) DO UPDATE SET
		deferred = deferred + excluded.deferred,
		first_at = min(first_at, excluded.first_at),
		last_at  = max(last_at, excluded.last_at)
	RETURNING deferred`

// deferralStampSQL stamps an endpoint's activity changed: a deferral moves
// no counter, but EndpointActivitySince must return it (LastDeferralAt).
// Not retry_deferrals.last_at: that is the caller's clock, not the feed's.
const deferralStampSQL = `UPDATE endpoint_stats SET changed_at = ?2 WHERE endpoint_id = ?1`

// deferralPruneSQL deletes every endpoint's buckets older than ?1.
const deferralPruneSQL = `DELETE FROM retry_deferrals WHERE minute < ?1`

// deferralBucketsSQL lists an endpoint's buckets from minute ?2 on, newest
// first.
const deferralBucketsSQL = `
	SELECT minute, deferred, first_at, last_at FROM retry_deferrals
	WHERE endpoint_id = ?1 AND minute >= ?2
	ORDER BY minute DESC`

// RetryDeferralRecord implements ledger.RetryDeferrals (ledger.RetryDeferralRecord).
func (s *Store) RetryDeferralRecord(ctx context.Context, p *ledger.RetryDeferralParams) error {
	return ledger.RetryDeferralRecord(ctx, driver{s}, p)
}

// RetryDeferralTx implements ledger.DeferralTransactor: one write transaction.
func (d driver) RetryDeferralTx(ctx context.Context, op string, fn func(ledger.DeferralStatements) error) error {
	return d.writeOp(ctx, op, func(t *wtx) error { return fn(deferralTx{t}) })
}

// deferralTx runs ledger.DeferralStatements in one write transaction.
type deferralTx struct{ t *wtx }

// RetryDeferralAdd implements ledger.DeferralStatements, and stamps the
// endpoint's activity changed in the same transaction.
func (d deferralTx) RetryDeferralAdd(_ context.Context, p *ledger.RetryDeferralParams, minute int64) (int64, error) {
	var deferred int64
	err := d.t.tx.QueryRowContext(d.t.ctx, deferralRecordSQL, p.EndpointID, minute, p.Count, nanos(p.Now)).Scan(&deferred)
	if err != nil {
		return 0, translate("add deferred retries", err)
	}
	if _, err := d.t.tx.ExecContext(d.t.ctx, deferralStampSQL, p.EndpointID, changeStamp()); err != nil {
		return 0, translate("stamp the endpoint's activity", err)
	}
	return deferred, nil
}

// RetryDeferralPrune implements ledger.DeferralStatements.
func (d deferralTx) RetryDeferralPrune(_ context.Context, before int64) error {
	_, err := d.t.tx.ExecContext(d.t.ctx, deferralPruneSQL, before)
	return translate("delete old buckets", err)
}

// RetryDeferralBuckets implements ledger.RetryDeferrals.
func (s *Store) RetryDeferralBuckets(ctx context.Context, p *ledger.RetryDeferralBucketsParams) ([]ledger.DeferralBucket, error) {
	if p == nil {
		return nil, errors.New("list deferred retries: nil params")
	}
	op := "list deferred retries of " + p.EndpointID
	rows, err := s.r.QueryContext(ctx, deferralBucketsSQL, p.EndpointID, p.SinceMinute)
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
