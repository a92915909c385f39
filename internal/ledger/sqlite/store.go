// Package sqlite is the embedded ledger: a ledger.Store in one SQLite file,
// through the pure-Go driver modernc.org/sqlite, so that hookkeeper runs
// with no database server and no cgo.
//
// SQLite has one writer. The store keeps one write connection (every
// method that changes state queues for it, so "database is locked" never
// surfaces) and a pool of query-only connections that read concurrently
// from the WAL. Commits are durable by default (synchronous=FULL): an
// accepted event survives a crash or power loss, and the engine amortizes
// the fsync by batching ~100 items per transaction.
//
// All SQL lives in queries.go and every driver error passes through
// translate (errors.go).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// driver is the Store as package ledger's orchestration sees it: the
// statements behind the walks and preambles both drivers share (Prune's
// stages, ExhaustedList's pages, the acknowledgement transactions,
// RecoveryApply's reads and write); the Store's methods hand their params
// to that orchestration. One pointer: as an interface it allocates nothing.
type driver struct{ *Store }

// Store is the SQLite ledger. It is safe for concurrent use.
type Store struct {
	w  *sql.DB // one connection: the single writer
	r  *sql.DB // query-only connections
	ws writeStmts
	rs readStmts
	rc recoveryStmts
	rp replayStmts
	st settleStmts
	oc outcomeStmts
	qs quotaStmts
	// lock keeps a second process off the file while the store is open.
	lock *processLock
	// activityOverlap is ledger.ActivityOverlap; tests shorten it to see
	// exactly what EndpointActivitySince reads.
	activityOverlap time.Duration
}

var (
	_ ledger.Store        = (*Store)(nil)
	_ ledger.SerialWriter = (*Store)(nil)
)

// SerialWrites implements ledger.SerialWriter: one connection writes.
func (s *Store) SerialWrites() bool { return true }

// Option configures Open.
type Option func(*options)

type options struct {
	synchronous string
}

const (
	// busyTimeout bounds how long a connection waits for a lock held by
	// another process (in-process writers queue for the write connection
	// instead).
	busyTimeout = 5 * time.Second
	// writerCacheKiB is the writer's page cache: writes touch the hot
	// pages of every index, so it is the one that saves I/O.
	writerCacheKiB = 32 << 10
	// readerCacheKiB is each reader's page cache. The caches live outside
	// the Go heap, where GOMEMLIMIT does not reach, and fill as the
	// delivery API reads the ledger: small per reader keeps the process
	// inside its memory limit (docs/operations/sizing.md#memory), while the
	// kernel's page cache still serves the pages they miss.
	readerCacheKiB = 8 << 10
	// walCheckpointPages is the WAL size (4 KiB pages) at which a commit
	// copies the WAL into the database (a PASSIVE checkpoint, after the
	// commit is durable). SQLite's default, 1,000, checkpoints every few
	// dozen commits at low rates, and each checkpoint writes again every
	// page that the commits since the last one touched: the index edges,
	// counters and buckets that every commit rewrites. 4,000 (16 MiB)
	// writes those a quarter as often; Compact still truncates the WAL.
	walCheckpointPages = 4000
)

// WithSynchronous sets PRAGMA synchronous: FULL (the default) syncs the WAL
// on every commit; NORMAL may lose the last commits on power loss (never
// corrupts) and is only for tests and benchmarks that say so.
func WithSynchronous(mode string) Option { return func(o *options) { o.synchronous = mode } }

