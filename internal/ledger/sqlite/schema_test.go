package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// longInList matches an IN list of more than two constants, which SQLite
// evaluates against an ephemeral table built again for every row that a
// statement writes when the list is in a CHECK or a partial index.
var longInList = regexp.MustCompile(`(?i)\bIN\s*\(\s*'[^']*'\s*,\s*'[^']*'\s*,`)

// TestSchemaHasNoLongInLists checks that no CHECK constraint and no partial
// index of the schema has such a list (migration 0011), and that the
// writer's statements that write deliveries build no ephemeral table: the
// writer parsed the schema as migrated, not as it was when the migration
// ran.
func TestSchemaHasNoLongInLists(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	rows, err := s.w.QueryContext(t.Context(), `SELECT name, sql FROM sqlite_schema WHERE sql IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, text string
		if err := rows.Scan(&name, &text); err != nil {
			t.Fatal(err)
		}
		if longInList.MatchString(text) {
			t.Errorf("%s has an IN list of more than two constants:\n%s", name, text)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	type statement struct {
		sql  string
		args int
	}
	statements := map[string]statement{"insert delivery": {writeSQL.deliveryInsert, 9}}
	for _, resolution := range []bool{false, true} {
		for _, terminal := range []bool{false, true} {
			for _, fromCopy := range []bool{false, true} {
				args := 10
				switch {
				case fromCopy:
					args = 30
				case terminal:
					args = 13
				case resolution:
					args = 12
				}
				statements[fmt.Sprintf("attempt update (resolution %t, terminal %t, from the lease's copy %t)", resolution, terminal, fromCopy)] =
					statement{attemptUpdateSQL(resolution, terminal, fromCopy), args}
			}
		}
	}
	for name, st := range statements {
		if n := opcodes(t, s.w, st.sql, make([]any, st.args)...)["OpenEphemeral"]; n != 0 {
			t.Errorf("%s opens %d ephemeral tables", name, n)
		}
	}
}

// opcodes counts the opcodes of q's program on db.
func opcodes(t *testing.T, db *sql.DB, q string, args ...any) map[string]int {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "EXPLAIN "+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", firstLine(q), err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		n[fmt.Sprint(vals[1])]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStateCheckHoldsAfterMigration: the state CHECK rewritten in place by
// migration 0011 still refuses a state that is not one, on the writer and
// after the migration is undone and applied again.
func TestStateCheckHoldsAfterMigration(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if _, err := s.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{Endpoint: ledger.Endpoint{ID: "shop/all", Namespace: "shop",
		Name: "all", URL: "https://r.example", EventTypes: []string{"*"}}, Now: now}); err != nil {
		t.Fatal(err)
	}
	res, err := s.EventInsertMany(ctx, []*ledger.EventInsertParams{{Namespace: "shop", Type: "order.created",
		Data: json.RawMessage(`{}`), Now: now}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("EventInsertMany = %+v, %v", res, err)
	}
	id := res[0].Deliveries[0].ID
	wantCheck := func(db *sql.DB, when string) {
		t.Helper()
		for _, state := range []string{"bogus", "", "Scheduled"} {
			if _, err := db.ExecContext(ctx, `UPDATE deliveries SET state = ?2 WHERE id = ?1`, id, state); err == nil ||
				!strings.Contains(err.Error(), "CHECK constraint failed") {
				t.Errorf("%s: state %q: error = %v, want a CHECK constraint failure", when, state, err)
			}
		}
		for _, state := range []string{"scheduled", "in_flight", "awaiting_ack", "delivered", "exhausted", "cancelled"} {
			if _, err := db.ExecContext(ctx, `UPDATE deliveries SET state = ?2 WHERE id = ?1`, id, state); err != nil {
				t.Errorf("%s: state %q: %v", when, state, err)
			}
		}
	}
	wantCheck(s.w, "migrated")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("sqlite", dsn(path, options{synchronous: "FULL"}, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 10); err != nil {
		t.Fatalf("down to 10: %v", err)
	}
	var text string
	if err := db.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'deliveries'`).Scan(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "CHECK (state IN (") {
		t.Errorf("down: deliveries keeps the rewritten CHECK:\n%s", text)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantCheck(s.w, "undone and migrated again")
}

// TestIdleReadsMigration: migration 0017 swaps endpoints_paused for
// endpoints_blocked and adds endpoint_stats.changed_at; its Down restores
// the index and drops the column.
func TestIdleReadsMigration(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", dsn(path, options{synchronous: "FULL"}, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	names := func(q string) map[string]bool {
		t.Helper()
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string]bool{}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatal(err)
			}
			got[name] = true
		}
		return got
	}
	want := func(when string, present, absent string, changedAt bool) {
		t.Helper()
		got := names(`SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'endpoints'`)
		if !got[present] || got[absent] {
			t.Errorf("%s: endpoints' indexes = %v, want %s and not %s", when, got, present, absent)
		}
		if got := names(`SELECT name FROM pragma_table_info('endpoint_stats')`)["changed_at"]; got != changedAt {
			t.Errorf("%s: endpoint_stats has changed_at: %v, want %v", when, got, changedAt)
		}
	}
	want("migrated", "endpoints_blocked", "endpoints_paused", true)
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 16); err != nil {
		t.Fatalf("down to 16: %v", err)
	}
	want("down", "endpoints_paused", "endpoints_blocked", false)
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	want("up again", "endpoints_blocked", "endpoints_paused", true)
}
