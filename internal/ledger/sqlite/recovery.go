package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// This file implements ledger.Recovery: retry budgets (buckets counted by
// AttemptRecordMany and spent by RetryBudgetAcquire) and recovery
// operations, whose items are recorded in recovery_items so that applying
// one twice changes nothing. The single writer makes every method atomic.

var _ ledger.Recovery = (*Store)(nil)

// itemCols lists a recovery item as scanItem reads it, with the state of
// the delivery it created (alias ri, and nd left-joined).
const itemCols = `ri.operation_key, ri.delivery_id, ri.event_id, ri.action, ri.outcome, ri.reason,
	ri.new_event_id, ri.new_delivery_id, ri.created_at, coalesce(nd.state, '')`

const itemFrom = ` FROM recovery_items ri LEFT JOIN deliveries nd ON nd.id = ri.new_delivery_id AND ri.new_delivery_id <> ''`

var recoverySQL = struct {
	budgetFirst, budgetAcquire, budgetRead, budgetPrune,
	itemGet, facts, deliveryInsertAs, resolve, itemInsert, awaitingOf, itemComplete,
	itemsList, exhaustedPage, opInsert, opGet string
}{
	// AttemptRecordMany adds the first attempts of a batch, once per
	// endpoint and minute.
	budgetFirst: `INSERT INTO retry_budgets (endpoint_id, minute, first_attempts) VALUES (?1, ?2, ?3)
		ON CONFLICT (endpoint_id, minute) DO UPDATE SET first_attempts = first_attempts + excluded.first_attempts`,
	// The check and the spend are one statement: a row comes back only
	// when a retry was taken (or, from the insert, with 0 retries when the
	// floor allows none). ?3 ratio percent, ?4 floor per minute, ?5
	// milliseconds into the minute (the pace: ledger.NextRetryAt).
	budgetAcquire: `INSERT INTO retry_budgets (endpoint_id, minute, retries)
		VALUES (?1, ?2, CASE WHEN ?4 > 0 THEN 1 ELSE 0 END)
		ON CONFLICT (endpoint_id, minute) DO UPDATE SET retries = retries + 1
			WHERE retries < first_attempts * ?3 / 100 + ?4
				AND retries * 60000 <= ?5 * (first_attempts * ?3 / 100 + ?4)
		RETURNING retries`,
	budgetRead:  `SELECT first_attempts, retries FROM retry_budgets WHERE endpoint_id = ?1 AND minute = ?2`,
	budgetPrune: `DELETE FROM retry_budgets WHERE endpoint_id = ?1 AND minute < ?2`,

	itemGet: `SELECT ` + itemCols + itemFrom + ` WHERE ri.operation_key = ?1 AND ri.delivery_id = ?2`,
	// What a recovery decides on: the delivery, its event, its endpoint's
	// policy, and the event's first attempt (the replay window's start).
	facts: `SELECT ` + prefixed("d", deliveryCols) + `, ` + prefixed("e", eventCols) + `, ep.policy, ep.deleted,
			(SELECT min(x.first_attempt_at) FROM deliveries x WHERE x.event_id = d.event_id)
		FROM deliveries d JOIN events e ON e.id = d.event_id JOIN endpoints ep ON ep.id = d.endpoint_id
		WHERE d.id = ?1`,
	// A delivery repeats its event's valid_until (migration 0016); the
	// event is written first.
	deliveryInsertAs: `INSERT INTO deliveries (id, event_id, endpoint_id, state, due_at, retry_of, created_at, resend, valid_until)
		VALUES (?1, ?2, ?3, 'scheduled', ?4, ?5, ?4, ?6, (SELECT valid_until FROM events WHERE id = ?2))`,
	// The original is never reset: it only gains a resolution, and only
	// while it is still unresolved.
	resolve: `UPDATE deliveries SET resolution = ?2, resolved_by = ?3, resolved_at = ?4
		WHERE id = ?1 AND state = 'exhausted' AND resolution = 'unresolved'`,
	itemInsert: `INSERT INTO recovery_items (operation_key, delivery_id, event_id, endpoint_id, action, outcome, reason,
			new_event_id, new_delivery_id, request_event_id, created_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)`,
	awaitingOf: `SELECT operation_key, delivery_id, event_id, endpoint_id FROM recovery_items
		WHERE outcome = 'AwaitingReissue' AND event_id IN (SELECT value FROM json_each(?1))
		ORDER BY rowid`,
	itemComplete: `UPDATE recovery_items SET outcome = 'Reissued', new_event_id = ?3, new_delivery_id = ?4, completed_at = ?5
		WHERE operation_key = ?1 AND delivery_id = ?2 AND outcome = 'AwaitingReissue'`,

	// The first start of an operation wins; later ones read its record.
	opInsert: `INSERT INTO recovery_operations (operation_key, spec_hash, object_uid, started_at) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (operation_key) DO NOTHING`,
	opGet: `SELECT spec_hash, object_uid, started_at FROM recovery_operations WHERE operation_key = ?1`,

	itemsList: `SELECT ` + itemCols + itemFrom + ` WHERE ri.operation_key = ?1 ORDER BY ri.rowid`,
	// One page of an endpoint's unresolved exhausted deliveries after the
	// keyset (?4, ?5), oldest first, walking deliveries_exhausted (0010). ?2 and
	// ?3 bound terminal_at; ?6 and ?7 are JSON arrays of delivery and event
	// IDs ('[]': no filter); ?8 the page size.
	exhaustedPage: `SELECT ` + prefixed("d", deliveryCols) + `, e.type, e.secret_names, e.secrets IS NOT NULL,
			e.data IS NULL OR e.payload_pruned_at IS NOT NULL,
			e.created_at, (SELECT min(x.first_attempt_at) FROM deliveries x WHERE x.event_id = d.event_id),
			e.replay_class, e.valid_until, json_extract(e.policy_override, '$.replayWindow')
		FROM deliveries d JOIN events e ON e.id = d.event_id
		WHERE d.endpoint_id = ?1 AND d.resolution = 'unresolved' AND d.state = 'exhausted'
			AND d.terminal_at >= ?2 AND d.terminal_at < ?3 AND (d.terminal_at, d.id) > (?4, ?5)
			AND (?6 = '[]' OR d.id IN (SELECT value FROM json_each(?6)))
			AND (?7 = '[]' OR d.event_id IN (SELECT value FROM json_each(?7)))
		ORDER BY d.terminal_at, d.id LIMIT ?8`,
}

