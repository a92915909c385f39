package sqlite

import (
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
