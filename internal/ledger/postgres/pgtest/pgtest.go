// Package pgtest gives tests a PostgreSQL ledger of their own: it finds the
// test server, and creates a fresh schema per test that it drops afterwards,
// so that tests (and two stores playing two processes) run in parallel on
// one server without seeing each other's rows.
//
// The server comes from HOOKKEEPER_TEST_POSTGRES. When that is unset, CI
// fails at once (a test that skips would hide a missing service); a
// developer's run falls back to the server ./hack/postgres.sh starts.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
)

// EnvDSN names the variable that holds the test server's DSN.
const EnvDSN = "HOOKKEEPER_TEST_POSTGRES"

// DefaultDSN is where ./hack/postgres.sh serves.
const DefaultDSN = "postgres://postgres@127.0.0.1:55432/postgres?sslmode=disable"

const howToStart = "start it with `./hack/postgres.sh` (or `make postgres`) and export " +
	EnvDSN + "=\"$(./hack/postgres.sh)\""

var reachable sync.Map // DSN -> error of the first ping

// DSN returns the test server's DSN, or fails the test with how to start
// the server when none is configured or it cannot be reached.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: the PostgreSQL store tests need a server; %s", EnvDSN, howToStart)
		}
		dsn = DefaultDSN
	}
	errAny, _ := reachable.LoadOrStore(dsn, sync.OnceValue(func() error { return ping(dsn) }))
	if err := errAny.(func() error)(); err != nil {
		t.Fatalf("PostgreSQL at %s is unreachable (%v); %s", redacted(dsn), err, howToStart)
	}
	return dsn
}

func ping(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.Ping(ctx)
}

// NewSchema returns the name of a schema no other test uses, and drops it
// (with everything in it) when the test ends. The schema is created by the
// first store opened on it.
func NewSchema(t testing.TB) string {
	t.Helper()
	dsn := DSN(t)
	schema := uniqueName()
	execAtEnd(t, dsn, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	return schema
}

// NewDatabase creates a database no other test uses, drops it when the
// test ends, and returns its DSN. A test that needs VACUUM to remove what
// it deleted uses one: PostgreSQL keeps a deleted row while any
// transaction of the same database may still see it, and tests of other
// packages run their transactions in the shared one meanwhile.
func NewDatabase(t testing.TB) string {
	t.Helper()
	dsn := DSN(t)
	name := uniqueName()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := execOn(ctx, dsn, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	execAtEnd(t, dsn, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("DSN: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// uniqueName is a schema or database name no other test uses.
func uniqueName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "hk_test_" + hex.EncodeToString(b[:])
}

// execAtEnd runs sql on dsn when the test ends.
func execAtEnd(t testing.TB, dsn, sql string) {
	t.Cleanup(func() {
		// t.Context is already cancelled during cleanup.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := execOn(ctx, dsn, sql); err != nil {
			t.Error(err)
		}
	})
}

// execOn runs sql on a connection of its own to dsn.
func execOn(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// OpenStore opens a store on schema (see NewSchema) and closes it when the
// test ends. Call it twice on one schema for two processes sharing a
// ledger.
func OpenStore(t testing.TB, schema string, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts = append([]postgres.Option{postgres.WithSchema(schema)}, opts...)
	s, err := postgres.Open(ctx, DSN(t), opts...)
	if err != nil {
		t.Fatalf("open PostgreSQL ledger in schema %s: %v", schema, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// NewSchemaStore opens a store on a fresh schema of its own.
func NewSchemaStore(t testing.TB, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	return OpenStore(t, NewSchema(t), opts...)
}

// redacted hides a password in dsn.
func redacted(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparseable DSN)"
	}
	return u.Redacted()
}