// recoveryStmts are the prepared statements of this file: the writes on
// the writer, the two lists on the read pool.
type recoveryStmts struct {
	budgetFirst, budgetAcquire, budgetRead, budgetPrune,
	itemGet, facts, deliveryInsertAs, resolve, itemInsert, awaitingOf, itemComplete, opInsert, opGet *sql.Stmt
	itemsList, exhaustedPage *sql.Stmt
}

func (s *Store) prepareRecovery(ctx context.Context) error {
	q := recoverySQL
	for _, p := range []struct {
		db   *sql.DB
		dst  **sql.Stmt
		text string
	}{
		{s.w, &s.rc.budgetFirst, q.budgetFirst},
		{s.w, &s.rc.budgetAcquire, q.budgetAcquire},
		{s.w, &s.rc.budgetRead, q.budgetRead},
		{s.w, &s.rc.budgetPrune, q.budgetPrune},
		{s.w, &s.rc.itemGet, q.itemGet},
		{s.w, &s.rc.facts, q.facts},
		{s.w, &s.rc.deliveryInsertAs, q.deliveryInsertAs},
		{s.w, &s.rc.resolve, q.resolve},
		{s.w, &s.rc.itemInsert, q.itemInsert},
		{s.w, &s.rc.awaitingOf, q.awaitingOf},
		{s.w, &s.rc.itemComplete, q.itemComplete},
		{s.w, &s.rc.opInsert, q.opInsert},
		{s.w, &s.rc.opGet, q.opGet},
		{s.r, &s.rc.itemsList, q.itemsList},
		{s.r, &s.rc.exhaustedPage, q.exhaustedPage},
	} {
		st, err := p.db.PrepareContext(ctx, p.text)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", firstLine(p.text), err)
		}
		*p.dst = st
	}
	return nil
}

// applyFirstAttempts adds a transaction's first attempts to their
// budget buckets, one statement per bucket.
func applyFirstAttempts(t *wtx, st *sql.Stmt, fa ledger.FirstAttempts) error {
	stmt := t.stmt(st)
	for _, k := range fa.Buckets() {
		if _, err := stmt.ExecContext(t.ctx, k.EndpointID, k.Minute, k.Count); err != nil {
			return translate("count first attempts of "+k.EndpointID, err)
		}
	}
	return nil
}

// RetryBudgetAcquire implements ledger.Recovery (ledger.RetryBudgetAcquire
// runs the transaction).
func (s *Store) RetryBudgetAcquire(ctx context.Context, p *ledger.RetryBudgetParams) (ledger.RetryBudgetAnswer, error) {
	return ledger.RetryBudgetAcquire(ctx, driver{s}, p)
}

