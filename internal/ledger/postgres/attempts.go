package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// AttemptRecordMany implements ledger.Store. One transaction, two round
// trips: BEGIN and the locks on what the batch touches (one pipeline),
// decide every item in Go, then attempts, deliveries, dead letters,
// counters and COMMIT (one pipeline).
func (s *Store) AttemptRecordMany(ctx context.Context, params []*ledger.AttemptRecordParams) ([]ledger.AttemptRecordResult, error) {
	op := fmt.Sprintf("record %d attempts", len(params))
	for i, p := range params {
		if p == nil {
			return nil, fmt.Errorf("%s: item %d is nil", op, i)
		}
	}
	if len(params) == 0 {
		return nil, nil
	}
	var results []ledger.AttemptRecordResult
	err := s.tx(ctx, op, func(tx *txn) error {
		tx.genericPlans()
		var err error
		results, err = record(ctx, tx, params, nil)
		return err // COMMIT rides with record's writes
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// lockedDelivery is a delivery locked for update with its event's type,
// and whether the event held secrets then.
type lockedDelivery struct {
	d         ledger.Delivery
	eventType string
	secrets   bool
}

// noteSettled notes in settled the event of cur's delivery d if d ended and
// the event held secrets when cur was locked: an event's secrets are stored
// with it and only ever dropped, so an event without them then has none to
// scrub (settleSQL would change nothing), and its settlement costs no
// statement.
func noteSettled(settled ledger.SettledEvents, cur *lockedDelivery, d ledger.Delivery, now time.Time) {
	if cur != nil && cur.secrets {
		settled.Note(d, now)
	}
}

// recordEndpoint is what recording needs to know of an endpoint.
type recordEndpoint struct {
	namespace, deadLetter, owner string
}

// record applies a batch of attempt records in tx: it locks (one round
// trip) and queues its writes for tx's next pipeline. Its counter changes
// go to shared when given (the caller applies them), else with its writes.
func record(ctx context.Context, tx *txn, params []*ledger.AttemptRecordParams, shared ledger.StatsDelta) ([]ledger.AttemptRecordResult, error) {
	b := &pgx.Batch{}
	locks := queueRecordLocks(b, params)
	if err := sendReads(ctx, tx, b, "lock deliveries"); err != nil {
		return nil, err
	}
	return recordLocked(tx, params, locks, shared)
}

// recordLocked decides a batch of attempt records on what locks read, and
// queues their writes for tx's next pipeline (record).
func recordLocked(tx *txn, params []*ledger.AttemptRecordParams, locks *recordLocks, shared ledger.StatsDelta) ([]ledger.AttemptRecordResult, error) {
	results := make([]ledger.AttemptRecordResult, len(params))
	if len(params) == 0 {
		return results, nil
	}
	endpoints, deliveries := locks.endpoints, locks.deliveries
	var (
		attempts    attemptRows
		changed     []string
		deadLetters eventBatch
		delta       = shared
	)
	if delta == nil {
		delta = ledger.StatsDelta{}
	}
	for i, p := range params {
		res := &results[i]
		cur := deliveries[p.DeliveryID]
		switch {
		case cur == nil:
			res.Err = fmt.Errorf("delivery %s: %w", p.DeliveryID, ledger.ErrNotFound)
			continue
		case cur.d.State != ledger.StateInFlight || cur.d.LeaseOwner != p.Owner:
			res.Err = fmt.Errorf("delivery %s (state %s, owner %q, not %q): %w",
				p.DeliveryID, cur.d.State, cur.d.LeaseOwner, p.Owner, ledger.ErrLeaseLost)
			continue
		}
		tr, err := p.Transition()
		if err != nil {
			res.Err = fmt.Errorf("delivery %s: %w", p.DeliveryID, err)
			continue
		}
		d := &cur.d
		tr.Apply(d)
		if !p.Unsent {
			attempts.add(p, d.Attempts)
		}
		if !slices.Contains(changed, d.ID) {
			changed = append(changed, d.ID)
		}
		tr.Stats(delta, d.EndpointID, p.Now)
		res.Delivery = *d

		if d.State == ledger.StateExhausted {
			dl, err := exhaustedDeadLetter(*d, cur.eventType, endpoints, p.Now, &deadLetters, delta)
			if err != nil {
				return nil, err
			}
			res.DeadLetter = dl
		}
	}

	firsts := ledger.FirstAttempts{}
	settled := ledger.SettledEvents{}
	outcomes := ledger.OutcomeDeltas{}
	for i, p := range params {
		firsts.Note(p, results[i])
		noteSettled(settled, deliveries[p.DeliveryID], results[i].Delivery, p.Now)
		outcomes.Note(results[i].Delivery, p.Now)
	}

	b := &pgx.Batch{}
	attempts.queue(b)
	queueDeliveryUpdate(b, deliveries, changed)
	if !deadLetters.empty() {
		b.Queue(insertEventsSQL, deadLetters.args()...)
	}
	queueSettle(b, settled)
	queueFirstAttempts(b, firsts)
	if shared == nil {
		queueStats(b, delta)
	}
	queueOutcomes(b, outcomes)
	tx.queue("write attempts", b)
	return results, nil
}

// recordLocks is what a batch of records reads before it decides: its
// deliveries, locked for update, and their endpoints.
type recordLocks struct {
	endpoints  map[string]recordEndpoint
	deliveries map[string]*lockedDelivery
}

// lockForRecord locks, in one round trip, what a batch of records touches
// (queueRecordLocks).
func lockForRecord(ctx context.Context, tx pgx.Tx, params []*ledger.AttemptRecordParams) (map[string]recordEndpoint, map[string]*lockedDelivery, error) {
	b := &pgx.Batch{}
	locks := queueRecordLocks(b, params)
	if err := sendReads(ctx, tx, b, "lock deliveries"); err != nil {
		return nil, nil, err
	}
	return locks.endpoints, locks.deliveries, nil
}

// queueRecordLocks queues on b the locks of a batch of records, in the
// global order: the endpoints of the batch's deliveries and their
// dead-letter endpoints (FOR KEY SHARE, so neither is deleted under the
// transaction), then the deliveries (FOR UPDATE), both in ID order. The
// endpoints are one IN over a UNION, so that each is looked up by its key
// (an OR of two INs reads every endpoint), and the deliveries' endpoints
// are read once for both sides (src). The returned locks are filled when
// b's results are read; an empty batch queues nothing.
func queueRecordLocks(b *pgx.Batch, params []*ledger.AttemptRecordParams) *recordLocks {
	locks := &recordLocks{
		endpoints:  make(map[string]recordEndpoint),
		deliveries: make(map[string]*lockedDelivery, len(params)),
	}
	if len(params) == 0 {
		return locks
	}
	ids := make([]string, 0, len(params))
	for _, p := range params {
		ids = append(ids, p.DeliveryID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)

	b.Queue(`
		WITH src AS (SELECT DISTINCT endpoint_id FROM deliveries WHERE id = ANY($1))
		SELECT id, namespace, dead_letter, owner FROM endpoints
		WHERE deleted_at IS NULL AND id IN (
			SELECT endpoint_id FROM src
			UNION
			SELECT ep.dead_letter FROM endpoints ep JOIN src ON src.endpoint_id = ep.id)
		ORDER BY id
		FOR KEY SHARE`, ids).Query(func(rows pgx.Rows) error {
		var id string
		var ep recordEndpoint
		_, err := pgx.ForEachRow(rows, []any{&id, &ep.namespace, &ep.deadLetter, &ep.owner}, func() error {
			locks.endpoints[id] = ep
			return nil
		})
		return err
	})
	b.Queue(`SELECT `+deliveryColumns+`, e.type, EXISTS (SELECT 1 FROM event_secrets s WHERE s.event_id = e.id)
		FROM deliveries d JOIN events e ON e.id = d.event_id
		WHERE d.id = ANY($1) ORDER BY d.id FOR UPDATE OF d`, ids).Query(func(rows pgx.Rows) error {
		var r deliveryRow
		var typ string
		var secrets bool
		_, err := pgx.ForEachRow(rows, append(r.dests(), &typ, &secrets), func() error {
			locks.deliveries[r.d.ID] = &lockedDelivery{d: r.value(), eventType: typ, secrets: secrets}
			return nil
		})
		return err
	})
	return locks
}

// sendReads sends b's reads in tx as one pipeline (with the writes queued
// before them), what naming them in an error. An empty b sends nothing.
func sendReads(ctx context.Context, tx pgx.Tx, b *pgx.Batch, what string) error {
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// exhaustedDeadLetter adds to batch the dead letter of the delivery d, just
// exhausted at now (by an attempt, a rejection or an acknowledgement
// timeout), if its endpoint names one: the dead-letter endpoint must
// exist, live (locked in endpoints), in the same namespace. It returns the
// dead letter's delivery, or nil.
func exhaustedDeadLetter(d ledger.Delivery, eventType string, endpoints map[string]recordEndpoint, now time.Time, batch *eventBatch, delta ledger.StatsDelta) (*ledger.Delivery, error) {
	if !ledger.DeadLetters(eventType) {
		return nil, nil
	}
	src := endpoints[d.EndpointID]
	ep, ok := endpoints[src.deadLetter]
	if !ok || src.deadLetter == "" || ep.namespace != src.namespace {
		return nil, nil
	}
	target := src.deadLetter
	dl, err := deadLetter(d, eventType, src.owner, ep.namespace, target, now)
	if err != nil {
		return nil, err
	}
	if err := batch.add(dl.Event, dl.Deliveries); err != nil {
		return nil, err
	}
	delta.Add(target, ledger.StateScheduled, ledger.ResolutionNone, 1)
	return &dl.Deliveries[0], nil
}

// deadLetter builds the hookkeeper.delivery.exhausted event about d (of an
// endpoint owned by owner) and its one delivery to the dead-letter endpoint
// target.
func deadLetter(d ledger.Delivery, eventType, owner, namespace, target string, at time.Time) (ledger.EventInsertResult, error) {
	data, err := json.Marshal(ledger.NewDeadLetterData(d, eventType, owner, at))
	if err != nil {
		return ledger.EventInsertResult{}, fmt.Errorf("dead letter for %s: %w", d.ID, err)
	}
	now := fromNanos(nanos(at))
	// No idempotency key, so no body hash (as in the SQLite store).
	e := ledger.Event{
		ID:        ledger.NewID("evt", now),
		Namespace: namespace,
		Type:      ledger.DeadLetterEventType,
		Data:      data,
		CreatedAt: now,
	}
	return ledger.EventInsertResult{Event: e, Deliveries: []ledger.Delivery{scheduledDelivery(e.ID, target, now)}}, nil
}

// queueDeliveryUpdate writes the final state of the changed deliveries.
func queueDeliveryUpdate(b *pgx.Batch, deliveries map[string]*lockedDelivery, changed []string) {
	if len(changed) == 0 {
		return
	}
	n := len(changed)
	var (
		states, errs, reasons, resolutions = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		attempts, statuses                 = make([]int, n), make([]int, n)
		dueAt                              = make([]int64, n)
		firstAt, ackDeadline, terminalAt   = make([]*int64, n), make([]*int64, n), make([]*int64, n)
	)
	for i, id := range changed {
		d := deliveries[id].d
		states[i], errs[i], reasons[i], resolutions[i] = string(d.State), d.LastError, string(d.ExhaustReason), string(d.Resolution)
		attempts[i], statuses[i] = d.Attempts, d.LastStatus
		dueAt[i] = nanos(d.DueAt)
		firstAt[i], ackDeadline[i], terminalAt[i] = nullNanos(d.FirstAttemptAt), nullNanos(d.AckDeadline), nullNanos(d.TerminalAt)
	}
	b.Queue(`
		UPDATE deliveries d SET state = u.state, attempts = u.attempts, due_at = u.due_at,
			first_attempt_at = u.first_attempt_at, lease_owner = '', lease_until = NULL,
			ack_deadline = u.ack_deadline, last_status = u.last_status, last_error = u.last_error,
			exhaust_reason = u.exhaust_reason, resolution = u.resolution, terminal_at = u.terminal_at
		FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[],
			$7::int[], $8::text[], $9::text[], $10::text[], $11::bigint[])
			AS u(id, state, attempts, due_at, first_attempt_at, ack_deadline, last_status, last_error,
				exhaust_reason, resolution, terminal_at)
		WHERE d.id = u.id`,
		changed, states, attempts, dueAt, firstAt, ackDeadline, statuses, errs, reasons, resolutions, terminalAt)
}

// attemptRows collects attempts to insert as arrays.
type attemptRows struct {
	deliveryIDs, errs    []string
	numbers, statuses    []int
	startedAt, durations []int64
	excerpts             [][]byte
}

func (a *attemptRows) add(p *ledger.AttemptRecordParams, number int) {
	a.deliveryIDs = append(a.deliveryIDs, p.DeliveryID)
	a.numbers = append(a.numbers, number)
	a.startedAt = append(a.startedAt, nanos(p.Attempt.StartedAt))
	a.durations = append(a.durations, int64(p.Attempt.Duration))
	a.statuses = append(a.statuses, p.Attempt.StatusCode)
	a.errs = append(a.errs, p.Attempt.Error)
	a.excerpts = append(a.excerpts, p.Attempt.ResponseExcerpt)
}

func (a *attemptRows) queue(b *pgx.Batch) {
	if len(a.deliveryIDs) == 0 {
		return
	}
	b.Queue(`
		INSERT INTO attempts (delivery_id, number, started_at, duration, status_code, error, response_excerpt)
		SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::bigint[], $5::int[], $6::text[], $7::bytea[])`,
		a.deliveryIDs, a.numbers, a.startedAt, a.durations, a.statuses, a.errs, a.excerpts)
}
