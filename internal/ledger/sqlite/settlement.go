package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// This file implements ledger.Settlement: acknowledgements, the scrubbing
// of one-time secrets, compaction and retention (the rules are in
// ledger/settlementrules.go). The single writer makes every method atomic;
// secure_delete (set at Open) zeroes what a scrub or a prune removes from
// the pages, and Compact checkpoints the WAL so that no older copy of those
// pages is left in it.

var _ ledger.Settlement = (*Store)(nil)

// pendingOf is true when the event e.id has a delivery still pending.
const pendingOf = `EXISTS (SELECT 1 FROM deliveries p WHERE p.event_id = %s
	AND (p.state = 'scheduled' OR p.state = 'in_flight' OR p.state = 'awaiting_ack'))`

func pending(eventID string) string { return fmt.Sprintf(pendingOf, eventID) }

var settleSQL = struct {
	settle, liveEvents, undelivered, ackApply, scrubDue, scrubApply, scrubDisarm, ackExpired string
}{
	// The secrets of the events a transaction settled (?1: a JSON object
	// event ID → the instant its last pending delivery ended), in one
	// statement per transaction: only events that still hold secrets and
	// have no pending delivery are touched. A grace period of 0 scrubs
	// them now; a longer one sets when SecretsScrubDue will.
	settle: `WITH cand (id, now, grace) AS (
			SELECT e.id, j.value, max(coalesce(json_extract(ep.policy, '$.secretGracePeriod'), 0))
			FROM json_each(?1) j
			JOIN events e ON e.id = j.key
			JOIN deliveries d ON d.event_id = e.id
			JOIN endpoints ep ON ep.id = d.endpoint_id
			WHERE e.secrets IS NOT NULL AND NOT ` + pending("e.id") + `
			GROUP BY e.id
		)
		UPDATE events SET
			secrets = CASE WHEN cand.grace > 0 THEN events.secrets END,
			secrets_scrubbed_at = CASE WHEN cand.grace > 0 THEN NULL ELSE cand.now END,
			secrets_scrub_due = CASE WHEN cand.grace > 0 THEN cand.now + cand.grace END
		FROM cand WHERE events.id = cand.id`,
	// The deliveries an endpoint's deletion cancels, with their events.
	liveEvents: `SELECT event_id, state FROM deliveries WHERE endpoint_id = ?1 AND ` + livePredicate,
	// An event that reached no endpoint keeps no secret and ages under the
	// default retention.
	undelivered: `UPDATE events SET undelivered = 1, secrets = NULL,
			secrets_scrubbed_at = CASE WHEN secrets IS NOT NULL THEN ?2 ELSE secrets_scrubbed_at END
		WHERE id = ?1`,
	// An acknowledgement or its timeout (?8: the timeout's Now, NULL for an
	// acknowledgement). NULL arguments leave their column as it is.
	ackApply: `UPDATE deliveries SET state = ?2, due_at = coalesce(?3, due_at), ack_deadline = NULL,
			last_error = coalesce(?4, last_error), exhaust_reason = coalesce(?5, exhaust_reason),
			resolution = coalesce(?6, resolution), terminal_at = coalesce(?7, terminal_at)
		WHERE id = ?1 AND state = 'awaiting_ack' AND (?8 IS NULL OR ack_deadline <= ?8)
		RETURNING ` + deliveryCols,
	scrubDue: `SELECT id FROM events
		WHERE secrets_scrub_due <= ?1 AND secrets_scrub_due IS NOT NULL AND secrets_scrubbed_at IS NULL
		ORDER BY secrets_scrub_due LIMIT ?2`,
	scrubApply: `UPDATE events SET secrets = NULL, secrets_scrubbed_at = ?2
		WHERE id IN (SELECT value FROM json_each(?1)) AND secrets_scrubbed_at IS NULL AND NOT ` + pending("events.id"),
	// A due event that has a pending delivery again is disarmed: the
	// transition that ends that delivery arms it again.
	scrubDisarm: `UPDATE events SET secrets_scrub_due = NULL
		WHERE id IN (SELECT value FROM json_each(?1)) AND secrets_scrubbed_at IS NULL`,
	ackExpired: `SELECT ` + deliveryCols + ` FROM deliveries
		WHERE state = 'awaiting_ack' AND ack_deadline <= ?1 ORDER BY ack_deadline, id LIMIT ?2`,
}