// RetryBudgetTx implements ledger.BudgetTransactor: one write transaction.
func (d driver) RetryBudgetTx(ctx context.Context, op string, fn func(ledger.BudgetStatements) error) error {
	return d.writeOp(ctx, op, func(t *wtx) error { return fn(budgetTx{t}) })
}

// budgetTx runs ledger.BudgetStatements in one write transaction.
type budgetTx struct{ t *wtx }

// RetryBudgetTake implements ledger.BudgetStatements.
func (b budgetTx) RetryBudgetTake(_ context.Context, p *ledger.RetryBudgetParams, minute, elapsedMillis int64) (int64, bool, error) {
	var retries int64
	err := b.t.stmt(b.t.s.rc.budgetAcquire).QueryRowContext(b.t.ctx, p.EndpointID, minute,
		int64(p.Budget.RatioPercent), int64(p.Budget.MinPerMinute), elapsedMillis).Scan(&retries)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil // spent
	}
	return retries, err == nil, translate("take a retry", err)
}

// RetryBudgetRead implements ledger.BudgetStatements.
func (b budgetTx) RetryBudgetRead(_ context.Context, endpointID string, minute int64) (firsts, retries int64, err error) {
	err = b.t.stmt(b.t.s.rc.budgetRead).QueryRowContext(b.t.ctx, endpointID, minute).Scan(&firsts, &retries)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	return firsts, retries, translate("read a budget bucket", err)
}

// RetryBudgetPrune implements ledger.BudgetStatements.
func (b budgetTx) RetryBudgetPrune(_ context.Context, endpointID string, before int64) error {
	_, err := b.t.stmt(b.t.s.rc.budgetPrune).ExecContext(b.t.ctx, endpointID, before)
	return translate("delete old buckets", err)
}

// jsonIDs encodes a filter list for json_each; "[]" means no filter.
func jsonIDs(ids []string) (string, error) {
	if len(ids) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(ids)
	return string(b), err
}

// ExhaustedList implements ledger.Recovery (ledger.ExhaustedList walks
// the pages).
func (s *Store) ExhaustedList(ctx context.Context, p *ledger.ExhaustedListParams) ([]ledger.ExhaustedDelivery, error) {
	return ledger.ExhaustedList(ctx, driver{s}, p)
}

// ExhaustedPage implements ledger.ExhaustedPager on the read pool.
func (d driver) ExhaustedPage(ctx context.Context, p *ledger.ExhaustedPageParams) ([]ledger.ExhaustedDelivery, error) {
	ids, idsErr := jsonIDs(p.DeliveryIDs)
	events, eventsErr := jsonIDs(p.EventIDs)
	if err := errors.Join(idsErr, eventsErr); err != nil {
		return nil, fmt.Errorf("read page: %w", err)
	}
	from, to, afterAt, afterID := p.UnixNanoBounds()
	rows, err := d.rc.exhaustedPage.QueryContext(ctx, p.EndpointID, from, to, afterAt, afterID, ids, events, p.Limit)
	if err != nil {
		return nil, translate("read page", err)
	}
	defer rows.Close()
	var out []ledger.ExhaustedDelivery
	for rows.Next() {
		var (
			d                  ledger.Delivery
			typ, names         string
			hasSecrets, pruned bool
			created            int64
			firstAttempt       sql.NullInt64
			secretNames        []string
			class              ledger.ReplayClass
			validUntil, window sql.NullInt64
		)
		dDest, dFinish := deliveryDest(&d)
		if err := rows.Scan(append(dDest, &typ, &names, &hasSecrets, &pruned, &created, &firstAttempt, &class, &validUntil, &window)...); err != nil {
			return nil, translate("read page", err)
		}
		dFinish()
		if err := json.Unmarshal([]byte(names), &secretNames); err != nil {
			return nil, fmt.Errorf("secret names of event %s: %w", d.EventID, err)
		}
		replayFrom := ledger.ReplayFrom(fromNullNanos(firstAttempt), fromNanos(created))
		ed := ledger.NewExhaustedDelivery(d, typ, secretNames, hasSecrets, pruned, replayFrom)
		ed.ReplayClass, ed.ValidUntil, ed.OverrideReplayWindow = class, fromNullNanos(validUntil), time.Duration(window.Int64)
		out = append(out, ed)
	}
	return out, translate("read page", rows.Err())
}

