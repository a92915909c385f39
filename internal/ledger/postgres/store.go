package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// driver is the Store as package ledger's orchestration sees it: the
// statements behind the walks and preambles both drivers share (Prune's
// stages, ExhaustedList's pages, the acknowledgement transactions,
// RecoveryApply's reads and write); the Store's methods hand their params
// to that orchestration. One pointer: as an interface it allocates nothing.
type driver struct{ *Store }

// Store is a ledger.Store backed by PostgreSQL. It is safe for concurrent
// use, and several Stores (in one process or many) may share a database.
type Store struct {
	pool *pgxpool.Pool
	// activityOverlap is ledger.ActivityOverlap; tests shorten it to see
	// exactly what EndpointActivitySince reads.
	activityOverlap time.Duration
	// stopAnalyze ends the analysis of young tables (analyze.go), and
	// analyzed is closed when it has ended.
	stopAnalyze context.CancelFunc
	analyzed    chan struct{}
}

var _ ledger.Store = (*Store)(nil)

// Option configures Open.
type Option func(*options) error

type options struct {
	schema   string
	maxConns int32
	dial     pgconn.DialFunc // tests: count round trips
}

var schemaPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// WithSchema keeps every table of the store in schema (created if needed)
// by setting search_path on each connection. The name must be a lower-case
// SQL identifier, so it never needs quoting.
func WithSchema(schema string) Option {
	return func(o *options) error {
		if !schemaPattern.MatchString(schema) {
			return fmt.Errorf("schema %q: want a lower-case identifier ([a-z_][a-z0-9_]*, at most 63 characters)", schema)
		}
		o.schema = schema
		return nil
	}
}

// WithMaxConns bounds the connection pool (default: pgxpool's, the greater
// of 4 and the number of CPUs). It must be at least 2.
func WithMaxConns(n int) Option {
	return func(o *options) error {
		if n < 2 {
			return fmt.Errorf("max conns %d: want at least 2", n)
		}
		o.maxConns = int32(n)
		return nil
	}
}

// Open connects to the database named by dsn, applies pending migrations
// and returns the store.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("open postgres ledger: %w", err)
		}
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx errors may quote the DSN: do not repeat it.
		return nil, errors.New("open postgres ledger: invalid connection string")
	}
	if o.schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = o.schema
	}
	if o.dial != nil {
		cfg.ConnConfig.DialFunc = o.dial
	}
	if o.maxConns > 0 {
		cfg.MaxConns = o.maxConns
	}
	if err := migrate(ctx, cfg.ConnConfig, o.schema); err != nil {
		return nil, fmt.Errorf("open postgres ledger: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres ledger: %w", err)
	}
	actx, stop := context.WithCancel(context.Background())
	s := &Store{pool: pool, activityOverlap: ledger.ActivityOverlap, stopAnalyze: stop, analyzed: make(chan struct{})}
	go func() {
		defer close(s.analyzed)
		analyzeYoung(actx, pool)
	}()
	return s, nil
}

// Close releases the pool's connections.
func (s *Store) Close() error {
	s.stopAnalyze()
	<-s.analyzed
	s.pool.Close()
	return nil
}

// maxTxTries bounds how often a transaction that failed on a deadlock or a
// serialization failure is run again.
const maxTxTries = 4

// tx runs fn in a transaction (txn) and commits it. fn must be safe to run
// again: it is retried when PostgreSQL aborts it for a deadlock or a
// serialization failure.
func (s *Store) tx(ctx context.Context, op string, fn func(*txn) error) error {
	var err error
	for try := 1; try <= maxTxTries; try++ {
		err = s.runTx(ctx, fn)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			break
		}
	}
	return translate(op, err)
}

// runTx runs fn in one transaction on a connection of the pool. Its result
// is fn's error, or COMMIT's: nil only once COMMIT succeeded.
func (s *Store) runTx(ctx context.Context, fn func(*txn) error) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a connection: %w", err)
	}
	// Release destroys a connection left in a transaction (abort).
	defer c.Release()
	t := &txn{conn: c.Conn()}
	err = fn(t)
	if err == nil {
		err = t.commit(ctx)
	}
	if err != nil {
		t.abort(ctx)
	}
	return err
}
