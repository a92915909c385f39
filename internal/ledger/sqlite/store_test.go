package sqlite

import (
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// latestMigration is the highest version among the embedded migrations.
func latestMigration(t *testing.T) int {
	t.Helper()
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("embedded migrations: %v, %v", names, err)
	}
	latest := 0
	for _, name := range names {
		prefix, _, _ := strings.Cut(filepath.Base(name), "_")
		v, err := strconv.Atoi(prefix)
		if err != nil {
			t.Fatalf("migration %s: %v", name, err)
		}
		latest = max(latest, v)
	}
	return latest
}

// TestOpenConfiguresConnections checks the pragmas that durability and
// the single-writer design rely on, and that the schema is versioned.
func TestOpenConfiguresConnections(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	for _, tc := range []struct {
		name, pragma, want string
		write              bool
	}{
		{"WAL", "journal_mode", "wal", true},
		{"durable commits", "synchronous", "2", true}, // FULL
		{"foreign keys", "foreign_keys", "1", true},
		{"busy timeout", "busy_timeout", "5000", true},
		{"deleted content is zeroed", "secure_delete", "1", true},
		{"checkpoints every 16 MiB of WAL", "wal_autocheckpoint", strconv.Itoa(walCheckpointPages), true},
		{"readers on WAL", "journal_mode", "wal", false},
		{"readers cannot write", "query_only", "1", false},
		{"readers check foreign keys too", "foreign_keys", "1", false},
	} {
		db := s.r
		if tc.write {
			db = s.w
		}
		var got string
		if err := db.QueryRow("PRAGMA " + tc.pragma).Scan(&got); err != nil {
			t.Fatalf("%s: PRAGMA %s: %v", tc.name, tc.pragma, err)
		}
		if got != tc.want {
			t.Errorf("%s: PRAGMA %s = %s, want %s", tc.name, tc.pragma, got, tc.want)
		}
	}
	if n := s.w.Stats().MaxOpenConnections; n != 1 {
		t.Errorf("write pool allows %d connections, want 1", n)
	}
	var version int
	if err := s.r.QueryRow(`SELECT max(version_id) FROM goose_db_version WHERE is_applied`).Scan(&version); err != nil || version != latestMigration(t) {
		t.Errorf("schema version = %d, %v; want %d", version, err, latestMigration(t))
	}
}

func TestOpenRejectsUnknownSynchronous(t *testing.T) {
	if _, err := Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"), WithSynchronous("SOMETIMES")); err == nil {
		t.Fatal("Open accepted synchronous=SOMETIMES")
	}
}

// TestOpenReclaimsEveryLease: the file lock proves that whoever leased a
// delivery before Open is gone, so Open returns every in-flight delivery to
// the pool at once, whatever its owner and however long its lease.
func TestOpenReclaimsEveryLease(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ep := ledger.Endpoint{ID: "shop/all", Namespace: "shop", Name: "all", URL: "https://receiver.example/all",
		EventTypes: []string{"*"}, Secrets: []ledger.SigningSecret{{Value: sensitive.Bytes("whsec_all")}}, AckMode: ledger.AckResponse}
	if _, err := s.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{Endpoint: ep, Now: now}); err != nil {
		t.Fatalf("EndpointUpsert: %v", err)
	}
	var ids []string
	for i, owner := range []string{"host-1-aa", ledger.OwnerOf("pod", "1")} {
		data := []byte(`{"n":` + strconv.Itoa(i) + `}`)
		res, err := s.EventInsertMany(ctx, []*ledger.EventInsertParams{{ID: ledger.NewID("evt", now), Namespace: "shop", Type: "order.created",
			Data: data, BodyHash: data, Now: now}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("EventInsertMany: %v, %v", err, res[0].Err)
		}
		got, err := s.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: owner, Now: now, LeaseFor: time.Hour, Limit: 1})
		if err != nil || len(got) != 1 {
			t.Fatalf("DeliveryClaim: %v, %d", err, len(got))
		}
		ids = append(ids, got[0].Delivery.ID)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	for _, id := range ids {
		d, err := s.DeliveryGet(ctx, id)
		if err != nil || d.State != ledger.StateScheduled || d.LeaseOwner != "" || d.LeaseUntil != nil || !d.DueAt.Equal(now) {
			t.Fatalf("after reopening, delivery %s: %+v, %v", id, d, err)
		}
	}
	st, err := s.EndpointStats(ctx, "shop/all")
	if err != nil || st.Pending != 2 || st.InFlight != 0 {
		t.Fatalf("stats after reopening: %+v, %v", st, err)
	}
	got, err := s.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: "next", Now: now.Add(time.Second), LeaseFor: time.Hour, Limit: 10})
	if err != nil || len(got) != 2 {
		t.Fatalf("claim after reopening, long before the leases end: %d, %v; want 2", len(got), err)
	}
}
