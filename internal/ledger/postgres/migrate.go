package postgres

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationTable records applied versions; named for this store so that it
// cannot collide with another goose user of the same schema.
const migrationTable = "hookkeeper_ledger_migrations"

// migrate creates schema (when set) and applies pending migrations. The work
// runs under a session advisory lock, keyed by the schema, held on a
// connection of its own: a second process opening the same database waits
// for the first and then finds nothing to do. Closing that connection
// releases the lock whatever happened.
func migrate(ctx context.Context, connCfg *pgx.ConnConfig, schema string) error {
	lockConn, err := pgx.ConnectConfig(ctx, connCfg.Copy())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer lockConn.Close(context.WithoutCancel(ctx))
	if _, err := lockConn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey(schema)); err != nil {
		return fmt.Errorf("lock migrations: %w", err)
	}
	if schema != "" {
		// schema matched schemaPattern: it needs no quoting.
		if _, err := lockConn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
			return fmt.Errorf("create schema %s: %w", schema, err)
		}
	}

	db := stdlib.OpenDB(*connCfg.Copy())
	defer func() { _ = db.Close() }()
	provider, err := migrationProvider(db, schema)
	if err != nil {
		return err
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// migrationProvider applies the embedded migrations to db, recording them
// in schema's migration table.
func migrationProvider(db *sql.DB, schema string) (*goose.Provider, error) {
	table := migrationTable
	if schema != "" {
		table = schema + "." + migrationTable
	}
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, sub,
		goose.WithTableName(table),
		goose.WithDisableGlobalRegistry(true),
		goose.WithLogger(goose.NopLogger()),
	)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return provider, nil
}

// migrationLockKey derives the advisory lock key from the schema, so that
// stores in different schemas of one database migrate independently.
func migrationLockKey(schema string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("hookkeeper/ledger/migrate:" + schema))
	return int64(h.Sum64())
}
