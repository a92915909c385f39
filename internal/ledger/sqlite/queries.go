package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Every SQL statement of the store. Statements are prepared once at Open:
// write statements on the single writer connection, reads on the read pool.
// Lists of variable length (claimed IDs, states) are passed as one JSON
// array and expanded with json_each, so that every statement stays
// prepared.

const endpointCols = `id, namespace, name, url, event_types, signing_secrets, policy, ack_mode, ack_timeout_ns,
	paused, dead_letter, rate_per_second, rate_burst, max_in_flight, headers, version, updated_at, owner, credentials, filter`

const eventCols = `id, namespace, type, data, secrets, secret_names, secrets_scrubbed_at, reissue_of,
	idempotency_key, body_hash, created_at, secrets_scrub_due, payload_pruned_at,
	type_generation, replay_class, valid_until, policy_override, trace_parent, trace_state`

// livePredicate is deliveries_live's predicate, word for word (migration 0011), so
// that a query naming it may use that index: the states of a pending
// delivery, as equalities (an IN list of more than two constants costs
// SQLite an ephemeral table).
const livePredicate = `(state = 'scheduled' OR state = 'in_flight' OR state = 'awaiting_ack')`

const deliveryCols = `id, event_id, endpoint_id, state, due_at, lease_owner, lease_until, attempts,
	first_attempt_at, ack_deadline, last_status, last_error, exhaust_reason, resolution, terminal_at, created_at,
	retry_of, resolved_by, resend`

