package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The statements whose plans plan_test.go checks.
const (
	EventsByKeySQL     = eventsByKeySQL
	DeliveriesByKeySQL = deliveriesByKeySQL
	ExhaustedPageSQL   = exhaustedPageSQL
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
