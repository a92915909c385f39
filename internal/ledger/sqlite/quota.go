package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Namespace quotas (ledger.Quotas, migration 0019). The single writer
// makes a batch's check and count atomic: the batch reads its namespaces'
// quotas in its write transaction, decides (ledger.QuotaBatch) and writes
// back what changed before it commits.

const quotaCols = `namespace, publishes_per_second, publish_burst, events_per_day, payload_bytes_hard,
	day, events_today, refused_today, payload_bytes, rate_tat, updated_at`

var quotaSQL = struct {
	get, save, set, del string
}{
	get: `SELECT ` + quotaCols + ` FROM namespace_quotas WHERE namespace = ?1`,
	save: `UPDATE namespace_quotas SET day = ?2, events_today = ?3, refused_today = ?4, payload_bytes = ?5,
		rate_tat = ?6 WHERE namespace = ?1`,
	// A new quota starts from what the ledger holds of the namespace: the
	// bytes its publishes retain, and the events of the day (?6, from ?7
	// to ?8 in nanoseconds). A replaced one keeps its usage.
	set: `INSERT INTO namespace_quotas (namespace, publishes_per_second, publish_burst, events_per_day,
			payload_bytes_hard, day, events_today, payload_bytes, updated_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6,
			(SELECT count(*) FROM events WHERE namespace = ?1 AND created_at >= ?7 AND created_at < ?8
				AND type <> '` + ledger.DeadLetterEventType + `'),
			(SELECT coalesce(sum(quota_bytes), 0) FROM events WHERE namespace = ?1 AND quota_bytes > 0),
			?9)
		ON CONFLICT (namespace) DO UPDATE SET
			publishes_per_second = excluded.publishes_per_second, publish_burst = excluded.publish_burst,
			events_per_day = excluded.events_per_day, payload_bytes_hard = excluded.payload_bytes_hard,
			updated_at = excluded.updated_at
		RETURNING ` + quotaCols,
	del: `DELETE FROM namespace_quotas WHERE namespace = ?1`,
}

// pruneQuotaSQL gives back to their namespaces' quotas the payload bytes
// of the events of ?1 (a JSON array of IDs) that a prune stage is about to
// drop; it runs first in the stage's transaction.
const pruneQuotaSQL = `UPDATE namespace_quotas SET payload_bytes = max(0, payload_bytes - x.b)
	FROM (SELECT namespace, sum(quota_bytes) AS b FROM events
		WHERE id IN (SELECT value FROM json_each(?1)) AND quota_bytes > 0 GROUP BY namespace) AS x
	WHERE namespace_quotas.namespace = x.namespace`

type quotaStmts struct {
	get, save *sql.Stmt // writer
	read      *sql.Stmt // read pool
}

func (s *Store) prepareQuotas(ctx context.Context) error {
	for _, p := range []struct {
		db   *sql.DB
		dst  **sql.Stmt
		text string
	}{
		{s.w, &s.qs.get, quotaSQL.get},
		{s.w, &s.qs.save, quotaSQL.save},
		{s.r, &s.qs.read, quotaSQL.get},
	} {
		st, err := p.db.PrepareContext(ctx, p.text)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", firstLine(p.text), err)
		}
		*p.dst = st
	}
	return nil
}

// scanQuota reads quotaCols.
func scanQuota(row interface{ Scan(...any) error }) (ledger.NamespaceQuota, error) {
	var q ledger.NamespaceQuota
	var updated int64
	err := row.Scan(&q.Namespace, &q.Hard.PublishesPerSecond, &q.Hard.PublishBurst, &q.Hard.EventsPerDay,
		&q.Hard.PayloadBytesRetained, &q.Used.Day, &q.Used.EventsToday, &q.Used.RefusedToday,
		&q.Used.PayloadBytesRetained, &q.Used.RateTAT, &updated)
	q.UpdatedAt = fromNanos(updated)
	return q, err
}

// quotaBatch reads the quotas of the batch's namespaces in t.
func (s *Store) quotaBatch(t *wtx, params []*ledger.EventInsertParams) (*ledger.QuotaBatch, error) {
	var quotas []ledger.NamespaceQuota
	for _, ns := range ledger.Namespaces(params) {
		q, err := scanQuota(t.stmt(s.qs.get).QueryRowContext(t.ctx, ns))
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, translate("read the quota of namespace "+ns, err)
		}
		quotas = append(quotas, q)
	}
	if len(quotas) == 0 {
		return nil, nil
	}
	return ledger.NewQuotaBatch(quotas), nil
}

// saveQuotas writes back the usage the batch changed.
func (s *Store) saveQuotas(t *wtx, b *ledger.QuotaBatch) error {
	for _, q := range b.Changed() {
		u := q.Used
		if _, err := t.stmt(s.qs.save).ExecContext(t.ctx, q.Namespace, u.Day, u.EventsToday, u.RefusedToday,
			u.PayloadBytesRetained, u.RateTAT); err != nil {
			return translate("count the quota of namespace "+q.Namespace, err)
		}
	}
	return nil
}

// QuotaSet implements ledger.Quotas.
func (s *Store) QuotaSet(ctx context.Context, p *ledger.QuotaSetParams) (ledger.NamespaceQuota, error) {
	if err := p.Validate(); err != nil {
		return ledger.NamespaceQuota{}, err
	}
	op := "set the quota of namespace " + p.Namespace
	day := ledger.QuotaDay(p.Now)
	from := time.Unix(day*24*60*60, 0)
	h := p.Hard
	var q ledger.NamespaceQuota
	err := s.write(ctx, op, func(t *wtx) error {
		var err error
		q, err = scanQuota(t.tx.QueryRowContext(t.ctx, quotaSQL.set, p.Namespace, h.PublishesPerSecond, h.PublishBurst,
			h.EventsPerDay, h.PayloadBytesRetained, day, nanos(from), nanos(from.Add(24*time.Hour)), nanos(p.Now)))
		return translate(op, err)
	})
	if err != nil {
		return ledger.NamespaceQuota{}, err
	}
	return q.At(p.Now), nil
}

// QuotaDelete implements ledger.Quotas.
func (s *Store) QuotaDelete(ctx context.Context, namespace string) error {
	op := "delete the quota of namespace " + namespace
	return s.write(ctx, op, func(t *wtx) error {
		res, err := t.tx.ExecContext(t.ctx, quotaSQL.del, namespace)
		if err != nil {
			return translate(op, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return translate(op, err)
		}
		if n == 0 {
			return fmt.Errorf("%s: %w", op, ledger.ErrNotFound)
		}
		return nil
	})
}

// QuotaGet implements ledger.Quotas.
func (s *Store) QuotaGet(ctx context.Context, namespace string, now time.Time) (ledger.NamespaceQuota, error) {
	q, err := scanQuota(s.qs.read.QueryRowContext(ctx, namespace))
	if err != nil {
		return ledger.NamespaceQuota{}, translate("get the quota of namespace "+namespace, err)
	}
	return q.At(now), nil
}
