package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// This file implements ledger.Settlement: acknowledgements, the scrubbing
// of one-time secrets, compaction and retention (the rules are in
// ledger/settlementrules.go).
//
// Locks follow the store's global order: endpoints (FOR KEY SHARE), then
// deliveries, then events, then retry budgets and endpoint_stats. The
// secret check locks the events it may scrub (FOR UPDATE) after the
// deliveries whose transition settles them, so that two transactions that
// end the last two pending deliveries of one event in parallel cannot both
// see the other's delivery still pending: the second waits for the first
// and then sees its commit. Events that carry no secret are not locked.

var _ ledger.Settlement = (*Store)(nil)

// pendingOf is true when the event has a delivery still pending.
func pendingOf(eventID string) string {
	return `EXISTS (SELECT 1 FROM deliveries p WHERE p.event_id = ` + eventID + `
		AND p.state IN ('scheduled', 'in_flight', 'awaiting_ack'))`
}

// settleSQL applies ledger.SettleSecrets to the events $1 (ended at $2):
// those that still have secrets and no pending delivery
// lose them now when the longest grace period of their endpoints is 0, or
// get SecretsScrubDue.
var settleSQL = `
	WITH u AS (
		SELECT * FROM unnest($1::text[], $2::bigint[]) AS u(id, now)
	), cand AS (
		SELECT e.id, u.now, max(coalesce((ep.policy->>'secretGracePeriod')::bigint, 0)) AS grace
		FROM u JOIN events e ON e.id = u.id
		JOIN deliveries d ON d.event_id = e.id
		JOIN endpoints ep ON ep.id = d.endpoint_id
		WHERE EXISTS (SELECT 1 FROM event_secrets s WHERE s.event_id = e.id) AND NOT ` + pendingOf("e.id") + `
		GROUP BY e.id, u.now
	), scrubbed AS (
		DELETE FROM event_secrets s USING cand WHERE s.event_id = cand.id AND cand.grace <= 0
	)
	UPDATE events e SET
		secrets_scrub_at = CASE WHEN cand.grace <= 0 THEN cand.now ELSE e.secrets_scrub_at END,
		secrets_scrub_due = CASE WHEN cand.grace <= 0 THEN NULL ELSE cand.now + cand.grace END
	FROM cand WHERE e.id = cand.id`

// queueSettle adds to b the statements that lock the settled events holding
// secrets and scrub them: two statements in the caller's pipeline, so that
// the check costs no round trip.
func queueSettle(b *pgx.Batch, s ledger.SettledEvents) {
	if len(s) == 0 {
		return
	}
	ids := s.IDs()
	nows := make([]int64, len(ids))
	for i, id := range ids {
		nows[i] = nanos(s[id])
	}
	b.Queue(`SELECT 1 FROM events e WHERE e.id = ANY($1)
			AND EXISTS (SELECT 1 FROM event_secrets s WHERE s.event_id = e.id)
		ORDER BY e.id FOR UPDATE OF e`, ids)
	b.Queue(settleSQL, ids, nows)
}

// execSettle runs the statements of queueSettle on their own.
func execSettle(ctx context.Context, tx pgx.Tx, s ledger.SettledEvents) error {
	b := &pgx.Batch{}
	queueSettle(b, s)
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("scrub secrets of settled events: %w", err)
	}
	return nil
}

// queueUndelivered queues for tx's next pipeline the record of which of the
// inserted events reached no endpoint (they age under the default
// retention) and when their secrets were dropped. Batches in which every
// event has deliveries queue nothing.
func queueUndelivered(tx *txn, results []ledger.EventInsertResult) {
	var (
		ids     []string
		scrubAt []*int64
	)
	for i := range results {
		if r := &results[i]; r.Err == nil && !r.Duplicate && len(r.Deliveries) == 0 {
			ids = append(ids, r.Event.ID)
			scrubAt = append(scrubAt, nullNanos(r.Event.SecretsScrubAt))
		}
	}
	if len(ids) == 0 {
		return
	}
	b := &pgx.Batch{}
	b.Queue(`
		UPDATE events e SET undelivered = true, secrets_scrub_at = u.scrub_at
		FROM unnest($1::text[], $2::bigint[]) AS u(id, scrub_at) WHERE e.id = u.id`, ids, scrubAt)
	tx.queue("mark events without deliveries", b)
}

