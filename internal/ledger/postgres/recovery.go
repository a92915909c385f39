package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// This file implements ledger.Recovery: retry budgets (buckets counted by
// AttemptRecordMany and spent by RetryBudgetAcquire) and recovery
// operations, whose items are recorded in recovery_items so that applying
// one twice changes nothing.
//
// Locks follow the store's global order: endpoints (FOR KEY SHARE), then
// deliveries, then recovery items and retry budgets, then endpoint_stats.
// (Completing reissues locks the waiting items before their deliveries;
// RecoveryApply only inserts items, so it never waits for one.)

var _ ledger.Recovery = (*Store)(nil)

// budgetAcquireSQL takes one retry: the check and the spend are one
// statement, and ON CONFLICT DO UPDATE evaluates its WHERE on the latest
// version of the row it locked, so processes sharing the ledger cannot
// spend the same allowance. A row comes back only when a retry was taken
// (or, from the insert, with 0 retries when the floor allows none).
// $5 is the milliseconds into the minute (the pace: ledger.NextRetryAt).
const budgetAcquireSQL = `
	INSERT INTO retry_budgets AS b (endpoint_id, minute, retries)
	VALUES ($1, $2, CASE WHEN $4::bigint > 0 THEN 1 ELSE 0 END)
	ON CONFLICT (endpoint_id, minute) DO UPDATE SET retries = b.retries + 1
		WHERE b.retries < b.first_attempts * $3::bigint / 100 + $4::bigint
			AND b.retries * 60000 <= $5::bigint * (b.first_attempts * $3::bigint / 100 + $4::bigint)
	RETURNING b.retries`

// budgetPruneSQL deletes an endpoint's buckets older than $2, skipping
// any a concurrent transaction holds (a later call gets them).
const budgetPruneSQL = `
	DELETE FROM retry_budgets WHERE (endpoint_id, minute) IN (
		SELECT endpoint_id, minute FROM retry_budgets WHERE endpoint_id = $1 AND minute < $2
		FOR UPDATE SKIP LOCKED)`

// RetryBudgetAcquire implements ledger.Recovery (ledger.RetryBudgetAcquire
// runs the transaction).
func (s *Store) RetryBudgetAcquire(ctx context.Context, p *ledger.RetryBudgetParams) (ledger.RetryBudgetAnswer, error) {
	return ledger.RetryBudgetAcquire(ctx, driver{s}, p)
}

// RetryBudgetTx implements ledger.BudgetTransactor.
func (d driver) RetryBudgetTx(ctx context.Context, op string, fn func(ledger.BudgetStatements) error) error {
	return d.tx(ctx, op, func(tx *txn) error { return fn(budgetTx{tx}) })
}

// budgetTx runs ledger.BudgetStatements in one transaction.
type budgetTx struct{ tx *txn }

// RetryBudgetTake implements ledger.BudgetStatements.
func (b budgetTx) RetryBudgetTake(ctx context.Context, p *ledger.RetryBudgetParams, minute, elapsedMillis int64) (int64, bool, error) {
	var retries int64
	err := b.tx.QueryRow(ctx, budgetAcquireSQL, p.EndpointID, minute,
		int64(p.Budget.RatioPercent), int64(p.Budget.MinPerMinute), elapsedMillis).Scan(&retries)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil // spent
	}
	return retries, err == nil, err
}

// RetryBudgetRead implements ledger.BudgetStatements.
func (b budgetTx) RetryBudgetRead(ctx context.Context, endpointID string, minute int64) (firsts, retries int64, err error) {
	err = b.tx.QueryRow(ctx, `SELECT first_attempts, retries FROM retry_budgets WHERE endpoint_id = $1 AND minute = $2`,
		endpointID, minute).Scan(&firsts, &retries)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, nil
	}
	return firsts, retries, err
}

// RetryBudgetPrune implements ledger.BudgetStatements.
func (b budgetTx) RetryBudgetPrune(ctx context.Context, endpointID string, before int64) error {
	_, err := b.tx.Exec(ctx, budgetPruneSQL, endpointID, before)
	return err
}

// queueFirstAttempts adds to b the statement that adds a transaction's
// first attempts to their budget buckets (one statement, rows in key
// order).
func queueFirstAttempts(b *pgx.Batch, fa ledger.FirstAttempts) {
	buckets := fa.Buckets()
	if len(buckets) == 0 {
		return
	}
	endpoints, minutes, counts := make([]string, len(buckets)), make([]int64, len(buckets)), make([]int64, len(buckets))
	for i, k := range buckets {
		endpoints[i], minutes[i], counts[i] = k.EndpointID, k.Minute, k.Count
	}
	b.Queue(`
		INSERT INTO retry_budgets AS b (endpoint_id, minute, first_attempts)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS u(endpoint_id, minute, n)
		ORDER BY u.endpoint_id, u.minute
		ON CONFLICT (endpoint_id, minute) DO UPDATE SET first_attempts = b.first_attempts + EXCLUDED.first_attempts`,
		endpoints, minutes, counts)
}

