package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// YoungStatisticsTarget is the statistics target of the store's own
// analyses of its young tables.
const YoungStatisticsTarget = youngStatisticsTarget

// The statements whose plans plan_test.go checks.
const (
	EventsByKeySQL     = eventsByKeySQL
	DeliveriesByKeySQL = deliveriesByKeySQL
	ExhaustedPageSQL   = exhaustedPageSQL
	EndpointStatsSQL   = endpointStatsSQL
	GenericPlansSQL    = genericPlansSQL
	ClaimExpiredSQL    = claimExpiredSQL
)

// MaxTxTries is how often the store runs a transaction that conflicts.
const MaxTxTries = maxTxTries

// WithDialFunc dials the store's connections with dial, so that a test can
// watch what goes over the wire.
func WithDialFunc(dial pgconn.DialFunc) Option {
	return func(o *options) error {
		o.dial = dial
		return nil
	}
}

// Pool is the store's connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Txn is the transaction a test runs with Tx.
type Txn struct{ t *txn }

// Tx runs fn as the store runs its transactions (retries, commit, abort).
func (s *Store) Tx(ctx context.Context, op string, fn func(Txn) error) error {
	return s.tx(ctx, op, func(t *txn) error { return fn(Txn{t}) })
}

// Tx is the transaction as the store's helpers see it.
func (t Txn) Tx() pgx.Tx { return t.t }

// Queue queues b for the transaction's next pipeline (txn.queue).
func (t Txn) Queue(what string, b *pgx.Batch) { t.t.queue(what, b) }

// StatsShards is the number of endpoint_stats rows of an endpoint.
const StatsShards = statsShards

// QueueStats queues the store's stats statements, so that a test can run
// them in a transaction of its own.
func QueueStats(b *pgx.Batch, s ledger.StatsDelta) { queueStats(b, s) }

// MigrateTo moves schema (created if needed) up or down to version.
func MigrateTo(ctx context.Context, dsn, schema string, version int64) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return err
	}
	cfg.RuntimeParams["search_path"] = schema
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
		return err
	}
	db := stdlib.OpenDB(*cfg)
	defer func() { _ = db.Close() }()
	p, err := migrationProvider(db, schema)
	if err != nil {
		return err
	}
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return err
	}
	switch {
	case current < version:
		_, err = p.UpTo(ctx, version)
	case current > version:
		_, err = p.DownTo(ctx, version)
	}
	if err != nil {
		return fmt.Errorf("migrate %s from %d to %d: %w", schema, current, version, err)
	}
	return nil
}
