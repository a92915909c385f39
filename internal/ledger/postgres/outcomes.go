package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Outcome evidence (ledger.Evidence): the settle hook, the read and the
// prune of outcome_buckets.

// outcomeUpsertSQL adds one row's deltas under the endpoint's current
// policy, read from its row in the same transaction. The upsert is atomic,
// so concurrent settlements of one row from several processes add up.
const outcomeUpsertSQL = `
	INSERT INTO outcome_buckets AS o (endpoint_id, policy_name, policy_generation, hour, outcome, attempt,
		namespace, count, ttd, first_at, last_at)
	SELECT e.id, COALESCE(e.policy->>'name', ''), COALESCE((e.policy->>'generation')::bigint, 0),
		$2, $3, $4, e.namespace, $5, $6, $7, $8
	FROM endpoints e WHERE e.id = $1
	ON CONFLICT (endpoint_id, policy_name, policy_generation, hour, outcome, attempt) DO UPDATE SET
		count = o.count + excluded.count,
		ttd = ARRAY(SELECT a + b FROM unnest(o.ttd, excluded.ttd) WITH ORDINALITY AS u(a, b, i) ORDER BY i),
		first_at = LEAST(o.first_at, excluded.first_at),
		last_at = GREATEST(o.last_at, excluded.last_at)`

// queueOutcomes queues a transaction's outcome rows, one upsert each, in
// the global key order, after endpoint_stats (the last rows before them in
// the store's lock order).
func queueOutcomes(b *pgx.Batch, o ledger.OutcomeDeltas) {
	for _, k := range o.Keys() {
		c := o[k]
		b.Queue(outcomeUpsertSQL, k.EndpointID, nanos(k.Hour), k.Outcome, k.Attempt, c.Count,
			c.TimeToDelivery[:], nanos(c.FirstAt), nanos(c.LastAt))
	}
}

// OutcomeList implements ledger.Evidence.
func (s *Store) OutcomeList(ctx context.Context, p *ledger.OutcomeListParams) ([]ledger.OutcomeBucket, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT endpoint_id, namespace, policy_name, policy_generation, hour, outcome, attempt, count, ttd, first_at, last_at
		FROM outcome_buckets
		WHERE ($1 = '' OR namespace = $1) AND ($2 = '' OR endpoint_id = $2) AND ($3 = '' OR policy_name = $3) AND hour >= $4
		ORDER BY endpoint_id, hour, outcome, attempt, policy_name, policy_generation`,
		p.Namespace, p.EndpointID, p.PolicyName, nanos(p.Since.UTC().Truncate(ledger.OutcomeBucketWidth)))
	if err != nil {
		return nil, translate("list outcomes", err)
	}
	var out []ledger.OutcomeBucket
	var (
		b                 ledger.OutcomeBucket
		hour, first, last int64
		ttd               []int64
	)
	_, err = pgx.ForEachRow(rows, []any{&b.EndpointID, &b.Namespace, &b.PolicyName, &b.PolicyGeneration, &hour,
		&b.Outcome, &b.Attempt, &b.Count, &ttd, &first, &last}, func() error {
		if len(ttd) != ledger.TimeToDeliveryBuckets {
			return fmt.Errorf("outcome bucket of %s has %d histogram buckets, want %d", b.EndpointID, len(ttd), ledger.TimeToDeliveryBuckets)
		}
		copy(b.TimeToDelivery[:], ttd)
		b.Hour, b.FirstAt, b.LastAt = fromNanos(hour), fromNanos(first), fromNanos(last)
		out = append(out, b)
		return nil
	})
	if err != nil {
		return nil, translate("list outcomes", err)
	}
	return out, nil
}

// OutcomePrune implements ledger.Evidence.
func (s *Store) OutcomePrune(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, `
		DELETE FROM outcome_buckets WHERE ctid IN (
			SELECT ctid FROM outcome_buckets WHERE hour < $1 ORDER BY hour LIMIT $2)`,
		nanos(before), ledger.SweepLimit(limit))
	if err != nil {
		return 0, translate("prune outcomes", err)
	}
	return int(tag.RowsAffected()), nil
}
