package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// eventColumns lists an event in the order eventRow scans it; use it with
// the aliases e (events) and sec (event_secrets, left-joined).
const eventColumns = `e.id, e.namespace, e.type, e.data, e.secret_names, e.secrets_scrub_at,
	e.reissue_of, e.idempotency_key, e.body_hash, e.created_at, sec.value, e.secrets_scrub_due, e.payload_pruned_at,
	e.type_generation, e.replay_class, e.valid_until, e.policy_override, e.trace_parent, e.trace_state`

// eventFrom is the FROM clause that goes with eventColumns.
const eventFrom = ` FROM events e LEFT JOIN event_secrets sec ON sec.event_id = e.id`

// eventRow receives eventColumns.
type eventRow struct {
	e           ledger.Event
	data        []byte
	secretNames []byte
	scrubAt     *int64
	createdAt   int64
	secrets     []byte
	scrubDue    *int64
	prunedAt    *int64
	validUntil  *int64
	override    []byte
}

func (r *eventRow) dests() []any {
	return []any{&r.e.ID, &r.e.Namespace, &r.e.Type, &r.data, &r.secretNames, &r.scrubAt,
		&r.e.ReissueOf, &r.e.IdempotencyKey, &r.e.BodyHash, &r.createdAt, &r.secrets, &r.scrubDue, &r.prunedAt,
		&r.e.TypeGeneration, &r.e.ReplayClass, &r.validUntil, &r.override, &r.e.Trace.Parent, &r.e.Trace.State}
}

func (r *eventRow) value() (ledger.Event, error) {
	e := r.e
	if r.data != nil {
		e.Data = json.RawMessage(r.data)
	}
	if r.secrets != nil {
		e.Secrets = sensitive.Bytes(r.secrets)
	}
	if err := json.Unmarshal(r.secretNames, &e.SecretNames); err != nil {
		return ledger.Event{}, fmt.Errorf("event %s: decode secret names: %w", e.ID, err)
	}
	e.SecretsScrubAt = fromNullNanos(r.scrubAt)
	e.SecretsScrubDue = fromNullNanos(r.scrubDue)
	e.PayloadPrunedAt = fromNullNanos(r.prunedAt)
	e.CreatedAt = fromNanos(r.createdAt)
	e.ValidUntil = fromNullNanos(r.validUntil)
	e.PolicyOverride = nil
	if r.override != nil {
		e.PolicyOverride = new(ledger.Policy)
		if err := json.Unmarshal(r.override, e.PolicyOverride); err != nil {
			return ledger.Event{}, fmt.Errorf("event %s: decode policy override: %w", e.ID, err)
		}
	}
	return e, nil
}

func scanEvent(row pgx.CollectableRow) (ledger.Event, error) {
	var r eventRow
	if err := row.Scan(r.dests()...); err != nil {
		return ledger.Event{}, err
	}
	return r.value()
}

// EventGet implements ledger.Store.
func (s *Store) EventGet(ctx context.Context, id string) (ledger.Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+eventColumns+eventFrom+` WHERE e.id = $1`, id)
	if err != nil {
		return ledger.Event{}, translate("get event "+id, err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, scanEvent)
	return e, translate("get event "+id, err)
}

// eventBatch collects rows to insert as arrays, so that a batch of any size
// is written by one statement.
type eventBatch struct {
	ids, namespaces, types, reissueOf, keys []string
	data, bodyHash                          [][]byte
	secretNames                             [][]byte
	createdAt                               []int64
	typeGenerations                         []int64
	replayClasses                           []string
	validUntil                              []*int64
	overrides                               [][]byte
	// quotaBytes is what each event counts against its namespace's
	// payload bytes (0: not a publish; set by the caller after add).
	quotaBytes []int64
	// traceParents and traceStates are each event's trace context.
	traceParents, traceStates []string

	secretEvents []string
	secretValues [][]byte

	dlvIDs, dlvEvents, dlvEndpoints, dlvStates, dlvOwners []string
	dlvDueAt                                              []int64
	dlvLeaseUntil                                         []*int64
	dlvResend                                             []bool
	dlvValidUntil                                         []*int64
}

// add queues event e and its deliveries ds (scheduled, or leased to their
// publisher: EventInsertParams.NewDelivery).
func (b *eventBatch) add(e ledger.Event, ds []ledger.Delivery) error {
	names, err := jsonValue(e.SecretNames)
	if err != nil {
		return err
	}
	b.ids = append(b.ids, e.ID)
	b.namespaces = append(b.namespaces, e.Namespace)
	b.types = append(b.types, e.Type)
	b.data = append(b.data, e.Data)
	b.secretNames = append(b.secretNames, names)
	b.reissueOf = append(b.reissueOf, e.ReissueOf)
	b.keys = append(b.keys, e.IdempotencyKey)
	b.bodyHash = append(b.bodyHash, e.BodyHash)
	b.createdAt = append(b.createdAt, nanos(e.CreatedAt))
	var override []byte
	if e.PolicyOverride != nil {
		if override, err = jsonValue(e.PolicyOverride); err != nil {
			return err
		}
	}
	b.typeGenerations = append(b.typeGenerations, e.TypeGeneration)
	b.replayClasses = append(b.replayClasses, string(e.ReplayClass))
	b.validUntil = append(b.validUntil, nullNanos(e.ValidUntil))
	b.overrides = append(b.overrides, override)
	b.quotaBytes = append(b.quotaBytes, 0)
	b.traceParents = append(b.traceParents, e.Trace.Parent)
	b.traceStates = append(b.traceStates, e.Trace.State)
	if e.Secrets != nil {
		b.secretEvents = append(b.secretEvents, e.ID)
		b.secretValues = append(b.secretValues, e.Secrets.Reveal())
	}
	for _, d := range ds {
		b.dlvIDs = append(b.dlvIDs, d.ID)
		b.dlvEvents = append(b.dlvEvents, d.EventID)
		b.dlvEndpoints = append(b.dlvEndpoints, d.EndpointID)
		b.dlvDueAt = append(b.dlvDueAt, nanos(d.DueAt))
		b.dlvStates = append(b.dlvStates, string(d.State))
		b.dlvOwners = append(b.dlvOwners, d.LeaseOwner)
		b.dlvLeaseUntil = append(b.dlvLeaseUntil, nullNanos(d.LeaseUntil))
		b.dlvResend = append(b.dlvResend, d.Resend)
		// A delivery repeats its event's bound (migration 00016).
		b.dlvValidUntil = append(b.dlvValidUntil, nullNanos(e.ValidUntil))
	}
	return nil
}

