package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// TestYoungTablesAreAnalyzedAsTheyGrow: a young ledger's store analyses its
// hot tables itself once they have grown, so that plans made while they
// were nearly empty do not outlive that (analyze.go). Autovacuum is off for
// the schema's tables, so only the store can have analysed them.
func TestYoungTablesAreAnalyzedAsTheyGrow(t *testing.T) {
	schema := pgtest.NewSchema(t)
	s := pgtest.OpenStore(t, schema)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, table := range []string{"events", "deliveries", "attempts"} {
		if _, err := conn.Exec(ctx, "ALTER TABLE "+schema+"."+table+" SET (autovacuum_enabled = false)"); err != nil {
			t.Fatal(err)
		}
	}
	analyses := func() (manual, auto int64) {
		t.Helper()
		err := conn.QueryRow(ctx, `SELECT analyze_count, autoanalyze_count FROM pg_stat_user_tables
			WHERE schemaname = $1 AND relname = 'events'`, schema).Scan(&manual, &auto)
		if err != nil {
			t.Fatal(err)
		}
		return manual, auto
	}
	if manual, _ := analyses(); manual != 0 {
		t.Fatalf("events analysed %d times before it held any row", manual)
	}

	for range 5 {
		insert(t, s, events(500, "shop", t0))
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		// The server publishes a connection's table counters within
		// seconds of its transactions; the store looks every second.
		manual, auto := analyses()
		if auto != 0 {
			t.Fatalf("autovacuum analysed events although it is off for the table")
		}
		if manual > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the store never analysed events after 2,500 rows were inserted into it")
		}
		if _, err := conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	var rows int64
	if err := conn.QueryRow(ctx, `SELECT reltuples::bigint FROM pg_class
		WHERE relnamespace = $1::regnamespace AND relname = 'events'`, schema).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows < 1_000 {
		t.Errorf("events analysed at %d rows, want at least the 1,000 rows added that make an analysis worth running", rows)
	}
	// The analysis samples at the store's low statistics target: a
	// histogram of 2,500 distinct IDs has target + 1 bounds (101 at the
	// server's default).
	var bounds int
	if err := conn.QueryRow(ctx, `SELECT coalesce(array_length(histogram_bounds::text::text[], 1), 0) FROM pg_stats
		WHERE schemaname = $1 AND tablename = 'events' AND attname = 'id'`, schema).Scan(&bounds); err != nil {
		t.Fatal(err)
	}
	if want := postgres.YoungStatisticsTarget + 1; bounds != want {
		t.Errorf("events.id analysed into a histogram of %d bounds, want %d (statistics target %d)", bounds, want, postgres.YoungStatisticsTarget)
	}
}
