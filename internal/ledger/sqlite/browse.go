package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// browseEventCols is eventCols without the secrets: Browse never reads them.
var browseEventCols = strings.Replace(prefixed("e", eventCols), "e.secrets,", "NULL,", 1)

// DeliveryBrowse implements ledger.Browser. The query keeps only the
// filters in use. CROSS JOIN makes SQLite walk deliveries in ID order (the
// primary key, or the endpoint/event index that ends in id) and stop after
// one page; left to itself it would read a namespace's every event through
// events_namespace and sort them (a temp B-tree per page).
func (s *Store) DeliveryBrowse(ctx context.Context, p *ledger.DeliveryBrowseParams) ([]ledger.DeliveryView, error) {
	const op = "browse deliveries"
	q, args, err := deliveryBrowseSQL(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []ledger.DeliveryView
	for rows.Next() {
		var v ledger.DeliveryView
		dest, finish := deliveryDest(&v.Delivery)
		dest = append(dest, &v.Namespace, &v.EventType, &v.EndpointOwner, &v.ReplacedByDelivery, &v.ReplacedByEvent, &v.EventTrace.Parent, &v.EventTrace.State)
		if err := rows.Scan(dest...); err != nil {
			return nil, translate(op, err)
		}
		finish()
		out = append(out, v)
	}
	return out, translate(op, rows.Err())
}

// deliveryBrowseSQL builds DeliveryBrowse's query and arguments.
func deliveryBrowseSQL(p *ledger.DeliveryBrowseParams) (string, []any, error) {
	var f filters
	if p.ID != "" {
		f.add("d.id = ?", p.ID)
	}
	if p.Namespace != "" {
		f.add("e.namespace = ?", p.Namespace)
	}
	if p.EndpointID != "" {
		f.add("d.endpoint_id = ?", p.EndpointID)
	}
	if p.EventID != "" {
		f.add("d.event_id = ?", p.EventID)
	}
	if p.EventType != "" {
		f.add("e.type = ?", p.EventType)
	}
	switch {
	case len(p.States) == 1:
		f.add("d.state = ?", string(p.States[0]))
	case len(p.States) > 1:
		b, err := json.Marshal(p.States)
		if err != nil {
			return "", nil, err
		}
		f.add("d.state IN (SELECT value FROM json_each(?))", string(b))
	}
	// The partial indexes' own predicates (migration 0009), implied by the
	// filters above but spelled out: SQLite uses a partial index only for a
	// query whose WHERE clause contains its predicate.
	if p.SelectsFailed() {
		f.conds = append(f.conds, "d.state IN ('exhausted', 'cancelled')")
	}
	if p.Resolution != "" {
		f.add("d.resolution = ?", string(p.Resolution))
		f.conds = append(f.conds, "d.resolution <> ''")
	}
	if p.AfterID != "" {
		f.add("d.id > ?", p.AfterID)
	}
	q := `SELECT ` + prefixed("d", deliveryCols) + `, e.namespace, e.type, COALESCE(ep.owner, ''),
		COALESCE(r.new_delivery_id, ''), COALESCE(r.new_event_id, ''), e.trace_parent, e.trace_state
		FROM deliveries d CROSS JOIN events e ON e.id = d.event_id
		LEFT JOIN endpoints ep ON ep.id = d.endpoint_id
		LEFT JOIN recovery_items r ON r.delivery_id = d.id AND r.outcome IN ('Retried', 'Reissued')`
	q += f.where()
	q += ` ORDER BY d.id LIMIT ?`
	return q, append(f.args, ledger.ListLimit(p.Limit)), nil
}

// EventBrowse implements ledger.Browser.
func (s *Store) EventBrowse(ctx context.Context, p *ledger.EventBrowseParams) ([]ledger.Event, error) {
	const op = "browse events"
	var f filters
	if p.ID != "" {
		f.add("e.id = ?", p.ID)
	}
	if p.Namespace != "" {
		f.add("e.namespace = ?", p.Namespace)
	}
	if p.Type != "" {
		f.add("e.type = ?", p.Type)
	}
	if p.AfterID != "" {
		f.add("e.id > ?", p.AfterID)
	}
	q := `SELECT ` + browseEventCols + ` FROM events e`
	q += f.where()
	q += ` ORDER BY e.id LIMIT ?`
	args := append(f.args, ledger.ListLimit(p.Limit))
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []ledger.Event
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return nil, translate(op, err)
		}
		out = append(out, ev)
	}
	return out, translate(op, rows.Err())
}

// filters gathers a browse query's conditions and their arguments.
type filters struct {
	conds []string
	args  []any
}

func (f *filters) add(sql string, arg any) {
	f.conds = append(f.conds, sql)
	f.args = append(f.args, arg)
}

// where is the query's WHERE clause, or nothing without conditions.
func (f *filters) where() string {
	if len(f.conds) == 0 {
		return ""
	}
	return ` WHERE ` + strings.Join(f.conds, " AND ")
}