func (b *eventBatch) empty() bool { return len(b.ids) == 0 }

// insertEventsSQL inserts events, their secrets and their deliveries in one
// statement. An event whose idempotency key is already taken (by a
// transaction that committed meanwhile) is skipped together with its
// secrets and deliveries; the statement returns the IDs it did insert.
const insertEventsSQL = insertEventsHead + `
		ON CONFLICT (namespace, idempotency_key) WHERE idempotency_key <> '' DO NOTHING` + insertEventsTail

// insertAllEventsSQL is insertEventsSQL without the skip: a key taken
// meanwhile fails the statement (and the transaction) instead, so that its
// answer is known before it is read and it can ride with COMMIT (queue).
const insertAllEventsSQL = insertEventsHead + insertEventsTail

// insertEventsHead and insertEventsTail are the two statements' common
// parts, before and after the events' conflict clause.
const insertEventsHead = `
	WITH ins AS (
		INSERT INTO events (id, namespace, type, data, secret_names, reissue_of, idempotency_key, body_hash, created_at,
			type_generation, replay_class, valid_until, policy_override, quota_bytes, trace_parent, trace_state)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::jsonb[], $6::text[],
			$7::text[], $8::bytea[], $9::bigint[], $20::bigint[], $21::text[], $22::bigint[], $23::jsonb[], $25::bigint[],
			$26::text[], $27::text[])
			AS u(id, namespace, type, data, secret_names, reissue_of, idempotency_key, body_hash, created_at,
				type_generation, replay_class, valid_until, policy_override, quota_bytes, trace_parent, trace_state)
		-- Keys enter the unique index in one global order, so two batches
		-- racing for the same keys queue instead of deadlocking.
		ORDER BY u.namespace, u.idempotency_key`

const insertEventsTail = `
		RETURNING id
	), sec AS (
		INSERT INTO event_secrets (event_id, value)
		SELECT u.event_id, u.value FROM unnest($10::text[], $11::bytea[]) AS u(event_id, value)
		JOIN ins ON ins.id = u.event_id
	), dlv AS (
		INSERT INTO deliveries (id, event_id, endpoint_id, state, attempts, due_at, lease_owner, lease_until,
			last_status, last_error, exhaust_reason, resolution, created_at, resend, valid_until)
		SELECT u.id, u.event_id, u.endpoint_id, u.state, 0, u.due_at, u.lease_owner, u.lease_until, 0, '', '', '', u.due_at,
			u.resend, u.valid_until
		FROM unnest($12::text[], $13::text[], $14::text[], $15::bigint[], $16::text[], $17::text[], $18::bigint[], $19::boolean[],
			$24::bigint[])
			WITH ORDINALITY AS u(id, event_id, endpoint_id, due_at, state, lease_owner, lease_until, resend, valid_until, n)
		JOIN ins ON ins.id = u.event_id
		ORDER BY u.n -- seq follows the batch order
	)
	SELECT id FROM ins`

// args are the arguments of insertEventsSQL.
func (b *eventBatch) args() []any {
	return []any{b.ids, b.namespaces, b.types, b.data, b.secretNames, b.reissueOf, b.keys, b.bodyHash, b.createdAt,
		b.secretEvents, b.secretValues,
		b.dlvIDs, b.dlvEvents, b.dlvEndpoints, b.dlvDueAt, b.dlvStates, b.dlvOwners, b.dlvLeaseUntil, b.dlvResend,
		b.typeGenerations, b.replayClasses, b.validUntil, b.overrides, b.dlvValidUntil, b.quotaBytes,
		b.traceParents, b.traceStates}
}

// queue queues the insert of the batch for tx's next pipeline: every
// event is inserted, or the transaction fails. Preload found every key
// free, so a key is taken only by a transaction that committed after it
// read (or had not committed then); the insert waits for that one and
// fails with errKeyRace, which runs the whole transaction again: its
// preload then finds the winner.
func (b *eventBatch) queue(tx *txn) {
	if b.empty() {
		return
	}
	pb := &pgx.Batch{}
	pb.Queue(insertAllEventsSQL, b.args()...).Fn = func(br pgx.BatchResults) error {
		_, err := br.Exec()
		if keyTaken(err) {
			return fmt.Errorf("%w: %w", errKeyRace, err)
		}
		return err
	}
	tx.queue("insert events", pb)
}