// settleStmts are the prepared statements of this file.
type settleStmts struct {
	settle, liveEvents, undelivered, ackApply, scrubDue, scrubApply, scrubDisarm *sql.Stmt
	ackExpired                                                                   *sql.Stmt // read pool
}

func (s *Store) prepareSettlement(ctx context.Context) error {
	q := settleSQL
	for _, p := range []struct {
		db   *sql.DB
		dst  **sql.Stmt
		text string
	}{
		{s.w, &s.st.settle, q.settle},
		{s.w, &s.st.liveEvents, q.liveEvents},
		{s.w, &s.st.undelivered, q.undelivered},
		{s.w, &s.st.ackApply, q.ackApply},
		{s.w, &s.st.scrubDue, q.scrubDue},
		{s.w, &s.st.scrubApply, q.scrubApply},
		{s.w, &s.st.scrubDisarm, q.scrubDisarm},
		{s.r, &s.st.ackExpired, q.ackExpired},
	} {
		st, err := p.db.PrepareContext(ctx, p.text)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", firstLine(p.text), err)
		}
		*p.dst = st
	}
	return nil
}

// settle applies ledger.SettleSecrets to the settled events, in one
// statement whatever their number.
func (s *Store) settle(t *wtx, st ledger.SettledEvents) error {
	if len(st) == 0 {
		return nil
	}
	ended := make(map[string]int64, len(st))
	for id, at := range st {
		ended[id] = nanos(at)
	}
	b, err := json.Marshal(ended)
	if err != nil {
		return fmt.Errorf("scrub secrets: %w", err)
	}
	_, err = t.stmt(s.st.settle).ExecContext(t.ctx, string(b))
	return translate("scrub secrets of settled events", err)
}

// liveEvents returns the events of endpoint's pending deliveries, settled
// at now once they are cancelled, and counts those deliveries' move to
// cancelled in ds.
func (s *Store) liveEvents(t *wtx, endpoint string, now time.Time, ds ledger.StatsDelta) (ledger.SettledEvents, error) {
	op := "events of the live deliveries of " + endpoint
	rows, err := t.stmt(s.st.liveEvents).QueryContext(t.ctx, endpoint)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	st := ledger.SettledEvents{}
	for rows.Next() {
		var id, state string
		if err := rows.Scan(&id, &state); err != nil {
			return nil, translate(op, err)
		}
		st[id] = now
		ds.Move(endpoint, ledger.DeliveryState(state), ledger.ResolutionNone, ledger.StateCancelled, ledger.ResolutionNone)
	}
	return st, translate(op, rows.Err())
}

// markUndelivered records that ev reached no endpoint: it keeps no secret
// (there is no delivery left to send it) and ages under the default
// retention.
func (s *Store) markUndelivered(t *wtx, ev *ledger.Event, now time.Time) error {
	if _, err := t.stmt(s.st.undelivered).ExecContext(t.ctx, ev.ID, nanos(now)); err != nil {
		return translate("insert event "+ev.ID+": no endpoint", err)
	}
	ev.DropUndeliveredSecrets()
	return nil
}

// AckRecord implements ledger.Settlement.
func (s *Store) AckRecord(ctx context.Context, p *ledger.AckRecordParams) (ledger.AckResult, error) {
	return ledger.AckRecord(ctx, driver{s}, p)
}

// AckTimeoutRecord implements ledger.Settlement.
func (s *Store) AckTimeoutRecord(ctx context.Context, p *ledger.AckTimeoutParams) (ledger.AckResult, error) {
	return ledger.AckTimeoutRecord(ctx, driver{s}, p)
}