// scanItem scans itemCols.
func scanItem(sc scanner) (ledger.RecoveryItem, error) {
	var (
		it      ledger.RecoveryItem
		created int64
	)
	err := sc.Scan(&it.OperationKey, &it.DeliveryID, &it.EventID, &it.Action, &it.Outcome, &it.Reason,
		&it.NewEventID, &it.NewDeliveryID, &created, &it.NewDeliveryState)
	it.CreatedAt = fromNanos(created)
	it.DeliveryID = ledger.ItemDeliveryID(it.Action, it.DeliveryID)
	return it, err
}

// RecoveryItemsList implements ledger.Recovery: the items in the order
// they were applied. An unknown operation has none.
func (s *Store) RecoveryItemsList(ctx context.Context, operationKey string) ([]ledger.RecoveryItem, error) {
	op := "list recovery items of " + operationKey
	rows, err := s.rc.itemsList.QueryContext(ctx, operationKey)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []ledger.RecoveryItem
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return nil, translate(op, err)
		}
		out = append(out, it)
	}
	return out, translate(op, rows.Err())
}

// RecoveryOperationStart implements ledger.Recovery.
func (s *Store) RecoveryOperationStart(ctx context.Context, p *ledger.RecoveryOperationParams) (ledger.RecoveryOperation, error) {
	if err := ledger.ValidateRecoveryOperation(p); err != nil {
		return ledger.RecoveryOperation{}, err
	}
	op := "start recovery operation " + p.Key
	out := ledger.RecoveryOperation{Key: p.Key}
	err := s.write(ctx, op, func(t *wtx) error {
		res, err := t.stmt(s.rc.opInsert).ExecContext(t.ctx, p.Key, p.SpecHash, p.ObjectUID, nanos(p.Now))
		if err != nil {
			return translate(op, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return translate(op, err)
		}
		out.Created = n == 1
		var started int64
		if err := t.stmt(s.rc.opGet).QueryRowContext(t.ctx, p.Key).Scan(&out.SpecHash, &out.ObjectUID, &started); err != nil {
			return translate(op, err)
		}
		out.StartedAt = fromNanos(started)
		return nil
	})
	if err != nil {
		return ledger.RecoveryOperation{}, err
	}
	return out, nil
}

// RecoveryApply implements ledger.Recovery (ledger.RecoveryApply decides
// and plans the rows).
func (s *Store) RecoveryApply(ctx context.Context, p *ledger.RecoveryApplyParams) (ledger.RecoveryItem, error) {
	return ledger.RecoveryApply(ctx, driver{s}, p)
}

// RecoveryTx implements ledger.RecoveryTransactor: one write transaction,
// which the single writer makes atomic.
func (d driver) RecoveryTx(ctx context.Context, op string, fn func(ledger.RecoveryStatements) error) error {
	return d.writeOp(ctx, op, func(t *wtx) error { return fn(recoveryTx{t}) })
}

// recoveryTx runs ledger.RecoveryStatements in one write transaction.
type recoveryTx struct{ t *wtx }

// RecoveryRead implements ledger.RecoveryStatements.
func (r recoveryTx) RecoveryRead(_ context.Context, p *ledger.RecoveryApplyParams) (ledger.RecoveryRead, error) {
	var rd ledger.RecoveryRead
	got, err := scanItem(r.t.stmt(r.t.s.rc.itemGet).QueryRowContext(r.t.ctx, p.OperationKey, p.DeliveryID))
	switch {
	case err == nil:
		rd.Recorded = &got
		return rd, nil
	case !errors.Is(err, sql.ErrNoRows):
		return rd, translate("read recovery item", err)
	}
	var (
		f              = &rd.Facts
		policy         string
		firstAttempt   sql.NullInt64
		dDest, dFinish = deliveryDest(&f.Delivery)
		eDest, eFinish = eventDest(&f.Event)
	)
	dest := append(append(dDest, eDest...), &policy, &f.EndpointDeleted, &firstAttempt)
	err = r.t.stmt(r.t.s.rc.facts).QueryRowContext(r.t.ctx, p.DeliveryID).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return rd, nil
	}
	if err != nil {
		return rd, translate("read delivery for recovery", err)
	}
	dFinish()
	if err := eFinish(); err != nil {
		return rd, err
	}
	if err := json.Unmarshal([]byte(policy), &f.Policy); err != nil {
		return rd, fmt.Errorf("policy of endpoint %s: %w", f.Delivery.EndpointID, err)
	}
	f.ReplayFrom = ledger.ReplayFrom(fromNullNanos(firstAttempt), f.Event.CreatedAt)
	rd.Found = true
	return rd, nil
}

