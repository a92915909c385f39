package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Outcome evidence (ledger.Evidence): the settle hook, the read and the
// prune of outcome_buckets.

// ttdColumns are the histogram columns t0..t12.
var ttdColumns = func() []string {
	c := make([]string, ledger.TimeToDeliveryBuckets)
	for i := range c {
		c[i] = fmt.Sprintf("t%d", i)
	}
	return c
}()

// outcomeStmts are the prepared statements of the evidence.
type outcomeStmts struct {
	upsert *sql.Stmt // writer
	list   *sql.Stmt // reader
}

// outcomeUpsertSQL adds one row's deltas, under the endpoint's current
// policy read from its row in the same transaction.
func outcomeUpsertSQL() string {
	var sets, params []string
	for i, c := range ttdColumns {
		sets = append(sets, fmt.Sprintf("%s = %s + excluded.%s", c, c, c))
		params = append(params, fmt.Sprintf("?%d", 6+i))
	}
	first, last := 6+len(ttdColumns), 7+len(ttdColumns)
	return fmt.Sprintf(`INSERT INTO outcome_buckets (endpoint_id, policy_name, policy_generation, hour, outcome, attempt,
		namespace, count, %s, first_at, last_at)
	SELECT e.id, COALESCE(json_extract(e.policy, '$.name'), ''), COALESCE(json_extract(e.policy, '$.generation'), 0),
		?2, ?3, ?4, e.namespace, ?5, %s, ?%d, ?%d
	FROM endpoints e WHERE e.id = ?1
	ON CONFLICT (endpoint_id, policy_name, policy_generation, hour, outcome, attempt) DO UPDATE SET
		count = count + excluded.count, %s,
		first_at = MIN(first_at, excluded.first_at), last_at = MAX(last_at, excluded.last_at)`,
		strings.Join(ttdColumns, ", "), strings.Join(params, ", "), first, last, strings.Join(sets, ", "))
}

const outcomeListSQL = `SELECT endpoint_id, namespace, policy_name, policy_generation, hour, outcome, attempt, count, %s, first_at, last_at
	FROM outcome_buckets
	WHERE (?1 = '' OR namespace = ?1) AND (?2 = '' OR endpoint_id = ?2) AND (?3 = '' OR policy_name = ?3) AND hour >= ?4
	ORDER BY endpoint_id, hour, outcome, attempt, policy_name, policy_generation`

func (s *Store) prepareOutcomes(ctx context.Context) error {
	var err error
	if s.oc.upsert, err = s.w.PrepareContext(ctx, outcomeUpsertSQL()); err != nil {
		return fmt.Errorf("prepare outcome upsert: %w", err)
	}
	if s.oc.list, err = s.r.PrepareContext(ctx, fmt.Sprintf(outcomeListSQL, strings.Join(ttdColumns, ", "))); err != nil {
		return fmt.Errorf("prepare outcome list: %w", err)
	}
	return nil
}

// applyOutcomes writes a transaction's outcome rows, one upsert each, in
// the global key order.
func (s *Store) applyOutcomes(t *wtx, o ledger.OutcomeDeltas) error {
	if len(o) == 0 {
		return nil
	}
	stmt := t.stmt(s.oc.upsert)
	args := make([]any, 0, 7+len(ttdColumns))
	for _, k := range o.Keys() {
		c := o[k]
		args = append(args[:0], k.EndpointID, nanos(k.Hour), k.Outcome, int64(k.Attempt), c.Count)
		for _, n := range c.TimeToDelivery {
			args = append(args, n)
		}
		args = append(args, nanos(c.FirstAt), nanos(c.LastAt))
		if _, err := stmt.ExecContext(t.ctx, args...); err != nil {
			return translate("count outcomes of "+k.EndpointID, err)
		}
	}
	return nil
}

// OutcomeList implements ledger.Evidence.
func (s *Store) OutcomeList(ctx context.Context, p *ledger.OutcomeListParams) ([]ledger.OutcomeBucket, error) {
	const op = "list outcomes"
	rows, err := s.oc.list.QueryContext(ctx, p.Namespace, p.EndpointID, p.PolicyName, nanos(p.Since.UTC().Truncate(ledger.OutcomeBucketWidth)))
	if err != nil {
		return nil, translate(op, err)
	}
	defer func() { _ = rows.Close() }()
	var out []ledger.OutcomeBucket
	for rows.Next() {
		var (
			b                   ledger.OutcomeBucket
			hour, first, last   int64
			attempt, generation int64
		)
		dest := []any{&b.EndpointID, &b.Namespace, &b.PolicyName, &generation, &hour, &b.Outcome, &attempt, &b.Count}
		for i := range b.TimeToDelivery {
			dest = append(dest, &b.TimeToDelivery[i])
		}
		dest = append(dest, &first, &last)
		if err := rows.Scan(dest...); err != nil {
			return nil, translate(op, err)
		}
		b.PolicyGeneration, b.Attempt = generation, int(attempt)
		b.Hour, b.FirstAt, b.LastAt = fromNanos(hour), fromNanos(first), fromNanos(last)
		out = append(out, b)
	}
	return out, translate(op, rows.Err())
}

// OutcomePrune implements ledger.Evidence.
func (s *Store) OutcomePrune(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.write(ctx, "prune outcomes", func(t *wtx) error {
		res, err := t.tx.ExecContext(t.ctx, `DELETE FROM outcome_buckets
			WHERE (endpoint_id, policy_name, policy_generation, hour, outcome, attempt) IN (
				SELECT endpoint_id, policy_name, policy_generation, hour, outcome, attempt
				FROM outcome_buckets WHERE hour < ?1 ORDER BY hour LIMIT ?2)`,
			nanos(before), ledger.SweepLimit(limit))
		if err != nil {
			return translate("prune outcomes", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