// AckApply implements ledger.AckStatements: one write transaction, whose
// update applies only to a delivery still awaiting_ack (and, for a
// timeout, past its deadline).
func (dr driver) AckApply(ctx context.Context, p ledger.AckApplyParams) (ledger.AckResult, error) {
	s, op, id, tr, now := dr.Store, p.Op, p.DeliveryID, p.Transition, p.Now
	var (
		res                    ledger.AckResult
		dueAt, reason, resol   any
		lastError, terminalAtN any
		deadline               any
	)
	if p.Timeout {
		deadline = nanos(now)
	}
	if tr.State == ledger.StateScheduled {
		dueAt = nanos(tr.DueAt)
	}
	if tr.LastError != nil {
		lastError = *tr.LastError
	}
	if tr.State == ledger.StateExhausted {
		reason, resol = string(tr.Reason), string(tr.Resolution)
	}
	if tr.TerminalAt != nil {
		terminalAtN = nanos(*tr.TerminalAt)
	}
	err := s.write(ctx, op, func(t *wtx) error {
		d, err := scanDelivery(t.stmt(s.st.ackApply).QueryRowContext(t.ctx, id, string(tr.State), dueAt,
			lastError, reason, resol, terminalAtN, deadline))
		if errors.Is(err, sql.ErrNoRows) {
			var one int
			if err := t.stmt(s.ws.deliveryExists).QueryRowContext(t.ctx, id).Scan(&one); err != nil {
				return translate(op, err) // ErrNotFound when it does not exist
			}
			return fmt.Errorf("%s: %w", op, ledger.ErrNotAwaitingAck)
		}
		if err != nil {
			return translate(op, err)
		}
		res.Delivery = d
		ds := ledger.StatsDelta{}
		tr.Stats(ds, d.EndpointID, now)
		if d.State == ledger.StateExhausted {
			if res.DeadLetter, err = s.deadLetter(t, d, now, ds); err != nil {
				return err
			}
		}
		st := ledger.SettledEvents{}
		st.Note(d, now)
		if err := s.settle(t, st); err != nil {
			return err
		}
		if err := s.applyOutcomes(t, ledger.OutcomeDeltas{}.With(d, now)); err != nil {
			return err
		}
		return applyStats(t, s.ws.statsApply, ds)
	})
	if err != nil {
		return ledger.AckResult{}, err
	}
	return res, nil
}

// AckExpiredList implements ledger.Settlement.
func (s *Store) AckExpiredList(ctx context.Context, now time.Time, limit int) ([]ledger.Delivery, error) {
	rows, err := s.st.ackExpired.QueryContext(ctx, nanos(now), ledger.SweepLimit(limit))
	if err != nil {
		return nil, translate("list expired acknowledgements", err)
	}
	out, err := collectDeliveries(rows)
	return out, translate("list expired acknowledgements", err)
}

// SecretsScrubDue implements ledger.Settlement.
func (s *Store) SecretsScrubDue(ctx context.Context, now time.Time, limit int) (int, error) {
	const op = "scrub secrets due"
	var n int64
	err := s.write(ctx, op, func(t *wtx) error {
		rows, err := t.stmt(s.st.scrubDue).QueryContext(t.ctx, nanos(now), ledger.SweepLimit(limit))
		if err != nil {
			return translate(op, err)
		}
		ids, err := collectIDs(rows)
		if err != nil || len(ids) == 0 {
			return translate(op, err)
		}
		idsJSON, err := json.Marshal(ids)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		r, err := t.stmt(s.st.scrubApply).ExecContext(t.ctx, string(idsJSON), nanos(now))
		if err != nil {
			return translate(op, err)
		}
		if n, err = r.RowsAffected(); err != nil {
			return translate(op, err)
		}
		_, err = t.stmt(s.st.scrubDisarm).ExecContext(t.ctx, string(idsJSON))
		return translate(op, err)
	})
	return int(n), err
}

