package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// This file implements the replay half of ledger.Recovery: ReplayList's
// pages and ReplayApply's reads (ledger's replay.go runs both); the write
// is RecoveryWrite's.
//
// ReplayRead takes its locks in the global order: the live endpoints of
// the event's namespace (FOR KEY SHARE, as RecoveryRead), the event's
// deliveries to the replay's endpoint (FOR UPDATE: the unresolved one a
// replay resolves, and a concurrent Retry of it queues), then the event
// (FOR NO KEY UPDATE: concurrent replays of one event queue, and a scrub or
// a prune, which lock it FOR UPDATE, cannot change it before the write;
// deliveries referencing it may still be inserted). The deliveries are
// then read again, in a statement of their own, so that one a replay that
// held the event's lock before committed meanwhile is seen as pending.

// replayPageSQL reads one page of a namespace's events in ID order,
// walking events_namespace (00006) within the ID range $2..$3 after $4
// (IDs are lower-case base32 behind one prefix, which every collation
// orders as bytes); $5 and $6 bound created_at, $7 is the page size.
const replayPageSQL = `
	SELECT e.id, e.type, e.created_at FROM events e
	WHERE e.namespace = $1 AND e.id >= $2 AND e.id < $3 AND e.id > $4 AND e.created_at >= $5 AND e.created_at < $6
	ORDER BY e.id
	LIMIT $7`

// ReplayList implements ledger.Recovery (ledger.ReplayList walks the
// pages).
func (s *Store) ReplayList(ctx context.Context, p *ledger.ReplayListParams) ([]ledger.ReplayCandidate, error) {
	return ledger.ReplayList(ctx, driver{s}, p)
}

// ReplayPage implements ledger.ReplayPager.
func (d driver) ReplayPage(ctx context.Context, p *ledger.ReplayPageParams) ([]ledger.ReplayCandidate, error) {
	rows, err := d.pool.Query(ctx, replayPageSQL, p.Namespace, p.FromID, p.ToID, p.AfterID, p.Since, p.Until, p.Limit)
	if err != nil {
		return nil, translate("read page", err)
	}
	var (
		out     []ledger.ReplayCandidate
		c       ledger.ReplayCandidate
		created int64
	)
	_, err = pgx.ForEachRow(rows, []any{&c.EventID, &c.Type, &created}, func() error {
		c.CreatedAt = fromNanos(created)
		out = append(out, c)
		return nil
	})
	return out, translate("read page", err)
}

// ReplayApply implements ledger.Recovery (ledger.ReplayApply decides and
// plans the rows). One transaction, two round trips: BEGIN, lock and read
// (ReplayRead), then write and COMMIT (RecoveryWrite).
func (s *Store) ReplayApply(ctx context.Context, p *ledger.ReplayApplyParams) (ledger.RecoveryItem, error) {
	return ledger.ReplayApply(ctx, driver{s}, p)
}

// ReplayTx implements ledger.ReplayTransactor.
func (d driver) ReplayTx(ctx context.Context, op string, fn func(ledger.ReplayStatements) error) error {
	return d.tx(ctx, op, func(tx *txn) error { return fn(&recoveryTx{tx: tx}) })
}

// ReplayRead implements ledger.ReplayStatements (see the file comment for
// its locks).
func (r *recoveryTx) ReplayRead(ctx context.Context, p *ledger.ReplayApplyParams) (ledger.ReplayRead, error) {
	var rd ledger.ReplayRead
	r.live = nil
	f := &rd.Facts
	f.EndpointID = p.EndpointID
	endpointFound := false
	var ds []ledger.Delivery
	b := &pgx.Batch{}
	b.Queue(`
		SELECT id, event_types FROM endpoints
		WHERE namespace = (SELECT namespace FROM events WHERE id = $1) AND deleted_at IS NULL
		ORDER BY id FOR KEY SHARE`, p.EventID).Query(func(rows pgx.Rows) error {
		var ep ledger.NamespaceEndpoint
		_, err := pgx.ForEachRow(rows, []any{&ep.ID, &ep.EventTypes}, func() error {
			r.live = append(r.live, ep)
			return nil
		})
		return err
	})
	b.Queue(`SELECT policy FROM endpoints WHERE id = $1 AND deleted_at IS NULL`, p.EndpointID).Query(func(rows pgx.Rows) error {
		var policy []byte
		_, err := pgx.ForEachRow(rows, []any{&policy}, func() error {
			endpointFound = true
			if err := json.Unmarshal(policy, &f.Policy); err != nil {
				return fmt.Errorf("endpoint %s: decode policy: %w", p.EndpointID, err)
			}
			return nil
		})
		return err
	})
	deliveriesTo := `SELECT ` + deliveryColumns + ` FROM deliveries d WHERE d.event_id = $1 AND d.endpoint_id = $2 ORDER BY d.id`
	b.Queue(deliveriesTo+` FOR UPDATE`, p.EventID, p.EndpointID)
	b.Queue(`
		SELECT `+eventColumns+`, (SELECT min(x.first_attempt_at) FROM deliveries x WHERE x.event_id = e.id)`+eventFrom+`
		WHERE e.id = $1
		FOR NO KEY UPDATE OF e`, p.EventID).Query(func(rows pgx.Rows) error {
		var (
			er           eventRow
			firstAttempt *int64
		)
		_, err := pgx.ForEachRow(rows, append(er.dests(), &firstAttempt), func() error {
			ev, err := er.value()
			if err != nil {
				return err
			}
			rd.Found, f.Event = true, ev
			f.ReplayFrom = ledger.ReplayFrom(fromNullNanos(firstAttempt), ev.CreatedAt)
			return nil
		})
		return err
	})
	b.Queue(deliveriesTo, p.EventID, p.EndpointID).Query(func(rows pgx.Rows) error {
		var dr deliveryRow
		_, err := pgx.ForEachRow(rows, dr.dests(), func() error {
			ds = append(ds, dr.value())
			return nil
		})
		return err
	})
	b.Queue(`SELECT `+itemColumns+itemFrom+` WHERE ri.operation_key = $1 AND ri.delivery_id = $2`,
		p.OperationKey, ledger.ReplayItemKey(p.EventID)).Query(func(rows pgx.Rows) error {
		items, err := pgx.CollectRows(rows, scanItem)
		if len(items) > 0 {
			rd.Recorded = &items[0]
		}
		return err
	})
	if err := r.tx.SendBatch(ctx, b).Close(); err != nil {
		return rd, fmt.Errorf("read event for replay: %w", err)
	}
	f.EndpointDeleted = !endpointFound
	f.Pending, f.Unresolved = ledger.ReplayTarget(ds)
	return rd, nil
}

var (
	_ ledger.ReplayPager      = driver{}
	_ ledger.ReplayTransactor = driver{}
)