// AckRecord implements ledger.Settlement.
func (s *Store) AckRecord(ctx context.Context, p *ledger.AckRecordParams) (ledger.AckResult, error) {
	return ledger.AckRecord(ctx, driver{s}, p)
}

// AckTimeoutRecord implements ledger.Settlement.
func (s *Store) AckTimeoutRecord(ctx context.Context, p *ledger.AckTimeoutParams) (ledger.AckResult, error) {
	return ledger.AckTimeoutRecord(ctx, driver{s}, p)
}

// AckApply implements ledger.AckStatements in one transaction of two
// round trips (BEGIN rides with the locks, COMMIT with the writes),
// locking like AttemptRecordMany.
func (dr driver) AckApply(ctx context.Context, p ledger.AckApplyParams) (ledger.AckResult, error) {
	s, op, id, tr, deadline, now := dr.Store, p.Op, p.DeliveryID, p.Transition, p.Timeout, p.Now
	var res ledger.AckResult
	err := s.tx(ctx, op, func(tx *txn) error {
		tx.genericPlans()
		res = ledger.AckResult{}
		endpoints, deliveries, err := lockForRecord(ctx, tx, []*ledger.AttemptRecordParams{{DeliveryID: id}})
		if err != nil {
			return err
		}
		cur := deliveries[id]
		switch {
		case cur == nil:
			return fmt.Errorf("delivery %s: %w", id, ledger.ErrNotFound)
		case cur.d.State != ledger.StateAwaitingAck:
			return fmt.Errorf("delivery %s is %s: %w", id, cur.d.State, ledger.ErrNotAwaitingAck)
		case deadline && (cur.d.AckDeadline == nil || cur.d.AckDeadline.After(now)):
			return fmt.Errorf("delivery %s is acknowledgeable until %v: %w", id, cur.d.AckDeadline, ledger.ErrNotAwaitingAck)
		}
		d := &cur.d
		tr.Apply(d)
		delta := ledger.StatsDelta{}
		tr.Stats(delta, d.EndpointID, now)
		var deadLetters eventBatch
		if d.State == ledger.StateExhausted {
			if res.DeadLetter, err = exhaustedDeadLetter(*d, cur.eventType, endpoints, now, &deadLetters, delta); err != nil {
				return err
			}
		}
		res.Delivery = *d

		b := &pgx.Batch{}
		queueDeliveryUpdate(b, deliveries, []string{id})
		if !deadLetters.empty() {
			b.Queue(insertEventsSQL, deadLetters.args()...)
		}
		settled := ledger.SettledEvents{}
		noteSettled(settled, cur, *d, now)
		queueSettle(b, settled)
		queueStats(b, delta)
		queueOutcomes(b, ledger.OutcomeDeltas{}.With(*d, now))
		tx.queue("write acknowledgement", b) // with COMMIT
		return nil
	})
	if err != nil {
		return ledger.AckResult{}, err
	}
	return res, nil
}

