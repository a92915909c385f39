package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// TestConcurrentOpenMigratesOnce opens one fresh schema from several
// "processes" at once: the advisory lock lets one migrate while the others
// wait, and every migration is recorded once.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	t.Parallel()
	schema := pgtest.NewSchema(t)
	dsn := pgtest.DSN(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(schema))
			if err != nil {
				t.Errorf("Open: %v", err)
				return
			}
			_ = s.Close()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var applied, distinct int
	err := rawConn(t, schema).QueryRow(context.Background(),
		`SELECT count(*), count(DISTINCT version_id) FROM hookkeeper_ledger_migrations WHERE version_id > 0`).Scan(&applied, &distinct)
	if err != nil {
		t.Fatal(err)
	}
	if applied == 0 || applied != distinct {
		t.Fatalf("%d migrations recorded for %d versions", applied, distinct)
	}
}

func TestOpenRefusesBadOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		dsn  string
		opt  postgres.Option
		want string
	}{
		{"schema needing quotes", pgtest.DSN(t), postgres.WithSchema(`Robert"; DROP TABLE x; --`), "lower-case identifier"},
		{"pool too small", pgtest.DSN(t), postgres.WithMaxConns(1), "at least 2"},
		{"unparseable DSN, password kept out", "postgres://hk:s3cr3t@db:notaport/hk", nil, "invalid connection string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []postgres.Option
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			s, err := postgres.Open(ctx, tc.dsn, opts...)
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("Open error = %q, want it to contain %q and no password", err, tc.want)
			}
		})
	}
}

// TestTimesKeepNanoseconds checks the storage choice: instants are Unix
// nanoseconds, so even sub-microsecond times read back identical, in UTC.
func TestTimesKeepNanoseconds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.NewSchemaStore(t)
	now := time.Date(2031, time.July, 8, 9, 10, 11, 987654321, time.FixedZone("CEST", 2*3600))
	ep := endpoint("shop", "all", "*")
	ep.Secrets = []ledger.SigningSecret{{Value: sensitive.Bytes("whsec_a"), NotAfter: now.Add(time.Nanosecond)}}
	if _, err := s.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{Endpoint: ep, Now: now}); err != nil {
		t.Fatal(err)
	}
	res := insert(t, s, []*ledger.EventInsertParams{event("shop", "order.created", now, 64)})
	d, err := s.DeliveryGet(ctx, res[0].Deliveries[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.EndpointGet(ctx, ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	for name, tm := range map[string]time.Time{
		"delivery due": d.DueAt, "delivery created": d.CreatedAt, "endpoint updated": got.UpdatedAt,
		"secret not after": got.Secrets[0].NotAfter.Add(-time.Nanosecond),
	} {
		if tm != now.UTC() {
			t.Errorf("%s = %v, want exactly %v", name, tm, now.UTC())
		}
	}
}
