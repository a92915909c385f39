package postgres

import (
	"slices"

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

// preloaded is what a batch of inserts reads before it decides: the live
// endpoints of its namespaces, the stored events holding its idempotency
// keys, with their deliveries, and its namespaces' quotas (locked; nil
// when none has one, quota.go).
type preloaded struct {
	endpoints map[string][]fanoutEndpoint
	stored    map[idemKey]*ledger.EventInsertResult
	quotas    *ledger.QuotaBatch
}

// queuePreload queues on b the reads of a batch of inserts: the endpoints
// of its namespaces (locked FOR KEY SHARE in ID order, so that a
// concurrent EndpointDelete waits for this transaction and then cancels
// the deliveries it creates) and the stored events holding its keys, with
// their deliveries. The returned reads are filled when b's results are
// read; an empty batch queues nothing.
func queuePreload(b *pgx.Batch, params []*ledger.EventInsertParams) *preloaded {
	pre := &preloaded{
		endpoints: make(map[string][]fanoutEndpoint),
		stored:    make(map[idemKey]*ledger.EventInsertResult),
	}
	var namespaces []string
	var keys []idemKey
	for _, p := range params {
		if !slices.Contains(namespaces, p.Namespace) {
			namespaces = append(namespaces, p.Namespace)
		}
		if k, ok := keyOf(p); ok {
			keys = append(keys, k)
		}
	}
	if len(namespaces) > 0 {
		b.Queue(`SELECT id, namespace, event_types, filter, paused OR breaker_open, version FROM endpoints
			WHERE namespace = ANY($1) AND deleted_at IS NULL ORDER BY id FOR KEY SHARE`,
			namespaces).Query(func(rows pgx.Rows) error {
			var ep fanoutEndpoint
			var ns string
			_, err := pgx.ForEachRow(rows, []any{&ep.id, &ns, &ep.eventTypes, &ep.filter, &ep.paused, &ep.version}, func() error {
				pre.endpoints[ns] = append(pre.endpoints[ns], ep)
				return nil
			})
			return err
		})
		// After the endpoints, so that keys read below see what a batch
		// of the same namespace committed while this one waited.
		queueQuotaLocks(b, ledger.Namespaces(params), pre)
	}
	if len(keys) > 0 {
		byID := make(map[string]*ledger.EventInsertResult)
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
				pre.stored[idemKey{e.Namespace, e.IdempotencyKey}] = r
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
	return pre
}