// Compact implements ledger.Settlement: it copies the WAL into the
// database file and truncates it, so that the only copy of every page is
// the current one, in which secure_delete zeroed what was removed. It
// waits (busy timeout) for readers on older snapshots, and fails when they
// still hold the WAL, so that the caller tries again.
func (s *Store) Compact(ctx context.Context) error {
	var busy, logFrames, checkpointed int
	err := s.w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &checkpointed)
	if err != nil {
		return translate("compact ledger: checkpoint", err)
	}
	if busy != 0 {
		return fmt.Errorf("compact ledger: checkpoint blocked by readers (%d of %d WAL frames copied)", checkpointed, logFrames)
	}
	return nil
}

// Retention. Prune looks for candidates on the read pool, walking the
// deliveries that ended (deliveries_settled) and the events that reached
// no endpoint (events_undelivered*) in the order they aged, so that the
// writer is not held while it passes over events that must stay (longer
// retention, pending or unresolved deliveries); the write transaction then
// checks the candidates again and prunes them.

// retentionCTE computes each endpoint's retention of the given policy
// field (?3: the default for a policy that sets none).
func retentionCTE(field string) string {
	return `ret (id, r) AS MATERIALIZED (
		SELECT id, CASE WHEN coalesce(json_extract(policy, '$.` + field + `'), 0) > 0
			THEN json_extract(policy, '$.` + field + `') ELSE ?3 END FROM endpoints)`
}

// expiredOf is true when the event (with deliveries) has no pending
// delivery and ended longer ago than its retention (?1: now). With
// keepUnresolved, an event with unresolved work is kept.
func expiredOf(eventID string, keepUnresolved bool) string {
	cond := `NOT ` + pending(eventID) + `
		AND (SELECT max(r.r) > 0 AND max(x.terminal_at) <= ?1 - max(r.r)
			FROM deliveries x JOIN ret r ON r.id = x.endpoint_id WHERE x.event_id = ` + eventID + `)`
	if keepUnresolved {
		cond += ` AND NOT EXISTS (SELECT 1 FROM deliveries u WHERE u.event_id = ` + eventID + ` AND u.resolution = 'unresolved')`
	}
	return cond
}

// pruneStage is a ledger.PruneStage with its SQL: the candidate and
// recheck statements do what ledger.PruneStage.Prunes says.
type pruneStage struct{ ledger.PruneStage }

// candidatesSQL finds up to ?2 candidates of the stage at ?1 (now), with
// ?3 the default retention.
func (g pruneStage) candidatesSQL() string {
	if g.Undelivered {
		index := `INDEXED BY events_undelivered_payload WHERE undelivered = 1 AND payload_pruned_at IS NULL`
		if g.Evidence {
			index = `INDEXED BY events_undelivered WHERE undelivered = 1`
		}
		return `SELECT id FROM events ` + index + ` AND ?3 > 0 AND created_at <= ?1 - ?3
			AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.event_id = events.id)
			ORDER BY created_at LIMIT ?2`
	}
	payloadPruned := 0
	if g.PayloadPruned {
		payloadPruned = 1
	}
	return `WITH ` + retentionCTE(g.PolicyField()) + `
		SELECT d.event_id FROM deliveries d
		WHERE d.payload_pruned = ` + fmt.Sprint(payloadPruned) + ` AND d.terminal_at IS NOT NULL
			AND d.terminal_at <= ?1 - (SELECT min(r) FROM ret)
			AND ` + expiredOf("d.event_id", g.Evidence) + `
		ORDER BY d.terminal_at LIMIT ?2`
}

