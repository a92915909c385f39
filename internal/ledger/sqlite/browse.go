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
		dest = append(dest, &v.Namespace, &v.EventType, &v.ReplacedByDelivery, &v.ReplacedByEvent)
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
	var (
		where []string
		args  []any
	)
	cond := func(sql string, arg any) {
		where = append(where, sql)
		args = append(args, arg)
	}
	if p.ID != "" {
		cond("d.id = ?", p.ID)
	}
	if p.Namespace != "" {
		cond("e.namespace = ?", p.Namespace)
	}
	if p.EndpointID != "" {
		cond("d.endpoint_id = ?", p.EndpointID)
	}
	if p.EventID != "" {
		cond("d.event_id = ?", p.EventID)
	}
	if p.EventType != "" {
		cond("e.type = ?", p.EventType)
	}
	if len(p.States) > 0 {
		b, err := json.Marshal(p.States)
		if err != nil {
			return "", nil, err
		}
		cond("d.state IN (SELECT value FROM json_each(?))", string(b))
	}
	if p.Resolution != "" {
		cond("d.resolution = ?", string(p.Resolution))
	}
	if p.AfterID != "" {
		cond("d.id > ?", p.AfterID)
	}
	q := `SELECT ` + prefixed("d", deliveryCols) + `, e.namespace, e.type,
		COALESCE(r.new_delivery_id, ''), COALESCE(r.new_event_id, '')
		FROM deliveries d CROSS JOIN events e ON e.id = d.event_id
		LEFT JOIN recovery_items r ON r.delivery_id = d.id AND r.outcome IN ('Retried', 'Reissued')`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY d.id LIMIT ?`
	args = append(args, ledger.ListLimit(p.Limit))
	return q, args, nil
}

// EventBrowse implements ledger.Browser.
func (s *Store) EventBrowse(ctx context.Context, p *ledger.EventBrowseParams) ([]ledger.Event, error) {
	const op = "browse events"
	var (
		where []string
		args  []any
	)
	cond := func(sql string, arg any) {
		where = append(where, sql)
		args = append(args, arg)
	}
	if p.ID != "" {
		cond("e.id = ?", p.ID)
	}
	if p.Namespace != "" {
		cond("e.namespace = ?", p.Namespace)
	}
	if p.Type != "" {
		cond("e.type = ?", p.Type)
	}
	if p.AfterID != "" {
		cond("e.id > ?", p.AfterID)
	}
	q := `SELECT ` + browseEventCols + ` FROM events e`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY e.id LIMIT ?`
	args = append(args, ledger.ListLimit(p.Limit))
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