// exhaustedPageSQL reads one page of an endpoint's unresolved exhausted
// deliveries after the keyset ($4, $5), oldest first, walking
// deliveries_exhausted (00010). $2 and $3 bound terminal_at; $6 and $7 filter by
// delivery and event IDs (NULL: no filter); $8 is the page size.
const exhaustedPageSQL = `
	SELECT ` + deliveryColumns + `, e.type, e.secret_names,
		EXISTS (SELECT 1 FROM event_secrets sec WHERE sec.event_id = e.id),
		e.data IS NULL OR e.payload_pruned_at IS NOT NULL, e.created_at,
		(SELECT min(x.first_attempt_at) FROM deliveries x WHERE x.event_id = d.event_id),
		e.replay_class, e.valid_until, (e.policy_override->>'replayWindow')::bigint
	FROM deliveries d JOIN events e ON e.id = d.event_id
	WHERE d.endpoint_id = $1 AND d.resolution = 'unresolved' AND d.state = 'exhausted'
		AND d.terminal_at >= $2 AND d.terminal_at < $3 AND (d.terminal_at, d.id) > ($4, $5)
		AND ($6::text[] IS NULL OR d.id = ANY($6)) AND ($7::text[] IS NULL OR d.event_id = ANY($7))
	ORDER BY d.terminal_at, d.id
	LIMIT $8`

// ExhaustedList implements ledger.Recovery (ledger.ExhaustedList walks
// the pages).
func (s *Store) ExhaustedList(ctx context.Context, p *ledger.ExhaustedListParams) ([]ledger.ExhaustedDelivery, error) {
	return ledger.ExhaustedList(ctx, driver{s}, p)
}

// ExhaustedPage implements ledger.ExhaustedPager.
func (d driver) ExhaustedPage(ctx context.Context, p *ledger.ExhaustedPageParams) ([]ledger.ExhaustedDelivery, error) {
	var ids, events []string // NULL: no filter
	if len(p.DeliveryIDs) > 0 {
		ids = p.DeliveryIDs
	}
	if len(p.EventIDs) > 0 {
		events = p.EventIDs
	}
	from, to, afterAt, afterID := p.UnixNanoBounds()
	rows, err := d.pool.Query(ctx, exhaustedPageSQL, p.EndpointID, from, to, afterAt, afterID, ids, events, p.Limit)
	if err != nil {
		return nil, translate("read page", err)
	}
	var (
		out                []ledger.ExhaustedDelivery
		r                  deliveryRow
		typ                string
		names              []byte
		hasSecrets, pruned bool
		created            int64
		firstAttempt       *int64
		class              string
		validUntil, window *int64
	)
	_, err = pgx.ForEachRow(rows, append(r.dests(), &typ, &names, &hasSecrets, &pruned, &created, &firstAttempt, &class, &validUntil, &window), func() error {
		dv := r.value()
		var secretNames []string
		if err := json.Unmarshal(names, &secretNames); err != nil {
			return fmt.Errorf("secret names of event %s: %w", dv.EventID, err)
		}
		replayFrom := ledger.ReplayFrom(fromNullNanos(firstAttempt), fromNanos(created))
		ed := ledger.NewExhaustedDelivery(dv, typ, secretNames, hasSecrets, pruned, replayFrom)
		ed.ReplayClass, ed.ValidUntil = ledger.ReplayClass(class), fromNullNanos(validUntil)
		if window != nil {
			ed.OverrideReplayWindow = time.Duration(*window)
		}
		out = append(out, ed)
		return nil
	})
	return out, translate("read page", err)
}

// itemColumns lists a recovery item as itemRow scans it, with the state of
// the delivery it created (alias ri, and nd left-joined by itemFrom).
const itemColumns = `ri.operation_key, ri.delivery_id, ri.event_id, ri.action, ri.outcome, ri.reason,
	ri.new_event_id, ri.new_delivery_id, ri.created_at, coalesce(nd.state, '')`

const itemFrom = ` FROM recovery_items ri LEFT JOIN deliveries nd ON nd.id = ri.new_delivery_id AND ri.new_delivery_id <> ''`