// Open opens (creating if needed) the ledger at path and migrates it to the
// current schema.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	o := options{synchronous: "FULL"}
	for _, opt := range opts {
		opt(&o)
	}
	switch o.synchronous {
	case "OFF", "NORMAL", "FULL", "EXTRA":
	default:
		return nil, fmt.Errorf("open ledger %s: synchronous %q: want OFF, NORMAL, FULL or EXTRA", path, o.synchronous)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}

	lock, err := lockLedger(abs)
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", abs, err)
	}
	// Migrations run on a connection of their own, closed before the
	// store's open: one that changes the schema in place (0011) leaves
	// the connection that ran it with the schema it had parsed before.
	if err := migrateFile(ctx, dsn(abs, o, false)); err != nil {
		_ = lock.release()
		return nil, fmt.Errorf("open ledger %s: %w", abs, err)
	}
	w, err := sql.Open("sqlite", dsn(abs, o, false))
	if err != nil {
		_ = lock.release()
		return nil, fmt.Errorf("open ledger %s: %w", abs, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s := &Store{w: w, lock: lock, activityOverlap: ledger.ActivityOverlap}

	r, err := sql.Open("sqlite", dsn(abs, o, true))
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open ledger %s: %w", abs, err)
	}
	readConns := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(readConns)
	r.SetMaxIdleConns(readConns)
	s.r = r
	if err := s.prepare(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open ledger %s: %w", abs, err)
	}
	if err := s.prepareSettlement(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open ledger %s: %w", abs, err)
	}
	if err := s.prepareOutcomes(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open ledger %s: %w", abs, err)
	}
	if err := s.prepareQuotas(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open ledger %s: %w", abs, err)
	}
	// The lock is ours, so every process that leased a delivery is gone:
	// its deliveries are sent again now rather than when the leases expire.
	if _, err := s.reclaimAll(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open ledger %s: %w", abs, err)
	}
	return s, nil
}

// dsn builds the connection string: a file: URI (so any path is escaped)
// with the pragmas every connection needs.
func dsn(path string, o options, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+o.synchronous+")")
	q.Add("_pragma", "foreign_keys(1)")
	cacheKiB := writerCacheKiB
	if readOnly {
		cacheKiB = readerCacheKiB
	}
	q.Add("_pragma", "cache_size(-"+strconv.Itoa(cacheKiB)+")")
	q.Add("_pragma", "temp_store(MEMORY)")
	// Deleted and overwritten content (scrubbed secrets, pruned payloads)
	// is zeroed in the pages, so that it cannot be read from the file once
	// Compact has checkpointed the WAL.
	q.Add("_pragma", "secure_delete(ON)")
	if readOnly {
		q.Set("_query_only", "1")
	} else {
		q.Add("_pragma", "wal_autocheckpoint("+strconv.Itoa(walCheckpointPages)+")")
		// The only writer takes the write lock up front, so a transaction
		// never fails half-way upgrading a read lock.
		q.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return u.String()
}

// Close closes both pools.
func (s *Store) Close() error {
	var errs []error
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close(), s.lock.release())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close ledger: %w", err)
	}
	return nil
}

// wtx is one write transaction on the writer connection, with the
// prepared statements rebound to it once each.
type wtx struct {
	ctx   context.Context
	tx    *sql.Tx
	bound map[*sql.Stmt]*sql.Stmt
	// s is the store, for the statement adapters of package ledger's
	// orchestration (one pointer each, so they allocate nothing).
	s *Store
}

// stmt returns st bound to the transaction. The writer has one connection,
// so the driver statement is prepared once for the store's life.
func (t *wtx) stmt(st *sql.Stmt) *sql.Stmt {
	if b, ok := t.bound[st]; ok {
		return b
	}
	b := t.tx.StmtContext(t.ctx, st)
	t.bound[st] = b
	return b
}

// write runs fn in a write transaction and commits it; op names the
// operation in errors.
func (s *Store) write(ctx context.Context, op string, fn func(t *wtx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return translate(op+": begin", err)
	}
	// Statements run without the caller's cancellation: database/sql
	// already rolls the transaction back if ctx ends, and a cancellable
	// context costs the driver a goroutine per statement.
	t := &wtx{ctx: context.WithoutCancel(ctx), tx: tx, bound: make(map[*sql.Stmt]*sql.Stmt, 8), s: s}
	if err := fn(t); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return translate(op+": commit", err)
	}
	return nil
}

// writeOp is write for fn whose errors lack op (package ledger's
// orchestration, which names no driver operation): it prefixes them.
func (s *Store) writeOp(ctx context.Context, op string, fn func(t *wtx) error) error {
	return s.write(ctx, op, func(t *wtx) error {
		if err := fn(t); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		return nil
	})
}