// AckExpiredList implements ledger.Settlement.
func (s *Store) AckExpiredList(ctx context.Context, now time.Time, limit int) ([]ledger.Delivery, error) {
	const op = "list expired acknowledgements"
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM deliveries d
		WHERE d.state = 'awaiting_ack' AND d.ack_deadline <= $1
		ORDER BY d.ack_deadline, d.id LIMIT $2`, nanos(now), ledger.SweepLimit(limit))
	if err != nil {
		return nil, translate(op, err)
	}
	ds, err := pgx.CollectRows(rows, scanDelivery)
	return ds, translate(op, err)
}

// SecretsScrubDue implements ledger.Settlement. Events another process is
// scrubbing are skipped (SKIP LOCKED); a due event with a pending delivery
// again is disarmed (the transition that ends it arms it again).
func (s *Store) SecretsScrubDue(ctx context.Context, now time.Time, limit int) (int, error) {
	const op = "scrub secrets due"
	var n int
	err := s.tx(ctx, op, func(tx *txn) error {
		n = 0
		rows, err := tx.Query(ctx, `SELECT id FROM events
			WHERE secrets_scrub_due <= $1 AND secrets_scrub_due IS NOT NULL AND secrets_scrub_at IS NULL
			ORDER BY secrets_scrub_due, id LIMIT $2
			FOR UPDATE SKIP LOCKED`, nanos(now), ledger.SweepLimit(limit))
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(ids) == 0 {
			return err
		}
		return tx.QueryRow(ctx, `
			WITH c AS (
				SELECT unnest($1::text[]) AS id
			), settled AS (
				SELECT c.id FROM c WHERE NOT `+pendingOf("c.id")+`
			), scrubbed AS (
				DELETE FROM event_secrets s USING settled WHERE s.event_id = settled.id
			), marked AS (
				UPDATE events e SET secrets_scrub_at = $2 FROM settled WHERE e.id = settled.id RETURNING e.id
			), disarmed AS (
				UPDATE events e SET secrets_scrub_due = NULL FROM c
				WHERE e.id = c.id AND c.id NOT IN (SELECT id FROM settled)
			)
			SELECT count(*) FROM marked`, ids, nanos(now)).Scan(&n)
	})
	return n, err
}

// compactLockTimeout bounds how long Compact waits for the lock that the
// rewrite of event_secrets needs, so that it never queues the ledger's
// readers behind it for long; a busy table is compacted next time.
const compactLockTimeout = "500ms"

// Compact implements ledger.Settlement. Scrubbing deletes rows of
// event_secrets; a plain VACUUM only marks their space free, and the bytes
// stay in the page until that space is reused, so Compact rewrites the
// table (VACUUM FULL): the new file holds only live secrets and the old
// one is unlinked. event_secrets holds the secrets of the events still
// pending, so the rewrite is short. (Copies in the WAL last until its
// segments are recycled; pruned payloads in events and attempts are
// reclaimed by autovacuum.)
func (s *Store) Compact(ctx context.Context) error {
	const op = "compact ledger"
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return translate(op, err)
	}
	defer conn.Release()
	// No arguments: the simple protocol, outside any transaction block.
	if _, err := conn.Exec(ctx, `SET lock_timeout = '`+compactLockTimeout+`'`); err != nil {
		return translate(op, err)
	}
	_, err = conn.Exec(ctx, `VACUUM (FULL) event_secrets`)
	if _, rerr := conn.Exec(context.WithoutCancel(ctx), `RESET lock_timeout`); rerr != nil {
		// Do not hand a connection with a changed setting back to the pool.
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
	}
	return translate(op+": vacuum event_secrets", err)
}

// Retention. Prune looks for candidates without locks, walking the
// deliveries that ended (deliveries_settled) and the events that reached
// no endpoint (events_undelivered*) in the order they aged; its
// transaction then locks their deliveries and the events (in the global
// order), checks them again on what committed meanwhile, and prunes.

// pruneStage is a ledger.PruneStage with its SQL: the candidate and
// prune statements do what ledger.PruneStage.Prunes says.
type pruneStage struct{ ledger.PruneStage }

// retentionCTE computes each endpoint's retention ($3: the default for a
// policy that sets none).
func (g pruneStage) retentionCTE() string {
	f := `(policy->>'` + g.PolicyField() + `')::bigint`
	return `ret AS MATERIALIZED (
		SELECT id, CASE WHEN coalesce(` + f + `, 0) > 0 THEN ` + f + ` ELSE $3::bigint END AS r FROM endpoints)`
}

// expired is true when the event (with deliveries) has no pending delivery
// and ended longer ago than its retention ($1: now); evidence keeps an
// event with unresolved work.
func (g pruneStage) expired(eventID string) string {
	cond := `NOT ` + pendingOf(eventID) + `
		AND (SELECT max(r.r) > 0 AND max(x.terminal_at) <= $1::bigint - max(r.r)
			FROM deliveries x JOIN ret r ON r.id = x.endpoint_id WHERE x.event_id = ` + eventID + `)`
	if g.Evidence {
		cond += ` AND NOT EXISTS (SELECT 1 FROM deliveries u WHERE u.event_id = ` + eventID + ` AND u.resolution = 'unresolved')`
	}
	return cond
}

// undeliveredWhere selects, from events e, those without deliveries whose
// default retention ($3) ended.
func (g pruneStage) undeliveredWhere() string {
	w := `e.undelivered AND $3::bigint > 0 AND e.created_at <= $1::bigint - $3::bigint
		AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.event_id = e.id)`
	if !g.Evidence {
		w += ` AND e.payload_pruned_at IS NULL`
	}
	return w
}

// candidatesSQL finds up to $2 candidates ($1 now, $3 default retention).
func (g pruneStage) candidatesSQL() string {
	if g.Undelivered {
		return `SELECT e.id FROM events e WHERE ` + g.undeliveredWhere() + ` ORDER BY e.created_at LIMIT $2`
	}
	return `WITH ` + g.retentionCTE() + `
		SELECT d.event_id FROM deliveries d
		WHERE d.payload_pruned = ` + fmt.Sprint(g.PayloadPruned) + ` AND d.terminal_at IS NOT NULL
			AND d.terminal_at <= $1::bigint - (SELECT min(r) FROM ret)
			AND ` + g.expired("d.event_id") + `
		ORDER BY d.terminal_at LIMIT $2`
}

// pruneSQL checks the candidates ($2) again and prunes those that still
// qualify ($1 now, $3 default retention), returning how many.
func (g pruneStage) pruneSQL() string {
	keep := `SELECT e.id FROM events e WHERE e.id = ANY($2) AND `
	if g.Undelivered {
		keep += g.undeliveredWhere()
	} else {
		keep += g.expired("e.id")
		if !g.Evidence {
			keep += ` AND e.payload_pruned_at IS NULL`
		}
	}
	with := `WITH `
	if !g.Undelivered {
		with += g.retentionCTE() + `, `
	}
	if g.Evidence {
		// The foreign keys cascade to deliveries, attempts and secrets.
		return with + `keep AS (` + keep + `), ` + pruneQuotaCTE + `gone AS (
			DELETE FROM events e USING keep WHERE e.id = keep.id RETURNING e.id
		) SELECT count(*) FROM gone`
	}
	return with + `keep AS (` + keep + `), ` + pruneQuotaCTE + `sec AS (
			DELETE FROM event_secrets s USING keep WHERE s.event_id = keep.id RETURNING s.event_id
		), att AS (
			UPDATE attempts a SET response_excerpt = NULL FROM deliveries d, keep
			WHERE d.event_id = keep.id AND a.delivery_id = d.id AND a.response_excerpt IS NOT NULL
		), dlv AS (
			UPDATE deliveries d SET payload_pruned = true FROM keep WHERE d.event_id = keep.id
		), pruned AS (
			UPDATE events e SET data = NULL, payload_pruned_at = $1::bigint, quota_bytes = 0,
				secrets_scrub_at = CASE WHEN e.id IN (SELECT event_id FROM sec) THEN $1::bigint ELSE e.secrets_scrub_at END
			FROM keep WHERE e.id = keep.id RETURNING e.id
		) SELECT count(*) FROM pruned`
}

// Prune implements ledger.Settlement (ledger.Prune walks the stages).
func (s *Store) Prune(ctx context.Context, p *ledger.PruneParams) (ledger.PruneResult, error) {
	return ledger.Prune(ctx, driver{s}, p)
}

// PruneCandidates implements ledger.PruneStatements without locks.
func (d driver) PruneCandidates(ctx context.Context, g ledger.PruneStage, p *ledger.PruneParams, limit int) ([]string, error) {
	rows, err := d.pool.Query(ctx, pruneStage{g}.candidatesSQL(), nanos(p.Now), limit, int64(g.Default(p)))
	if err != nil {
		return nil, translate(g.Op(), err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, translate(g.Op(), err)
}

// PruneApply implements ledger.PruneStatements: one transaction locks the
// candidates' deliveries and events (in the global order), checks them
// again on what committed meanwhile and prunes, in one round trip.
func (d driver) PruneApply(ctx context.Context, g ledger.PruneStage, p *ledger.PruneParams, ids []string) (int, error) {
	var n int
	err := d.tx(ctx, g.Op(), func(tx *txn) error {
		n = 0
		b := &pgx.Batch{}
		b.Queue(`SELECT 1 FROM deliveries WHERE event_id = ANY($1) ORDER BY id FOR UPDATE`, ids)
		b.Queue(`SELECT 1 FROM events WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids)
		b.Queue(pruneStage{g}.pruneSQL(), nanos(p.Now), ids, int64(g.Default(p))).QueryRow(func(row pgx.Row) error { return row.Scan(&n) })
		tx.queue("prune", b) // BEGIN, the statements and COMMIT: one round trip
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

var _ ledger.PruneStatements = driver{}