func scanItem(row pgx.CollectableRow) (ledger.RecoveryItem, error) {
	var (
		it                       ledger.RecoveryItem
		action, outcome, ndState string
		created                  int64
	)
	if err := row.Scan(&it.OperationKey, &it.DeliveryID, &it.EventID, &action, &outcome, &it.Reason,
		&it.NewEventID, &it.NewDeliveryID, &created, &ndState); err != nil {
		return ledger.RecoveryItem{}, err
	}
	it.Action, it.Outcome, it.NewDeliveryState = ledger.RecoveryAction(action), ledger.RecoveryOutcome(outcome), ledger.DeliveryState(ndState)
	it.DeliveryID = ledger.ItemDeliveryID(it.Action, it.DeliveryID)
	it.CreatedAt = fromNanos(created)
	return it, nil
}

// RecoveryItemsList implements ledger.Recovery: the items in the order
// they were applied. An unknown operation has none.
func (s *Store) RecoveryItemsList(ctx context.Context, operationKey string) ([]ledger.RecoveryItem, error) {
	op := "list recovery items of " + operationKey
	rows, err := s.pool.Query(ctx, `SELECT `+itemColumns+itemFrom+` WHERE ri.operation_key = $1 ORDER BY ri.seq`, operationKey)
	if err != nil {
		return nil, translate(op, err)
	}
	items, err := pgx.CollectRows(rows, scanItem)
	return items, translate(op, err)
}

// RecoveryOperationStart implements ledger.Recovery: insert unless
// present, then read in a statement of its own, which under read committed
// sees a record that a concurrent first start committed meanwhile.
func (s *Store) RecoveryOperationStart(ctx context.Context, p *ledger.RecoveryOperationParams) (ledger.RecoveryOperation, error) {
	if err := ledger.ValidateRecoveryOperation(p); err != nil {
		return ledger.RecoveryOperation{}, err
	}
	op := "start recovery operation " + p.Key
	tag, err := s.pool.Exec(ctx, `INSERT INTO recovery_operations (operation_key, spec_hash, object_uid, started_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (operation_key) DO NOTHING`, p.Key, p.SpecHash, p.ObjectUID, nanos(p.Now))
	if err != nil {
		return ledger.RecoveryOperation{}, translate(op, err)
	}
	out := ledger.RecoveryOperation{Key: p.Key, Created: tag.RowsAffected() == 1}
	var started int64
	if err := s.pool.QueryRow(ctx, `SELECT spec_hash, object_uid, started_at FROM recovery_operations WHERE operation_key = $1`,
		p.Key).Scan(&out.SpecHash, &out.ObjectUID, &started); err != nil {
		return ledger.RecoveryOperation{}, translate(op, err)
	}
	out.StartedAt = fromNanos(started)
	return out, nil
}

// RecoveryApply implements ledger.Recovery (ledger.RecoveryApply decides
// and plans the rows). One transaction, two round trips: BEGIN, lock and
// read (RecoveryRead), then write and COMMIT (RecoveryWrite).
func (s *Store) RecoveryApply(ctx context.Context, p *ledger.RecoveryApplyParams) (ledger.RecoveryItem, error) {
	return ledger.RecoveryApply(ctx, driver{s}, p)
}

// RecoveryTx implements ledger.RecoveryTransactor.
func (d driver) RecoveryTx(ctx context.Context, op string, fn func(ledger.RecoveryStatements) error) error {
	return d.tx(ctx, op, func(tx *txn) error { return fn(&recoveryTx{tx: tx}) })
}

// recoveryTx runs ledger.RecoveryStatements in one transaction; the live
// endpoints of the delivery's namespace ride with the first round trip.
type recoveryTx struct {
	tx   *txn
	live []ledger.NamespaceEndpoint
}

// LiveEndpoints implements ledger.RecoveryStatements: the endpoints that
// RecoveryRead locked.
func (r *recoveryTx) LiveEndpoints(context.Context, string) ([]ledger.NamespaceEndpoint, error) {
	return r.live, nil
}

