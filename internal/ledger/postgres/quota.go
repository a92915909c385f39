package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Namespace quotas (ledger.Quotas, migration 00019). A batch of inserts
// locks its namespaces' quota rows FOR UPDATE in namespace order, in the
// pipeline of its other reads (after the endpoints), decides in Go
// (ledger.QuotaBatch) and writes back what changed with its inserts and
// COMMIT: no round trip of its own, and the check and the count are one
// across processes, since a concurrent batch of the same namespace waits
// for the row and then reads what this one committed. A namespace
// without a quota row locks nothing.

const quotaCols = `namespace, publishes_per_second, publish_burst, events_per_day, payload_bytes_hard,
	day, events_today, refused_today, payload_bytes, rate_tat, updated_at`

const (
	quotaLockSQL = `SELECT ` + quotaCols + ` FROM namespace_quotas WHERE namespace = ANY($1)
		ORDER BY namespace FOR UPDATE`
	quotaSaveSQL = `UPDATE namespace_quotas SET day = $2, events_today = $3, refused_today = $4,
		payload_bytes = $5, rate_tat = $6 WHERE namespace = $1`
	quotaGetSQL = `SELECT ` + quotaCols + ` FROM namespace_quotas WHERE namespace = $1`
	// A new quota starts from what the ledger holds of the namespace: the
	// bytes its publishes retain, and the events of the day ($6, from $7
	// to $8 in nanoseconds). A replaced one keeps its usage.
	quotaSetSQL = `INSERT INTO namespace_quotas (namespace, publishes_per_second, publish_burst, events_per_day,
			payload_bytes_hard, day, events_today, payload_bytes, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6,
			(SELECT count(*) FROM events WHERE namespace = $1 AND created_at >= $7 AND created_at < $8
				AND type <> '` + ledger.DeadLetterEventType + `'),
			(SELECT coalesce(sum(quota_bytes), 0) FROM events WHERE namespace = $1 AND quota_bytes > 0),
			$9)
		ON CONFLICT (namespace) DO UPDATE SET
			publishes_per_second = excluded.publishes_per_second, publish_burst = excluded.publish_burst,
			events_per_day = excluded.events_per_day, payload_bytes_hard = excluded.payload_bytes_hard,
			updated_at = excluded.updated_at
		RETURNING ` + quotaCols
	quotaDeleteSQL = `DELETE FROM namespace_quotas WHERE namespace = $1`
)

// pruneQuotaCTE gives back to their namespaces' quotas the payload bytes
// of the events a prune stage drops (keep), as one CTE of its statement.
const pruneQuotaCTE = `quota AS (
			UPDATE namespace_quotas q SET payload_bytes = greatest(0, q.payload_bytes - x.b)
			FROM (SELECT e.namespace, sum(e.quota_bytes) AS b FROM events e JOIN keep ON keep.id = e.id
				WHERE e.quota_bytes > 0 GROUP BY e.namespace) x
			WHERE q.namespace = x.namespace
		), `

// scanQuota reads quotaCols.
func scanQuota(row pgx.Row) (ledger.NamespaceQuota, error) {
	var q ledger.NamespaceQuota
	var updated int64
	err := row.Scan(&q.Namespace, &q.Hard.PublishesPerSecond, &q.Hard.PublishBurst, &q.Hard.EventsPerDay,
		&q.Hard.PayloadBytesRetained, &q.Used.Day, &q.Used.EventsToday, &q.Used.RefusedToday,
		&q.Used.PayloadBytesRetained, &q.Used.RateTAT, &updated)
	q.UpdatedAt = fromNanos(updated)
	return q, err
}

// queueQuotaLocks queues on b the lock and read of the quotas of
// namespaces; pre.quotas is set when b's results are read (nil when none
// of them has a quota).
func queueQuotaLocks(b *pgx.Batch, namespaces []string, pre *preloaded) {
	b.Queue(quotaLockSQL, namespaces).Query(func(rows pgx.Rows) error {
		quotas, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.NamespaceQuota, error) {
			return scanQuota(row)
		})
		if err != nil {
			return fmt.Errorf("lock quotas: %w", err)
		}
		if len(quotas) > 0 {
			pre.quotas = ledger.NewQuotaBatch(quotas)
		}
		return nil
	})
}

// queueQuotaSaves queues for tx's next pipeline the usage the batch
// changed.
func queueQuotaSaves(tx *txn, qb *ledger.QuotaBatch) {
	changed := qb.Changed()
	if len(changed) == 0 {
		return
	}
	b := &pgx.Batch{}
	for _, q := range changed {
		u := q.Used
		b.Queue(quotaSaveSQL, q.Namespace, u.Day, u.EventsToday, u.RefusedToday, u.PayloadBytesRetained, u.RateTAT)
	}
	tx.queue("count quotas", b)
}

// QuotaSet implements ledger.Quotas.
func (s *Store) QuotaSet(ctx context.Context, p *ledger.QuotaSetParams) (ledger.NamespaceQuota, error) {
	if err := p.Validate(); err != nil {
		return ledger.NamespaceQuota{}, err
	}
	day := ledger.QuotaDay(p.Now)
	from := time.Unix(day*24*60*60, 0)
	h := p.Hard
	q, err := scanQuota(s.pool.QueryRow(ctx, quotaSetSQL, p.Namespace, h.PublishesPerSecond, h.PublishBurst,
		h.EventsPerDay, h.PayloadBytesRetained, day, nanos(from), nanos(from.Add(24*time.Hour)), nanos(p.Now)))
	if err != nil {
		return ledger.NamespaceQuota{}, translate("set the quota of namespace "+p.Namespace, err)
	}
	return q.At(p.Now), nil
}

// QuotaDelete implements ledger.Quotas.
func (s *Store) QuotaDelete(ctx context.Context, namespace string) error {
	op := "delete the quota of namespace " + namespace
	tag, err := s.pool.Exec(ctx, quotaDeleteSQL, namespace)
	if err != nil {
		return translate(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", op, ledger.ErrNotFound)
	}
	return nil
}

// QuotaGet implements ledger.Quotas.
func (s *Store) QuotaGet(ctx context.Context, namespace string, now time.Time) (ledger.NamespaceQuota, error) {
	q, err := scanQuota(s.pool.QueryRow(ctx, quotaGetSQL, namespace))
	if err != nil {
		return ledger.NamespaceQuota{}, translate("get the quota of namespace "+namespace, err)
	}
	return q.At(now), nil
}
