package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// This file implements the replay half of ledger.Recovery: ReplayList's
// pages and ReplayApply's reads (ledger's replay.go runs both); the write
// is RecoveryWrite's. The single writer makes ReplayApply atomic.

var replaySQL = struct {
	page, event, endpoint, deliveries, reached string
}{
	// One page of a namespace's events in ID order, walking
	// events_namespace (0006) within the ID range ?2..?3 after ?4; ?5 and
	// ?6 bound created_at, ?7 the page size.
	page: `SELECT id, type, created_at FROM events
		WHERE namespace = ?1 AND id >= ?2 AND id < ?3 AND id > ?4 AND created_at >= ?5 AND created_at < ?6
		ORDER BY id LIMIT ?7`,
	// The event and its first attempt (the replay window's start).
	event: `SELECT ` + prefixed("e", eventCols) + `, (SELECT min(x.first_attempt_at) FROM deliveries x WHERE x.event_id = e.id)
		FROM events e WHERE e.id = ?1`,
	endpoint: `SELECT policy FROM endpoints WHERE id = ?1 AND deleted = 0`,
	// The event's deliveries to the replay's endpoint (deliveries_event).
	deliveries: `SELECT ` + deliveryCols + ` FROM deliveries WHERE event_id = ?1 AND endpoint_id = ?2`,
	// An event that reached no endpoint reaches one now.
	reached: `UPDATE events SET undelivered = 0 WHERE id = ?1 AND undelivered = 1`,
}

// replayStmts are the prepared statements of this file: the page on the
// read pool, the rest on the writer.
type replayStmts struct {
	page, event, endpoint, deliveries, reached *sql.Stmt
}

func (s *Store) prepareReplay(ctx context.Context) error {
	q := replaySQL
	for _, p := range []struct {
		db   *sql.DB
		dst  **sql.Stmt
		text string
	}{
		{s.r, &s.rp.page, q.page},
		{s.w, &s.rp.event, q.event},
		{s.w, &s.rp.endpoint, q.endpoint},
		{s.w, &s.rp.deliveries, q.deliveries},
		{s.w, &s.rp.reached, q.reached},
	} {
		st, err := p.db.PrepareContext(ctx, p.text)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", firstLine(p.text), err)
		}
		*p.dst = st
	}
	return nil
}

// ReplayList implements ledger.Recovery (ledger.ReplayList walks the
// pages).
func (s *Store) ReplayList(ctx context.Context, p *ledger.ReplayListParams) ([]ledger.ReplayCandidate, error) {
	return ledger.ReplayList(ctx, driver{s}, p)
}

// ReplayPage implements ledger.ReplayPager on the read pool.
func (d driver) ReplayPage(ctx context.Context, p *ledger.ReplayPageParams) ([]ledger.ReplayCandidate, error) {
	rows, err := d.rp.page.QueryContext(ctx, p.Namespace, p.FromID, p.ToID, p.AfterID, p.Since, p.Until, p.Limit)
	if err != nil {
		return nil, translate("read page", err)
	}
	defer rows.Close()
	var out []ledger.ReplayCandidate
	for rows.Next() {
		var (
			c       ledger.ReplayCandidate
			created int64
		)
		if err := rows.Scan(&c.EventID, &c.Type, &created); err != nil {
			return nil, translate("read page", err)
		}
		c.CreatedAt = fromNanos(created)
		out = append(out, c)
	}
	return out, translate("read page", rows.Err())
}

// ReplayApply implements ledger.Recovery (ledger.ReplayApply decides and
// plans the rows).
func (s *Store) ReplayApply(ctx context.Context, p *ledger.ReplayApplyParams) (ledger.RecoveryItem, error) {
	return ledger.ReplayApply(ctx, driver{s}, p)
}

// ReplayTx implements ledger.ReplayTransactor: one write transaction.
func (d driver) ReplayTx(ctx context.Context, op string, fn func(ledger.ReplayStatements) error) error {
	return d.writeOp(ctx, op, func(t *wtx) error { return fn(recoveryTx{t}) })
}

// ReplayRead implements ledger.ReplayStatements.
func (r recoveryTx) ReplayRead(_ context.Context, p *ledger.ReplayApplyParams) (ledger.ReplayRead, error) {
	var rd ledger.ReplayRead
	s, t := r.t.s, r.t
	got, err := scanItem(t.stmt(s.rc.itemGet).QueryRowContext(t.ctx, p.OperationKey, ledger.ReplayItemKey(p.EventID)))
	switch {
	case err == nil:
		rd.Recorded = &got
		return rd, nil
	case !errors.Is(err, sql.ErrNoRows):
		return rd, translate("read replay item", err)
	}
	f := &rd.Facts
	f.EndpointID = p.EndpointID
	var (
		firstAttempt   sql.NullInt64
		eDest, eFinish = eventDest(&f.Event)
	)
	err = t.stmt(s.rp.event).QueryRowContext(t.ctx, p.EventID).Scan(append(eDest, &firstAttempt)...)
	if errors.Is(err, sql.ErrNoRows) {
		return rd, nil
	}
	if err != nil {
		return rd, translate("read event for replay", err)
	}
	if err := eFinish(); err != nil {
		return rd, err
	}
	f.ReplayFrom = ledger.ReplayFrom(fromNullNanos(firstAttempt), f.Event.CreatedAt)
	rd.Found = true

	var policy string
	switch err := t.stmt(s.rp.endpoint).QueryRowContext(t.ctx, p.EndpointID).Scan(&policy); {
	case errors.Is(err, sql.ErrNoRows):
		f.EndpointDeleted = true
		return rd, nil
	case err != nil:
		return rd, translate("read endpoint for replay", err)
	}
	if err := json.Unmarshal([]byte(policy), &f.Policy); err != nil {
		return rd, fmt.Errorf("policy of endpoint %s: %w", p.EndpointID, err)
	}
	ds, err := r.deliveriesTo(p.EventID, p.EndpointID)
	if err != nil {
		return rd, err
	}
	f.Pending, f.Unresolved = ledger.ReplayTarget(ds)
	return rd, nil
}

// deliveriesTo reads the deliveries of event to endpoint.
func (r recoveryTx) deliveriesTo(event, endpoint string) ([]ledger.Delivery, error) {
	const op = "read the event's deliveries for replay"
	rows, err := r.t.stmt(r.t.s.rp.deliveries).QueryContext(r.t.ctx, event, endpoint)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []ledger.Delivery
	for rows.Next() {
		var d ledger.Delivery
		dest, finish := deliveryDest(&d)
		if err := rows.Scan(dest...); err != nil {
			return nil, translate(op, err)
		}
		finish()
		out = append(out, d)
	}
	return out, translate(op, rows.Err())
}

// replayReached records that a replay gave event a delivery.
func (s *Store) replayReached(t *wtx, event string) error {
	_, err := t.stmt(s.rp.reached).ExecContext(t.ctx, event)
	return translate("mark event "+event+" delivered by a replay", err)
}

var (
	_ ledger.ReplayPager      = driver{}
	_ ledger.ReplayTransactor = driver{}
)
