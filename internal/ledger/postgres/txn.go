package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// beginSQL pins READ COMMITTED whatever the server's default: the store
// relies on each statement seeing what committed before it started (a key
// won by another transaction, deliveries inserted while a delete waited for
// its lock).
const beginSQL = "BEGIN ISOLATION LEVEL READ COMMITTED"

// genericPlansSQL makes the transaction's prepared statements run their
// generic plan (planned once per connection and statement) instead of a
// custom plan per execution. The server prefers a custom plan whenever the
// generic one looks costlier, which for a statement over an array
// parameter (id = ANY($1), unnest($1)) it always does, since its size is
// unknown: every execution of the record path's statements was planned
// anew, most of the server's time per record. A generic plan lives until
// an ANALYZE of its tables, so one made while they were nearly empty
// (a sequential scan) ends when the store analyses them as they grow
// (analyze.go). SET LOCAL ends with the transaction, so the pool's other
// users keep the default.
const genericPlansSQL = "SET LOCAL plan_cache_mode = force_generic_plan"

// errTxnEnded refuses a statement after the transaction committed, or after
// its BEGIN failed.
var errTxnEnded = errors.New("the transaction has ended")

// txn is one transaction of the store, on a connection of its own, that
// costs as few round trips as its steps allow. Every round trip wakes a
// server process, which on a busy machine costs far more than the
// statements, so:
//
//   - BEGIN is not sent alone: it rides in the pipeline of the first
//     statements (pgx sends a batch as one extended-protocol pipeline with
//     one Sync; an explicit BEGIN in it opens a transaction that stays open
//     across later pipelines).
//   - Writes whose answer nothing in the transaction reads (queue) wait
//     for the next pipeline: the next step's reads, or COMMIT.
//   - COMMIT rides in the pipeline of the last writes (commit).
//
// Statements run in the order they were sent or queued, so the
// transaction's statements and lock order are those of the code that
// runs it. A transaction of k steps that each need the answers of the one
// before costs k round trips. A failed statement aborts the rest of its
// pipeline, COMMIT included: the transaction is then rolled back (abort),
// never committed.
//
// txn implements pgx.Tx so that helpers written against pgx.Tx run in it;
// it has no nested transactions and no large objects.
type txn struct {
	conn    *pgx.Conn
	begun   bool               // BEGIN was sent
	done    bool               // committed or aborted
	pending []*pgx.QueuedQuery // queued writes, not sent yet
}

var _ pgx.Tx = (*txn)(nil)

// genericPlans makes the transaction run the generic plans of its
// statements (genericPlansSQL): queued, it rides in the first pipeline
// right after BEGIN, ahead of every statement sent after it. For the hot
// write paths, whose statements TestGenericPlansStayFlat checks on a
// ledger with history; called before anything else is sent or queued.
func (t *txn) genericPlans() {
	b := &pgx.Batch{}
	b.Queue(genericPlansSQL)
	t.queue("generic plans", b)
}

// queue adds b's statements to the transaction's next pipeline: for writes
// whose answers nothing before COMMIT needs. Their callbacks run when that
// pipeline is read, possibly after the server ran COMMIT: they may keep an
// answer for after the transaction, never decide whether it commits. A
// failed statement's error is wrapped with what.
func (t *txn) queue(what string, b *pgx.Batch) {
	for _, qq := range b.QueuedQueries {
		fn := qq.Fn
		qq.Fn = func(br pgx.BatchResults) error {
			var err error
			if fn != nil {
				err = fn(br)
			} else {
				_, err = br.Exec()
			}
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		}
		t.pending = append(t.pending, qq)
	}
}

// queueStats queues the counter changes s (queueStats) for the last
// pipeline.
func (t *txn) queueStats(s ledger.StatsDelta) {
	b := &pgx.Batch{}
	queueStats(b, s)
	t.queue("update endpoint stats", b)
}