// recheckSQL keeps the candidates (?4, a JSON array of event IDs) that
// still qualify, in the write transaction.
func (g pruneStage) recheckSQL() string {
	notPruned := ``
	if !g.Evidence {
		notPruned = ` AND e.payload_pruned_at IS NULL`
	}
	if g.Undelivered {
		return `SELECT e.id FROM json_each(?4) j JOIN events e ON e.id = j.value
			WHERE e.undelivered = 1` + notPruned + ` AND ?3 > 0 AND e.created_at <= ?1 - ?3
			AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.event_id = e.id)`
	}
	return `WITH ` + retentionCTE(g.PolicyField()) + `
		SELECT e.id FROM json_each(?4) j JOIN events e ON e.id = j.value
		WHERE ` + expiredOf("e.id", g.Evidence) + notPruned
}

// The statements that prune the events of ?1 (a JSON array of IDs) at ?2.
var (
	prunePayloadSQL = []string{
		pruneQuotaSQL,
		`UPDATE events SET data = NULL, payload_pruned_at = ?2, secrets = NULL, quota_bytes = 0,
			secrets_scrubbed_at = CASE WHEN secrets IS NOT NULL THEN ?2 ELSE secrets_scrubbed_at END
		WHERE id IN (SELECT value FROM json_each(?1))`,
		`UPDATE attempts SET response_excerpt = NULL
		WHERE response_excerpt IS NOT NULL
			AND delivery_id IN (SELECT id FROM deliveries WHERE event_id IN (SELECT value FROM json_each(?1)))`,
		`UPDATE deliveries SET payload_pruned = 1 WHERE event_id IN (SELECT value FROM json_each(?1))`,
	}
	pruneEvidenceSQL = []string{
		pruneQuotaSQL,
		`DELETE FROM attempts
		WHERE delivery_id IN (SELECT id FROM deliveries WHERE event_id IN (SELECT value FROM json_each(?1)))`,
		`DELETE FROM deliveries WHERE event_id IN (SELECT value FROM json_each(?1))`,
		`DELETE FROM events WHERE id IN (SELECT value FROM json_each(?1))`,
	}
)

// Prune implements ledger.Settlement (ledger.Prune walks the stages).
func (s *Store) Prune(ctx context.Context, p *ledger.PruneParams) (ledger.PruneResult, error) {
	return ledger.Prune(ctx, driver{s}, p)
}

// PruneCandidates implements ledger.PruneStatements on the read pool.
func (d driver) PruneCandidates(ctx context.Context, g ledger.PruneStage, p *ledger.PruneParams, limit int) ([]string, error) {
	rows, err := d.r.QueryContext(ctx, pruneStage{g}.candidatesSQL(), nanos(p.Now), limit, int64(g.Default(p)))
	if err != nil {
		return nil, translate(g.Op(), err)
	}
	ids, err := collectIDs(rows)
	return ids, translate(g.Op(), err)
}

// collectIDs reads rows of one ID and closes them.
func collectIDs(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// PruneApply implements ledger.PruneStatements: the write transaction
// checks the candidates again and runs the stage's statements on those
// that still qualify.
func (d driver) PruneApply(ctx context.Context, g ledger.PruneStage, p *ledger.PruneParams, ids []string) (int, error) {
	op, stmts := g.Op(), prunePayloadSQL
	if g.Evidence {
		stmts = pruneEvidenceSQL
	}
	now := nanos(p.Now)
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	var n int
	err = d.write(ctx, op, func(t *wtx) error {
		rows, err := t.tx.QueryContext(t.ctx, pruneStage{g}.recheckSQL(), now, len(ids), int64(g.Default(p)), string(idsJSON))
		if err != nil {
			return translate(op, err)
		}
		keep, err := collectIDs(rows)
		if err != nil || len(keep) == 0 {
			return translate(op, err)
		}
		keepJSON, err := json.Marshal(keep)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		for _, q := range stmts {
			args := []any{string(keepJSON)}
			if strings.Contains(q, "?2") {
				args = append(args, now)
			}
			if _, err := t.tx.ExecContext(t.ctx, q, args...); err != nil {
				return translate(op+": "+firstLine(strings.TrimSpace(q)), err)
			}
		}
		n = len(keep)
		return nil
	})
	return n, err
}

var _ ledger.PruneStatements = driver{}
