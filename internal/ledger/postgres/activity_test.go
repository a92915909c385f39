package postgres_test

import (
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// TestActivityChangedAtMigration: migration 00017 adds
// endpoint_stats.changed_at, its Down drops it, and it comes back. A row
// from before counts as unchanged since any cursor, until a write stamps it.
func TestActivityChangedAtMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := pgtest.NewSchema(t)
	if err := postgres.MigrateTo(ctx, pgtest.DSN(t), schema, 16); err != nil {
		t.Fatal(err)
	}
	conn := rawConn(t, schema)
	if _, err := conn.Exec(ctx, `INSERT INTO endpoint_stats (endpoint_id, shard, delivered) VALUES ('shop/old', 0, 3)`); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		version int64
		column  bool
	}{{17, true}, {16, false}, {17, true}} {
		if err := postgres.MigrateTo(ctx, pgtest.DSN(t), schema, step.version); err != nil {
			t.Fatal(err)
		}
		var column bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM information_schema.columns
			WHERE table_schema = $1 AND table_name = 'endpoint_stats' AND column_name = 'changed_at')`, schema).Scan(&column); err != nil {
			t.Fatal(err)
		}
		if column != step.column {
			t.Fatalf("at version %d: endpoint_stats has changed_at: %v, want %v", step.version, column, step.column)
		}
	}

	s := pgtest.OpenStore(t, schema)
	s.SetActivityOverlap(0)
	since := func(c ledger.ActivityCursor) ([]ledger.EndpointActivity, ledger.ActivityCursor) {
		t.Helper()
		l, next, err := s.EndpointActivitySince(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return l, next
	}
	all, c := since(ledger.ActivityCursor{})
	if len(all) != 1 || all[0].Stats.Delivered != 3 {
		t.Fatalf("from the zero cursor: %+v, want shop/old", all)
	}
	if l, _ := since(c); len(l) != 0 {
		t.Fatalf("a row from before changed: %+v", l)
	}
	delta := ledger.StatsDelta{}
	delta.Add("shop/old", ledger.StateDelivered, ledger.ResolutionNone, 1)
	writeStats(t, conn, delta, nil)
	if l, _ := since(c); len(l) != 1 || l[0].Stats.Delivered != 4 {
		t.Fatalf("after a write: %+v, want shop/old with 4 delivered", l)
	}
}

// TestActivitySinceSeesALateCommit: a read that began after a transaction
// stamped its change, but before it committed, does not see it; the next
// read, from that read's cursor, does, as it goes back ActivityOverlap.
// Without the overlap it would miss it for good.
func TestActivitySinceSeesALateCommit(t *testing.T) {
	t.Parallel()
	schema := pgtest.NewSchema(t)
	s := pgtest.OpenStore(t, schema)
	conn := rawConn(t, schema)
	upsert(t, s, endpoint("shop", "late", "*"))
	for _, tc := range []struct {
		overlap time.Duration
		seen    bool
	}{{ledger.ActivityOverlap, true}, {0, false}} {
		s.SetActivityOverlap(tc.overlap)
		all, c, err := s.EndpointActivitySince(t.Context(), ledger.ActivityCursor{})
		if err != nil || len(all) != 1 {
			t.Fatalf("from the zero cursor: %+v, %v", all, err)
		}
		before := all[0].Stats.Delivered
		delta := ledger.StatsDelta{}
		delta.Add("shop/late", ledger.StateDelivered, ledger.ResolutionNone, 1)
		writeStats(t, conn, delta, func() {
			var during []ledger.EndpointActivity
			if during, c, err = s.EndpointActivitySince(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			for _, a := range during {
				if a.Stats.Delivered != before {
					t.Fatalf("overlap %v: a read saw an uncommitted change: %+v", tc.overlap, a)
				}
			}
		})
		after, _, err := s.EndpointActivitySince(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		if seen := len(after) == 1; seen != tc.seen {
			t.Errorf("overlap %v: the next read returned %+v, want the late commit seen: %v", tc.overlap, after, tc.seen)
		}
	}
}