// send sends b as one pipeline, after BEGIN when the transaction has not
// begun and after the queued writes, and before COMMIT when commit is
// set. The results returned are b's: BEGIN's and the queued writes' are
// read before.
func (t *txn) send(ctx context.Context, b *pgx.Batch, commit bool) pgx.BatchResults {
	if t.done || (t.begun && t.conn.PgConn().TxStatus() == 'I') {
		return pgx.FailedBatchResults(b, errTxnEnded)
	}
	p := &pgx.Batch{}
	begin := !t.begun
	if begin {
		p.Queue(beginSQL)
	}
	pending := t.pending
	t.pending = nil
	p.QueuedQueries = append(p.QueuedQueries, pending...)
	p.QueuedQueries = append(p.QueuedQueries, b.QueuedQueries...)
	if commit {
		p.Queue("COMMIT").Fn = func(br pgx.BatchResults) error {
			tag, err := br.Exec()
			switch {
			case err != nil:
				return fmt.Errorf("commit: %w", err)
			case tag.String() != "COMMIT":
				// The server answers ROLLBACK in a transaction that an
				// earlier error aborted.
				return fmt.Errorf("commit: %w", pgx.ErrTxCommitRollback)
			}
			return nil
		}
	}
	t.begun = true
	br := t.conn.SendBatch(ctx, p)
	if begin {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return pgx.FailedBatchResults(b, fmt.Errorf("begin: %w", err))
		}
	}
	for _, qq := range pending {
		if err := qq.Fn(br); err != nil {
			_ = br.Close()
			return pgx.FailedBatchResults(b, err)
		}
	}
	return br
}

// commit sends the queued writes and COMMIT in one pipeline. A
// transaction that sent nothing has nothing to commit.
func (t *txn) commit(ctx context.Context) error {
	if t.done {
		return errTxnEnded
	}
	if !t.begun && len(t.pending) == 0 {
		t.done = true
		return nil
	}
	if err := t.send(ctx, &pgx.Batch{}, true).Close(); err != nil {
		return err
	}
	t.done = true
	return nil
}

// abort ends a transaction that failed. A connection still in the
// transaction is rolled back, unless ctx is done: then it is left to the
// pool, which destroys a connection released in a transaction
// (pgxpool.Conn.Release), as it does one that a cancelled statement closed.
func (t *txn) abort(ctx context.Context) {
	t.done, t.pending = true, nil
	if t.conn.IsClosed() || t.conn.PgConn().TxStatus() == 'I' || ctx.Err() != nil {
		return
	}
	// A failed ROLLBACK leaves the connection closed or in the transaction:
	// the pool destroys it either way.
	_, _ = t.conn.Exec(ctx, "ROLLBACK")
}

// direct reports whether a statement can go straight to the connection:
// the transaction is open and nothing waits to be sent before it.
func (t *txn) direct() bool {
	return t.begun && !t.done && len(t.pending) == 0
}

// flush sends BEGIN and the queued writes, if any, for the pgx.Tx methods
// that cannot ride in a pipeline.
func (t *txn) flush(ctx context.Context) error {
	if t.direct() {
		return nil
	}
	return t.send(ctx, &pgx.Batch{}, false).Close()
}

// SendBatch sends b in the transaction, with BEGIN and the queued writes
// in the same pipeline.
func (t *txn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.send(ctx, b, false)
}

// Exec runs sql in the transaction, with BEGIN and the queued writes in the
// same pipeline.
func (t *txn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.direct() {
		return t.conn.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.send(ctx, b, false)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query runs sql in the transaction, with BEGIN and the queued writes in
// the same pipeline.
func (t *txn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.direct() {
		return t.conn.Query(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.send(ctx, b, false)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return rows, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow is Query for at most one row, as pgx.Conn.QueryRow.
func (t *txn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return &txnRow{rows: rows, err: err}
}

// CopyFrom implements pgx.Tx.
func (t *txn) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.flush(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, columns, src)
}

// Prepare implements pgx.Tx.
func (t *txn) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.conn.Prepare(ctx, name, sql)
}

// Begin implements pgx.Tx: the store does not nest transactions.
func (t *txn) Begin(context.Context) (pgx.Tx, error) {
	return nil, errors.New("nested transactions are not supported")
}

// Commit implements pgx.Tx (see commit).
func (t *txn) Commit(ctx context.Context) error { return t.commit(ctx) }

// Rollback implements pgx.Tx (see abort).
func (t *txn) Rollback(ctx context.Context) error {
	if t.done {
		return pgx.ErrTxClosed
	}
	t.abort(ctx)
	return nil
}

// LargeObjects implements pgx.Tx; the store stores no large objects.
func (t *txn) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

// Conn implements pgx.Tx.
func (t *txn) Conn() *pgx.Conn { return t.conn }

// batchRows are the rows of a query sent in a pipeline: closing them, or
// reading past the last row, reads the rest of the pipeline, so that the
// connection is free again as after a plain query.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if !r.closed {
		r.closed = true
		r.err = r.br.Close()
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// txnRow is the row of QueryRow.
type txnRow struct {
	rows pgx.Rows
	err  error
}

func (r *txnRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
