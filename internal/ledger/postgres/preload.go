package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// fanoutEndpoint is what fan-out needs to know of an endpoint.
type fanoutEndpoint struct {
	id         string
	eventTypes []string
	filter     string
	paused     bool
	version    int64
}

// byKeys selects the events holding the idempotency keys $1 (namespaces)
// and $2 (keys). It repeats the predicate of the partial index
// events_idempotency word for word: without it the planner may not use the
// index and scans every event, so that ingest slows with the ledger's size.
const byKeys = `(e.namespace, e.idempotency_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))
	AND e.idempotency_key <> ''`

// eventsByKeySQL reads the events holding keys; deliveriesByKeySQL their
// deliveries.
const (
	eventsByKeySQL     = `SELECT ` + eventColumns + eventFrom + ` WHERE ` + byKeys
	deliveriesByKeySQL = `SELECT ` + deliveryColumns + ` FROM deliveries d JOIN events e ON e.id = d.event_id
		WHERE ` + byKeys + ` ORDER BY d.id`
)

// preload reads, in one round trip, the endpoints of namespaces (locked
// FOR KEY SHARE in ID order, so that a concurrent EndpointDelete waits
// for this transaction and then cancels the deliveries it creates) and the
// stored events holding keys, with their deliveries.
func preload(ctx context.Context, tx pgx.Tx, namespaces []string, keys []idemKey) (map[string][]fanoutEndpoint, map[idemKey]*ledger.EventInsertResult, error) {
	endpoints := make(map[string][]fanoutEndpoint)
	stored := make(map[idemKey]*ledger.EventInsertResult)
	byID := make(map[string]*ledger.EventInsertResult)
	b := &pgx.Batch{}
	if len(namespaces) > 0 {
		b.Queue(`SELECT id, namespace, event_types, filter, paused OR breaker_open, version FROM endpoints
			WHERE namespace = ANY($1) AND deleted_at IS NULL ORDER BY id FOR KEY SHARE`,
			namespaces).Query(func(rows pgx.Rows) error {
			var ep fanoutEndpoint
			var ns string
			_, err := pgx.ForEachRow(rows, []any{&ep.id, &ns, &ep.eventTypes, &ep.filter, &ep.paused, &ep.version}, func() error {
				endpoints[ns] = append(endpoints[ns], ep)
				return nil
			})
			return err
		})
	}
	if len(keys) > 0 {
		nss, ks := make([]string, len(keys)), make([]string, len(keys))
		for i, k := range keys {
			nss[i], ks[i] = k.namespace, k.key
		}
		b.Queue(eventsByKeySQL, nss, ks).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				e, err := scanEvent(rows)
				if err != nil {
					return err
				}
				r := &ledger.EventInsertResult{Event: e, Duplicate: true}
				stored[idemKey{e.Namespace, e.IdempotencyKey}] = r
				byID[e.ID] = r
			}
			return rows.Err()
		})
		b.Queue(deliveriesByKeySQL, nss, ks).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				d, err := scanDelivery(rows)
				if err != nil {
					return err
				}
				// An event committed between the two reads has no entry:
				// its key looked free, so the insert fails on it and the
				// transaction runs again (eventBatch.queue).
				if r := byID[d.EventID]; r != nil {
					r.Deliveries = append(r.Deliveries, d)
				}
			}
			return rows.Err()
		})
	}
	if b.Len() == 0 {
		return endpoints, stored, nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, fmt.Errorf("read endpoints and idempotency keys: %w", err)
	}
	return endpoints, stored, nil
}
