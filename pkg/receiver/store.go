package receiver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The table, in SQL that SQLite and PostgreSQL both run. Times are unix
// milliseconds (BIGINT) rather than a timestamp type: the two databases
// store and compare timestamps differently through database/sql, integers
// the same way.
//
//	webhook_id       the event's webhook-id (at most 256 bytes, as signed)
//	replay_until_ms  kept until then; Prune deletes it afterwards
//	received_at_ms   when it was first processed
//	outcome          processed | rejected
//	reason           a rejection's reason
const (
	createTable = `CREATE TABLE IF NOT EXISTS %[1]s (
	webhook_id VARCHAR(256) NOT NULL PRIMARY KEY,
	replay_until_ms BIGINT NOT NULL,
	received_at_ms BIGINT NOT NULL,
	outcome VARCHAR(16) NOT NULL,
	reason VARCHAR(256) NOT NULL DEFAULT ''
)`
	createIndex = `CREATE INDEX IF NOT EXISTS %[1]s_replay_until ON %[1]s (replay_until_ms)`
)

// maxTableName leaves room for the index's suffix within PostgreSQL's 63
// bytes.
const maxTableName = 48

// validTable reports whether name is an unquoted identifier both databases
// accept as is.
func validTable(name string) bool {
	if name == "" || len(name) > maxTableName {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Record is one remembered event.
type Record struct {
	WebhookID   string
	ReplayUntil time.Time // UTC, to the millisecond
	ReceivedAt  time.Time // UTC, to the millisecond
	Outcome     Outcome
	Reason      string
}

// queries holds the statements on one table; the name was validated.
type queries struct {
	table                                   string
	insert_, lookup, extend, reject_, prune string
}

func newQueries(table string) queries {
	return queries{
		table:   table,
		insert_: `INSERT INTO ` + table + ` (webhook_id, replay_until_ms, received_at_ms, outcome) VALUES ($1, $2, $3, $4) ON CONFLICT (webhook_id) DO NOTHING`,
		lookup:  `SELECT webhook_id, replay_until_ms, received_at_ms, outcome, reason FROM ` + table + ` WHERE webhook_id = $1`,
		extend:  `UPDATE ` + table + ` SET replay_until_ms = $2 WHERE webhook_id = $1 AND replay_until_ms < $2`,
		reject_: `UPDATE ` + table + ` SET outcome = $2, reason = $3 WHERE webhook_id = $1`,
		prune:   `DELETE FROM ` + table + ` WHERE replay_until_ms < $1`,
	}
}

// create creates the table and its index if missing. Two processes
// starting at once on PostgreSQL can both pass IF NOT EXISTS and the
// loser fails on the catalog's unique index; tried again, it finds what
// the winner committed.
func (q queries) create(ctx context.Context, db *sql.DB) error {
	for _, stmt := range []string{fmt.Sprintf(createTable, q.table), fmt.Sprintf(createIndex, q.table)} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("create table %s: %w", q.table, err)
			}
		}
	}
	return nil
}

// insert records rec unless its webhook-id is recorded; it reports
// whether it did. A concurrent transaction that inserted the same id and
// has not finished makes it wait (a row lock on PostgreSQL, the write lock
// on SQLite) until that one commits (nothing inserted) or rolls back
// (inserted).
func (q queries) insert(ctx context.Context, tx *sql.Tx, rec Record) (bool, error) {
	res, err := tx.ExecContext(ctx, q.insert_, rec.WebhookID, rec.ReplayUntil.UnixMilli(), rec.ReceivedAt.UnixMilli(), string(rec.Outcome))
	if err != nil {
		return false, fmt.Errorf("record %s: %w", q.table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record %s: %w", q.table, err)
	}
	return n == 1, nil
}

// duplicate reads the record of id and extends its replay-until to until
// when that is later (a replay may come back later than the first
// delivery said).
func (q queries) duplicate(ctx context.Context, tx *sql.Tx, id string, until time.Time) (Record, error) {
	if _, err := tx.ExecContext(ctx, q.extend, id, until.UnixMilli()); err != nil {
		return Record{}, fmt.Errorf("extend the record in %s: %w", q.table, err)
	}
	rec, found, err := lookup(ctx, tx, q.lookup, id)
	switch {
	case err != nil:
		return Record{}, fmt.Errorf("read the record in %s: %w", q.table, err)
	case !found:
		// Pruned between the insert and the read: only for a record past
		// its replay-until, which hookkeeper no longer sends.
		return Record{}, fmt.Errorf("the record of %q in %s vanished", id, q.table)
	}
	return rec, nil
}

func (q queries) reject(ctx context.Context, tx *sql.Tx, id, reason string) error {
	if _, err := tx.ExecContext(ctx, q.reject_, id, string(Rejected), reason); err != nil {
		return fmt.Errorf("record the rejection in %s: %w", q.table, err)
	}
	return nil
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func lookup(ctx context.Context, db queryer, query, id string) (Record, bool, error) {
	var (
		rec             Record
		until, received int64
		outcome         string
	)
	err := db.QueryRowContext(ctx, query, id).Scan(&rec.WebhookID, &until, &received, &outcome, &rec.Reason)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, err
	}
	rec.ReplayUntil, rec.ReceivedAt, rec.Outcome = time.UnixMilli(until).UTC(), time.UnixMilli(received).UTC(), Outcome(outcome)
	return rec, true, nil
}

// Lookup returns the record of a webhook-id, if one is kept.
func (r *Receiver) Lookup(ctx context.Context, webhookID string) (Record, bool, error) {
	rec, found, err := lookup(ctx, r.db, r.q.lookup, webhookID)
	if err != nil {
		return Record{}, false, fmt.Errorf("receiver: read the record in %s: %w", r.q.table, err)
	}
	return rec, found, nil
}

// Prune deletes the records whose replay-until is before now: hookkeeper
// sends none of those events again. It returns how many it deleted.
func (r *Receiver) Prune(ctx context.Context, now time.Time) (int64, error) {
	res, err := r.db.ExecContext(ctx, r.q.prune, now.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("receiver: prune %s: %w", r.q.table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("receiver: prune %s: %w", r.q.table, err)
	}
	return n, nil
}

// RunPruner calls Prune with Options.Now every interval until ctx is done,
// passing its errors to onError (which may be nil); it returns ctx's
// error. Run it in a goroutine of its own.
func (r *Receiver) RunPruner(ctx context.Context, interval time.Duration, onError func(error)) error {
	if interval <= 0 {
		return errors.New("receiver: the pruner's interval must be positive")
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := r.Prune(ctx, r.opts.Now()); err != nil && onError != nil && ctx.Err() == nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
