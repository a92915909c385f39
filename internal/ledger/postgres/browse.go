package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// browseEventColumns is eventColumns without the secrets: Browse never
// reads them.
var browseEventColumns = strings.Replace(eventColumns, "sec.value", "NULL::bytea", 1)

// browseWhere collects the conditions of a Browse query.
type browseWhere struct {
	where []string
	args  []any
}

func (b *browseWhere) add(sql string, arg any) {
	b.args = append(b.args, arg)
	b.where = append(b.where, fmt.Sprintf(sql, len(b.args)))
}

// finish appends the WHERE clause, the order and the limit to q.
func (b *browseWhere) finish(q, order string, limit int) string {
	if len(b.where) > 0 {
		q += ` WHERE ` + strings.Join(b.where, " AND ")
	}
	b.args = append(b.args, ledger.ListLimit(limit))
	return q + fmt.Sprintf(` ORDER BY %s LIMIT $%d`, order, len(b.args))
}

// DeliveryBrowse implements ledger.Browser.
func (s *Store) DeliveryBrowse(ctx context.Context, p *ledger.DeliveryBrowseParams) ([]ledger.DeliveryView, error) {
	const op = "browse deliveries"
	var w browseWhere
	if p.ID != "" {
		w.add("d.id = $%d", p.ID)
	}
	if p.Namespace != "" {
		w.add("e.namespace = $%d", p.Namespace)
	}
	if p.EndpointID != "" {
		w.add("d.endpoint_id = $%d", p.EndpointID)
	}
	if p.EventID != "" {
		w.add("d.event_id = $%d", p.EventID)
	}
	if p.EventType != "" {
		w.add("e.type = $%d", p.EventType)
	}
	if len(p.States) > 0 {
		states := make([]string, len(p.States))
		for i, st := range p.States {
			states[i] = string(st)
		}
		w.add("d.state = ANY($%d)", states)
	}
	// The partial indexes' own predicates (migration 00009), implied by the
	// filters above but spelled out, so that a generic plan of the prepared
	// statement can use them too.
	if p.SelectsFailed() {
		w.where = append(w.where, "d.state IN ('exhausted', 'cancelled')")
	}
	if p.Resolution != "" {
		w.add("d.resolution = $%d", string(p.Resolution))
		w.where = append(w.where, "d.resolution <> ''")
	}
	if p.AfterID != "" {
		w.add("d.id > $%d", p.AfterID)
	}
	q := w.finish(`SELECT `+deliveryColumns+`, e.namespace, e.type, COALESCE(ep.owner, ''),
		COALESCE(r.new_delivery_id, ''), COALESCE(r.new_event_id, ''), e.trace_parent, e.trace_state
		FROM deliveries d JOIN events e ON e.id = d.event_id
		LEFT JOIN endpoints ep ON ep.id = d.endpoint_id
		LEFT JOIN recovery_items r ON r.delivery_id = d.id AND r.outcome IN ('Retried', 'Reissued')`, "d.id", p.Limit)
	rows, err := s.pool.Query(ctx, q, w.args...)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.DeliveryView, error) {
		var (
			r deliveryRow
			v ledger.DeliveryView
		)
		dest := append(r.dests(), &v.Namespace, &v.EventType, &v.EndpointOwner, &v.ReplacedByDelivery, &v.ReplacedByEvent, &v.EventTrace.Parent, &v.EventTrace.State)
		if err := row.Scan(dest...); err != nil {
			return v, err
		}
		v.Delivery = r.value()
		return v, nil
	})
	return out, translate(op, err)
}

// EventBrowse implements ledger.Browser.
func (s *Store) EventBrowse(ctx context.Context, p *ledger.EventBrowseParams) ([]ledger.Event, error) {
	const op = "browse events"
	var w browseWhere
	if p.ID != "" {
		w.add("e.id = $%d", p.ID)
	}
	if p.Namespace != "" {
		w.add("e.namespace = $%d", p.Namespace)
	}
	if p.Type != "" {
		w.add("e.type = $%d", p.Type)
	}
	if p.AfterID != "" {
		w.add("e.id > $%d", p.AfterID)
	}
	q := w.finish(`SELECT `+browseEventColumns+` FROM events e`, "e.id", p.Limit)
	rows, err := s.pool.Query(ctx, q, w.args...)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, scanEvent)
	return out, translate(op, err)
}