// LiveEndpoints implements ledger.RecoveryStatements.
func (r recoveryTx) LiveEndpoints(_ context.Context, namespace string) ([]ledger.NamespaceEndpoint, error) {
	subs, err := r.t.s.subscribers(r.t, namespace)
	if err != nil {
		return nil, err
	}
	out := make([]ledger.NamespaceEndpoint, len(subs))
	for i, sub := range subs {
		out[i] = ledger.NamespaceEndpoint{ID: sub.id, EventTypes: sub.patterns}
	}
	return out, nil
}

// RecoveryWrite implements ledger.RecoveryStatements.
func (r recoveryTx) RecoveryWrite(_ context.Context, w *ledger.RecoveryWrite) error {
	s, t, now := r.t.s, r.t, nanos(w.Now)
	if w.Event != nil {
		if err := s.storeEvent(t, *w.Event); err != nil {
			return err
		}
	}
	for _, d := range w.Deliveries {
		if _, err := t.stmt(s.rc.deliveryInsertAs).ExecContext(t.ctx, d.ID, d.EventID, d.EndpointID,
			nanos(d.DueAt), d.RetryOf, d.Resend); err != nil {
			return translate("insert delivery of event "+d.EventID+" to "+d.EndpointID, err)
		}
	}
	if w.Resolution != ledger.ResolutionNone {
		if _, err := s.resolveExec(t, w.Original.ID, w.Resolution, w.Item.OperationKey, w.Now); err != nil {
			return err
		}
	}
	if w.ReplayedEvent != "" {
		if err := s.replayReached(t, w.ReplayedEvent); err != nil {
			return err
		}
	}
	it := &w.Item
	if _, err := t.stmt(s.rc.itemInsert).ExecContext(t.ctx, it.OperationKey, w.ItemKey, it.EventID,
		w.Original.EndpointID, string(it.Action), string(it.Outcome), it.Reason, it.NewEventID, it.NewDeliveryID,
		w.RequestEventID, now); err != nil {
		return translate("record recovery item", err)
	}
	return applyStats(t, s.ws.statsApply, w.Stats)
}

// resolveExec gives the exhausted delivery id resolution res if it is
// still unresolved, and reports whether it did.
func (s *Store) resolveExec(t *wtx, id string, res ledger.Resolution, operation string, now time.Time) (bool, error) {
	r, err := t.stmt(s.rc.resolve).ExecContext(t.ctx, id, string(res), operation, nanos(now))
	if err != nil {
		return false, translate("resolve delivery "+id, err)
	}
	n, err := r.RowsAffected()
	return n == 1, translate("resolve delivery "+id, err)
}

// completeReissues completes the recovery items waiting for a replacement
// of an event that this batch inserted (ReissueOf): each becomes Reissued
// with the first such replacement and its delivery to the item's endpoint,
// and its original delivery is resolved as reissued. Batches without
// ReissueOf cost nothing.
func (s *Store) completeReissues(t *wtx, results []ledger.EventInsertResult, ds ledger.StatsDelta) error {
	originals := ledger.ReissueOriginals(results)
	if len(originals) == 0 {
		return nil
	}
	const op = "complete reissues"
	list, err := json.Marshal(originals)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	rows, err := t.stmt(s.rc.awaitingOf).QueryContext(t.ctx, string(list))
	if err != nil {
		return translate(op, err)
	}
	type waiting struct{ operation, delivery, event, endpoint string }
	var items []waiting
	for rows.Next() {
		var w waiting
		if err := rows.Scan(&w.operation, &w.delivery, &w.event, &w.endpoint); err != nil {
			_ = rows.Close()
			return translate(op, err)
		}
		items = append(items, w)
	}
	if err := rows.Close(); err != nil {
		return translate(op, err)
	}
	for _, w := range items {
		repl, newDelivery := ledger.Replacement(results, w.event, w.endpoint)
		if repl == nil {
			return fmt.Errorf("%s: no replacement of event %s in the batch", op, w.event)
		}
		at := repl.CreatedAt
		if _, err := t.stmt(s.rc.itemComplete).ExecContext(t.ctx, w.operation, w.delivery, repl.ID, newDelivery,
			nanos(at)); err != nil {
			return translate(op, err)
		}
		resolved, err := s.resolveExec(t, w.delivery, ledger.ResolutionReissued, w.operation, at)
		if err != nil {
			return err
		}
		if resolved {
			ds.Move(w.endpoint, ledger.StateExhausted, ledger.ResolutionUnresolved, ledger.StateExhausted, ledger.ResolutionReissued)
		}
	}
	return nil
}

var (
	_ ledger.ExhaustedPager     = driver{}
	_ ledger.RecoveryTransactor = driver{}
	_ ledger.BudgetTransactor   = driver{}
)