// RecoveryWrite implements ledger.RecoveryStatements: the writes are
// queued to ride with COMMIT.
func (r *recoveryTx) RecoveryWrite(_ context.Context, w *ledger.RecoveryWrite) error {
	b, now := &pgx.Batch{}, nanos(w.Now)
	if w.Event != nil {
		var events eventBatch
		if err := events.add(*w.Event, w.Deliveries); err != nil {
			return err
		}
		b.Queue(insertEventsSQL, events.args()...)
	} else {
		for _, d := range w.Deliveries {
			b.Queue(`
				INSERT INTO deliveries (id, event_id, endpoint_id, state, attempts, due_at, lease_owner,
					last_status, last_error, exhaust_reason, resolution, created_at, retry_of, resend, valid_until)
				VALUES ($1, $2, $3, 'scheduled', 0, $4, '', 0, '', '', '', $4, $5, $6,
					(SELECT valid_until FROM events WHERE id = $2))`,
				d.ID, d.EventID, d.EndpointID, nanos(d.DueAt), d.RetryOf, d.Resend)
		}
	}
	if w.Resolution != ledger.ResolutionNone {
		// The delivery is locked and was checked: this updates it.
		b.Queue(`UPDATE deliveries SET resolution = $2, resolved_by = $3, resolved_at = $4
			WHERE id = $1 AND state = 'exhausted' AND resolution = 'unresolved'`,
			w.Original.ID, string(w.Resolution), w.Item.OperationKey, now)
	}
	if w.ReplayedEvent != "" {
		// ReplayRead locked the event.
		b.Queue(`UPDATE events SET undelivered = false WHERE id = $1 AND undelivered`, w.ReplayedEvent)
	}
	it := &w.Item
	b.Queue(`
		INSERT INTO recovery_items (operation_key, delivery_id, event_id, endpoint_id, action, outcome, reason,
			new_event_id, new_delivery_id, request_event_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		it.OperationKey, w.ItemKey, it.EventID, w.Original.EndpointID, string(it.Action), string(it.Outcome),
		it.Reason, it.NewEventID, it.NewDeliveryID, w.RequestEventID, now)
	queueStats(b, w.Stats)
	r.tx.queue("apply recovery", b) // with COMMIT
	return nil
}

// RecoveryRead implements ledger.RecoveryStatements. It locks, in the
// global order, the live endpoints of the delivery's namespace (FOR KEY
// SHARE: none is deleted under the transaction, so a reissue request's
// fan-out and a retry's target stay valid), the delivery (FOR UPDATE:
// concurrent recoveries of it queue) and its event (FOR SHARE: a scrub,
// which locks it FOR UPDATE, cannot remove the secrets between this check
// and the retry it allows), then reads the item recorded for (operation,
// delivery), which a recovery that held the lock before may have just
// committed.
func (r *recoveryTx) RecoveryRead(ctx context.Context, p *ledger.RecoveryApplyParams) (ledger.RecoveryRead, error) {
	var rd ledger.RecoveryRead
	r.live = nil
	f := &rd.Facts
	b := &pgx.Batch{}
	b.Queue(`
		SELECT id, event_types FROM endpoints
		WHERE namespace = (SELECT e.namespace FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.id = $1)
			AND deleted_at IS NULL
		ORDER BY id FOR KEY SHARE`, p.DeliveryID).Query(func(rows pgx.Rows) error {
		var ep ledger.NamespaceEndpoint
		_, err := pgx.ForEachRow(rows, []any{&ep.ID, &ep.EventTypes}, func() error {
			r.live = append(r.live, ep)
			return nil
		})
		return err
	})
	b.Queue(`
		SELECT `+deliveryColumns+`, `+eventColumns+`, ep.policy, ep.deleted_at IS NOT NULL,
			(SELECT min(x.first_attempt_at) FROM deliveries x WHERE x.event_id = d.event_id)
		FROM deliveries d JOIN events e ON e.id = d.event_id
			LEFT JOIN event_secrets sec ON sec.event_id = e.id
			JOIN endpoints ep ON ep.id = d.endpoint_id
		WHERE d.id = $1
		FOR UPDATE OF d FOR SHARE OF e`, p.DeliveryID).Query(func(rows pgx.Rows) error {
		var (
			dr           deliveryRow
			er           eventRow
			policy       []byte
			firstAttempt *int64
		)
		_, err := pgx.ForEachRow(rows, append(append(dr.dests(), er.dests()...), &policy, &f.EndpointDeleted, &firstAttempt), func() error {
			rd.Found = true
			f.Delivery = dr.value()
			ev, err := er.value()
			if err != nil {
				return err
			}
			f.Event = ev
			if err := json.Unmarshal(policy, &f.Policy); err != nil {
				return fmt.Errorf("endpoint %s: decode policy: %w", f.Delivery.EndpointID, err)
			}
			f.ReplayFrom = ledger.ReplayFrom(fromNullNanos(firstAttempt), ev.CreatedAt)
			return nil
		})
		return err
	})
	b.Queue(`SELECT `+itemColumns+itemFrom+` WHERE ri.operation_key = $1 AND ri.delivery_id = $2`,
		p.OperationKey, p.DeliveryID).Query(func(rows pgx.Rows) error {
		items, err := pgx.CollectRows(rows, scanItem)
		if len(items) > 0 {
			rd.Recorded = &items[0]
		}
		return err
	})
	if err := r.tx.SendBatch(ctx, b).Close(); err != nil {
		return rd, fmt.Errorf("read delivery for recovery: %w", err)
	}
	return rd, nil
}

// completeReissues completes the recovery items waiting for a replacement
// of an event that this batch inserted (ReissueOf): each becomes Reissued
// with the first such replacement and its delivery to the item's endpoint,
// and its original delivery is resolved as reissued. Batches without
// ReissueOf cost nothing; with some, two round trips.
func completeReissues(ctx context.Context, tx pgx.Tx, results []ledger.EventInsertResult, delta ledger.StatsDelta) error {
	originals := ledger.ReissueOriginals(results)
	if len(originals) == 0 {
		return nil
	}
	// Lock the waiting items in key order; an item a concurrent batch
	// completed meanwhile drops out (READ COMMITTED re-checks the row).
	rows, err := tx.Query(ctx, `
		SELECT operation_key, delivery_id, event_id, endpoint_id, seq FROM recovery_items
		WHERE outcome = 'AwaitingReissue' AND event_id = ANY($1)
		ORDER BY operation_key, delivery_id
		FOR UPDATE`, originals)
	if err != nil {
		return fmt.Errorf("complete reissues: %w", err)
	}
	type waiting struct {
		operation, delivery, event, endpoint string
		seq                                  int64
	}
	var items []waiting
	var w waiting
	if _, err := pgx.ForEachRow(rows, []any{&w.operation, &w.delivery, &w.event, &w.endpoint, &w.seq}, func() error {
		items = append(items, w)
		return nil
	}); err != nil {
		return fmt.Errorf("complete reissues: %w", err)
	}
	if len(items) == 0 {
		return nil
	}
	n := len(items)
	ops, dlvs, newEvents, newDeliveries, ats := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
	// The original delivery of several items (operations) is resolved by
	// the earliest one.
	resolver := map[string]int{} // delivery → index in items
	for i, w := range items {
		repl, newDelivery := ledger.Replacement(results, w.event, w.endpoint)
		if repl == nil {
			return fmt.Errorf("complete reissues: no replacement of event %s in the batch", w.event)
		}
		ops[i], dlvs[i], newEvents[i], newDeliveries[i], ats[i] = w.operation, w.delivery, repl.ID, newDelivery, nanos(repl.CreatedAt)
		if k, ok := resolver[w.delivery]; !ok || w.seq < items[k].seq {
			resolver[w.delivery] = i
		}
	}
	resolveIDs := make([]string, 0, len(resolver))
	for id := range resolver {
		resolveIDs = append(resolveIDs, id)
	}
	slices.Sort(resolveIDs)
	resolveOps, resolveAts := make([]string, len(resolveIDs)), make([]int64, len(resolveIDs))
	for i, id := range resolveIDs {
		resolveOps[i], resolveAts[i] = ops[resolver[id]], ats[resolver[id]]
	}

	b := &pgx.Batch{}
	b.Queue(`
		UPDATE recovery_items ri SET outcome = 'Reissued', new_event_id = u.new_event_id,
			new_delivery_id = u.new_delivery_id, completed_at = u.at
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[])
			AS u(operation_key, delivery_id, new_event_id, new_delivery_id, at)
		WHERE ri.operation_key = u.operation_key AND ri.delivery_id = u.delivery_id AND ri.outcome = 'AwaitingReissue'`,
		ops, dlvs, newEvents, newDeliveries, ats)
	b.Queue(`SELECT 1 FROM deliveries WHERE id = ANY($1) ORDER BY id FOR UPDATE`, resolveIDs)
	b.Queue(`
		UPDATE deliveries d SET resolution = 'reissued', resolved_by = u.operation_key, resolved_at = u.at
		FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(id, operation_key, at)
		WHERE d.id = u.id AND d.state = 'exhausted' AND d.resolution = 'unresolved'
		RETURNING d.endpoint_id`, resolveIDs, resolveOps, resolveAts).Query(func(rows pgx.Rows) error {
		var endpoint string
		_, err := pgx.ForEachRow(rows, []any{&endpoint}, func() error {
			delta.Move(endpoint, ledger.StateExhausted, ledger.ResolutionUnresolved, ledger.StateExhausted, ledger.ResolutionReissued)
			return nil
		})
		return err
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("complete reissues: %w", err)
	}
	return nil
}

var (
	_ ledger.ExhaustedPager     = driver{}
	_ ledger.RecoveryTransactor = driver{}
	_ ledger.BudgetTransactor   = driver{}
)
