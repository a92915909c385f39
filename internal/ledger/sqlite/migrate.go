package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

// migrations are the versioned schema changes, applied in order at Open.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrateFile migrates the ledger of the connection string dsn on one
// connection of its own, closed when it returns.
func migrateFile(ctx context.Context, dsn string) (err error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	db.SetMaxOpenConns(1)
	return migrate(ctx, db)
}

// migrate brings db to the latest schema with a goose Provider (no global
// state), inside one transaction per migration.
func migrate(ctx context.Context, db *sql.DB) error {
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