// prefixed returns a column list with every column qualified by alias.
func prefixed(alias, cols string) string {
	parts := strings.Split(cols, ",")
	for i, p := range parts {
		parts[i] = alias + "." + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

var writeSQL = struct {
	endpointUpsert, statsEnsure, endpointDelete, deliveriesCancel,
	namespaceEndpoints, endpointForDeadLetter, deadLetterTarget,
	eventByKey, eventInsert, deliveryInsert, deliveriesByEvent,
	statsApply,
	pausedEndpoints, claimDue, claimExpired, claimBacklogged, claimDueOf, claimLease, claimedRows,
	claimExpiring, release, deliveryExists,
	attemptLeased, attemptInsert string
}{
	endpointUpsert: `INSERT INTO endpoints (` + endpointCols + `, deleted)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, 1, ?16, ?17, ?18, ?19, 0)
		ON CONFLICT (id) DO UPDATE SET
			namespace = excluded.namespace, name = excluded.name, url = excluded.url,
			event_types = excluded.event_types, signing_secrets = excluded.signing_secrets,
			policy = excluded.policy, ack_mode = excluded.ack_mode, ack_timeout_ns = excluded.ack_timeout_ns,
			paused = excluded.paused, dead_letter = excluded.dead_letter,
			rate_per_second = excluded.rate_per_second, rate_burst = excluded.rate_burst,
			max_in_flight = excluded.max_in_flight, headers = excluded.headers, owner = excluded.owner,
			credentials = excluded.credentials, filter = excluded.filter,
			version = endpoints.version + 1, deleted = 0, updated_at = excluded.updated_at
		RETURNING version`,
	statsEnsure:    `INSERT INTO endpoint_stats (endpoint_id, changed_at) VALUES (?1, ?2) ON CONFLICT (endpoint_id) DO NOTHING`,
	endpointDelete: `UPDATE endpoints SET deleted = 1, updated_at = ?2, breaker_open = 0 WHERE id = ?1 AND deleted = 0`,
	deliveriesCancel: `UPDATE deliveries SET state = 'cancelled', terminal_at = ?2, lease_owner = '', lease_until = NULL
		WHERE endpoint_id = ?1 AND ` + livePredicate,

	namespaceEndpoints:    `SELECT id, event_types, filter, paused OR breaker_open, version FROM endpoints WHERE namespace = ?1 AND deleted = 0 ORDER BY id`,
	endpointForDeadLetter: `SELECT ep.namespace, ep.dead_letter, ep.owner, e.type FROM endpoints ep, events e WHERE ep.id = ?1 AND e.id = ?2`,
	deadLetterTarget:      `SELECT namespace FROM endpoints WHERE id = ?1 AND deleted = 0`,

	eventByKey: `SELECT ` + eventCols + ` FROM events WHERE namespace = ?1 AND idempotency_key = ?2 AND idempotency_key <> ''`,
	eventInsert: `INSERT INTO events (id, namespace, type, data, secrets, secret_names, reissue_of, idempotency_key, body_hash, created_at,
			type_generation, replay_class, valid_until, policy_override, quota_bytes, trace_parent, trace_state)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)
		ON CONFLICT (namespace, idempotency_key) WHERE idempotency_key <> '' DO NOTHING`,
	deliveryInsert: `INSERT INTO deliveries (id, event_id, endpoint_id, state, due_at, created_at, lease_owner, lease_until, resend, valid_until)
		VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8, ?9)`,
	deliveriesByEvent: `SELECT ` + deliveryCols + ` FROM deliveries WHERE event_id = ?1 ORDER BY id`,

	statsApply: `UPDATE endpoint_stats SET
			pending = pending + ?2, in_flight = in_flight + ?3, awaiting_ack = awaiting_ack + ?4,
			delivered = delivered + ?5, exhausted_unresolved = exhausted_unresolved + ?6, cancelled = cancelled + ?7,
			last_success_at = CASE WHEN ?8 >= coalesce(last_success_at, ?8) THEN ?8 ELSE last_success_at END,
			last_failure_at = CASE WHEN ?9 >= coalesce(last_failure_at, ?9) THEN ?9 ELSE last_failure_at END,
			last_failure_reason = CASE WHEN ?9 >= coalesce(last_failure_at, ?9) THEN ?10 ELSE last_failure_reason END,
			changed_at = ?11
		WHERE endpoint_id = ?1`,

	// Claims read candidates in due order from a partial index and filter
	// blocked endpoints in Go (claim.go). ?1 now, ?2 limit.
	pausedEndpoints: `SELECT id FROM endpoints WHERE paused <> 0 OR breaker_open <> 0`,
	claimDue: `SELECT id, endpoint_id, state, due_at, attempts FROM deliveries
		WHERE state = 'scheduled' AND due_at <= ?1 ORDER BY due_at, id LIMIT ?2`,
	claimExpired: `SELECT id, endpoint_id, state, due_at, attempts FROM deliveries
		WHERE state = 'in_flight' AND lease_until <= ?1 ORDER BY due_at, id LIMIT ?2`,
	// The fallback when blocked endpoints hold the head of the queue: the
	// endpoints with due work, then each one's earliest (?1 endpoint,
	// ?2 now, ?3 limit). state = 'scheduled' implies deliveries_live's
	// predicate, so SQLite uses that partial index.
	claimBacklogged: `SELECT endpoint_id FROM endpoint_stats WHERE pending > 0`,
	claimDueOf: `SELECT id, endpoint_id, state, due_at, attempts FROM deliveries
		WHERE endpoint_id = ?1 AND state = 'scheduled' AND due_at <= ?2
		ORDER BY due_at, id LIMIT ?3`,
	claimLease: `UPDATE deliveries SET state = 'in_flight', lease_owner = ?1, lease_until = ?2
		WHERE id IN (SELECT value FROM json_each(?3))`,
	claimedRows: `SELECT ` + prefixed("d", deliveryCols) + `, ep.version, ` + prefixed("e", eventCols) + `
		FROM json_each(?1) j
		JOIN deliveries d ON d.id = j.value
		JOIN events e ON e.id = d.event_id
		JOIN endpoints ep ON ep.id = d.endpoint_id
		ORDER BY j.key`,

	// Deliveries whose event expired (?1 now, ?2 limit), of any endpoint,
	// paused or held included: the second state term is
	// deliveries_expiring's predicate word for word, so that the walk
	// stays in that index.
	claimExpiring: `SELECT id, endpoint_id, state, due_at FROM deliveries
		WHERE valid_until <= ?1 AND (state = 'scheduled' OR state = 'in_flight')
			AND (state = 'scheduled' OR lease_until <= ?1)
		ORDER BY valid_until LIMIT ?2`,

	release: `UPDATE deliveries SET state = 'scheduled', due_at = ?3, lease_owner = '', lease_until = NULL
		WHERE id = ?1 AND state = 'in_flight' AND lease_owner = ?2
		RETURNING endpoint_id`,
	deliveryExists: `SELECT 1 FROM deliveries WHERE id = ?1`,

	// The lease check: the row a recorded attempt moves, with its rowid,
	// or none when the caller does not hold the lease (or the delivery
	// does not exist); and whether its event still holds secrets, which
	// its settlement may then scrub (recordAttempt). The transition itself
	// is attemptUpdateSQL. A record that brings the lease's copy of the
	// row (AttemptRecordParams.Leased) reads it only when the copy is
	// stale.
	attemptLeased: `SELECT rowid, ` + deliveryCols + `,
			coalesce((SELECT secrets IS NOT NULL FROM events WHERE events.id = deliveries.event_id), 1)
		FROM deliveries WHERE id = ?1 AND state = 'in_flight' AND lease_owner = ?2`,
	attemptInsert: `INSERT INTO attempts (delivery_id, number, owner, started_at, duration_ns, status_code, error, response_excerpt, recorded_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)`,
}

var readSQL = struct {
	endpointGet, endpointList, eventGet, deliveryGet, deliveryExists, attemptList, statsGet string
}{
	endpointGet:    `SELECT ` + endpointCols + ` FROM endpoints WHERE id = ?1 AND deleted = 0`,
	endpointList:   `SELECT ` + endpointCols + ` FROM endpoints WHERE deleted = 0 ORDER BY id`,
	eventGet:       `SELECT ` + eventCols + ` FROM events WHERE id = ?1`,
	deliveryGet:    `SELECT ` + deliveryCols + ` FROM deliveries WHERE id = ?1`,
	deliveryExists: `SELECT 1 FROM deliveries WHERE id = ?1`,
	attemptList: `SELECT delivery_id, number, started_at, duration_ns, status_code, error, response_excerpt
		FROM attempts WHERE delivery_id = ?1 ORDER BY number`,
	// Stats outlive a deleted endpoint: its cancelled deliveries stay counted.
	statsGet: `SELECT endpoint_id, pending, in_flight, awaiting_ack, delivered, exhausted_unresolved, cancelled,
			last_success_at, last_failure_at, last_failure_reason
		FROM endpoint_stats WHERE endpoint_id = ?1`,
}

// attemptUpdateSQL writes a recorded attempt's transition: every column
// ledger.AttemptTransition.Apply sets, with the values Apply computed
// from the row before. SQLite maintains every index that names a column
// the statement sets (in its key or its partial-index predicate), so the
// two columns only the transitions that end a delivery change are set
// only when they change: exhaust_reason and resolution (?11, ?12;
// resolution has two indexes of its own), and terminal_at (?13;
// deliveries_settled).
//
// The row is ?1, a rowid, when the record read it (attemptLeased). When
// it records from the copy its lease handed out (fromCopy), ?1 is the
// delivery's ID and the statement changes the row only if it still is
// that copy, column for column (?14–?30, as deliveryCols after id and
// state), in flight: then Apply moved exactly what a read would have
// returned. The guards are not indexable (unary +), so that the row is
// found by its key, not by an index the statement moves.
func attemptUpdateSQL(resolution, terminal, fromCopy bool) string {
	var b strings.Builder
	b.WriteString(`UPDATE deliveries SET state = ?2, attempts = ?3, first_attempt_at = ?4, due_at = ?5,
		ack_deadline = ?6, last_status = ?7, last_error = ?8, lease_owner = ?9, lease_until = ?10`)
	if resolution {
		b.WriteString(`, exhaust_reason = ?11, resolution = ?12`)
	}
	if terminal {
		b.WriteString(`, terminal_at = ?13`)
	}
	if !fromCopy {
		b.WriteString(` WHERE rowid = ?1`)
		return b.String()
	}
	b.WriteString(` WHERE id = ?1 AND +state = 'in_flight' AND +event_id = ?14 AND +endpoint_id = ?15
		AND +due_at = ?16 AND +lease_owner = ?17 AND +lease_until IS ?18 AND +attempts = ?19
		AND +first_attempt_at IS ?20 AND +ack_deadline IS ?21 AND +last_status = ?22 AND +last_error = ?23
		AND +exhaust_reason = ?24 AND +resolution = ?25 AND +terminal_at IS ?26 AND +created_at = ?27
		AND +retry_of = ?28 AND +resolved_by = ?29 AND +resend = ?30`)
	return b.String()
}

// writeStmts and readStmts hold the prepared statements.
type (
	writeStmts struct {
		endpointUpsert, statsEnsure, endpointDelete, deliveriesCancel,
		namespaceEndpoints, endpointForDeadLetter, deadLetterTarget,
		eventByKey, eventInsert, deliveryInsert, deliveriesByEvent,
		statsApply,
		pausedEndpoints, claimDue, claimExpired, claimBacklogged, claimDueOf, claimLease, claimedRows,
		claimExpiring, release, deliveryExists,
		attemptLeased, attemptInsert *sql.Stmt
		// attemptUpdate is indexed by variantKey(resolution, terminal,
		// fromCopy).
		attemptUpdate [8]*sql.Stmt
	}
	readStmts struct {
		endpointGet, endpointList, eventGet, deliveryGet, deliveryExists, attemptList, statsGet *sql.Stmt
		// The claim's candidate queries, for NextDueAt.
		pausedEndpoints, claimDue, claimBacklogged, claimDueOf *sql.Stmt
		// Read every engine sweep: parsing it each time cost more than
		// running it (issue #26's idle manager).
		breakerList *sql.Stmt
	}
)

// variantKey is the index of a statement variant among those prepared for
// each combination of its optional parts (attemptUpdate):
// bit i set when part i is present.
func variantKey(on ...bool) int {
	k := 0
	for i, o := range on {
		if o {
			k |= 1 << i
		}
	}
	return k
}

// prepare prepares every statement.
func (s *Store) prepare(ctx context.Context) error {
	ws, rs := writeSQL, readSQL
	for _, p := range []struct {
		db   *sql.DB
		dst  **sql.Stmt
		text string
	}{
		{s.w, &s.ws.endpointUpsert, ws.endpointUpsert},
		{s.w, &s.ws.statsEnsure, ws.statsEnsure},
		{s.w, &s.ws.endpointDelete, ws.endpointDelete},
		{s.w, &s.ws.deliveriesCancel, ws.deliveriesCancel},
		{s.w, &s.ws.namespaceEndpoints, ws.namespaceEndpoints},
		{s.w, &s.ws.endpointForDeadLetter, ws.endpointForDeadLetter},
		{s.w, &s.ws.deadLetterTarget, ws.deadLetterTarget},
		{s.w, &s.ws.eventByKey, ws.eventByKey},
		{s.w, &s.ws.eventInsert, ws.eventInsert},
		{s.w, &s.ws.deliveryInsert, ws.deliveryInsert},
		{s.w, &s.ws.deliveriesByEvent, ws.deliveriesByEvent},
		{s.w, &s.ws.statsApply, ws.statsApply},
		{s.w, &s.ws.pausedEndpoints, ws.pausedEndpoints},
		{s.w, &s.ws.claimDue, ws.claimDue},
		{s.w, &s.ws.claimExpired, ws.claimExpired},
		{s.w, &s.ws.claimBacklogged, ws.claimBacklogged},
		{s.w, &s.ws.claimDueOf, ws.claimDueOf},
		{s.w, &s.ws.claimLease, ws.claimLease},
		{s.w, &s.ws.claimedRows, ws.claimedRows},
		{s.w, &s.ws.claimExpiring, ws.claimExpiring},
		{s.w, &s.ws.release, ws.release},
		{s.w, &s.ws.deliveryExists, ws.deliveryExists},
		{s.w, &s.ws.attemptLeased, ws.attemptLeased},
		{s.w, &s.ws.attemptInsert, ws.attemptInsert},
		{s.r, &s.rs.endpointGet, rs.endpointGet},
		{s.r, &s.rs.endpointList, rs.endpointList},
		{s.r, &s.rs.eventGet, rs.eventGet},
		{s.r, &s.rs.deliveryGet, rs.deliveryGet},
		{s.r, &s.rs.deliveryExists, rs.deliveryExists},
		{s.r, &s.rs.attemptList, rs.attemptList},
		{s.r, &s.rs.statsGet, rs.statsGet},
		{s.r, &s.rs.pausedEndpoints, ws.pausedEndpoints},
		{s.r, &s.rs.claimDue, ws.claimDue},
		{s.r, &s.rs.claimBacklogged, ws.claimBacklogged},
		{s.r, &s.rs.claimDueOf, ws.claimDueOf},
		{s.r, &s.rs.breakerList, breakerListSQL},
	} {
		st, err := p.db.PrepareContext(ctx, p.text)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", firstLine(p.text), err)
		}
		*p.dst = st
	}
	if err := prepareVariants(ctx, s.w, s.ws.attemptUpdate[:], func(k int) string {
		return attemptUpdateSQL(k&1 != 0, k&2 != 0, k&4 != 0)
	}); err != nil {
		return err
	}
	if err := s.prepareRecovery(ctx); err != nil {
		return err
	}
	return s.prepareReplay(ctx)
}

// prepareVariants prepares dst[k] from text(k) for every variant k.
func prepareVariants(ctx context.Context, db *sql.DB, dst []*sql.Stmt, text func(k int) string) error {
	for k := range dst {
		st, err := db.PrepareContext(ctx, text(k))
		if err != nil {
			return fmt.Errorf("prepare %q: %w", firstLine(text(k)), err)
		}
		dst[k] = st
	}
	return nil
}

// firstLine shortens a statement for an error message.
func firstLine(q string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(q), "\n")
	return line
}
