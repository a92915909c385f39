package sqlite_test

import (
	"database/sql"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
)

// handOffBTrees are the B-trees a commit of the hand-off path writes
// (events published with their deliveries leased to their publisher, and
// the records of the commit before): a commit writes each page it touched
// whole, as a WAL frame with its own write, so each B-tree here is at
// least a frame of every such commit. sqlite_schema is page 1, whose
// header holds the file's size, which grows.
var handOffBTrees = []string{
	"attempts", "sqlite_autoindex_attempts_1",
	"deliveries", "deliveries_endpoint", "deliveries_event", "deliveries_lease", "deliveries_live",
	"deliveries_settled", "sqlite_autoindex_deliveries_1",
	"endpoint_stats", "outcome_buckets", "retry_budgets",
	"events", "events_idempotency", "events_namespace", "sqlite_autoindex_events_1",
	"sqlite_schema",
}

// TestHandOffCommitsWriteOnlyTheirBTrees: at a steady rate, a commit of
// three events and the previous three records (what the engine commits
// at about 500 events/s) writes the pages of handOffBTrees and of no other
// B-tree. Each page is a WAL frame of its own, written with two system
// calls whatever the events in the commit, much of why a commit costs
// about the same for one event as for ten (ADR 0027): an index added to
// this path, or a write that reaches another table, fails here and is a
// decision to measure.
func TestHandOffCommitsWriteOnlyTheirBTrees(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if _, err := s.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{Endpoint: ledger.Endpoint{ID: "shop/all", Namespace: "shop",
		Name: "all", URL: "https://r.example", EventTypes: []string{"*"}}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	// Events 2 ms apart, as at 500/s: IDs and keys in the order they
	// come, so that each index takes them at its end.
	const perCommit, commits, measured = 3, 400, 20
	events := batch(perCommit*commits, t0)
	for i, e := range events {
		at := t0.Add(time.Duration(i) * 2 * time.Millisecond)
		e.ID, e.Namespace, e.Now = ledger.NewID("evt", at), "shop", at
		e.IdempotencyKey = fmt.Sprintf("run-%08d", i)
		e.LeaseTo = &ledger.Lease{Owner: "w", Until: at.Add(time.Hour)}
	}
	var records []*ledger.AttemptRecordParams
	commit := func(i int) {
		res, err := s.WriteMany(ctx, &ledger.WriteBatch{Attempts: records, Events: events[i*perCommit : (i+1)*perCommit]})
		if err != nil {
			t.Fatal(err)
		}
		records = records[:0]
		for _, r := range res.Attempts {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		for _, r := range res.Events {
			if r.Err != nil || len(r.Leased) != 1 {
				t.Fatalf("insert: %v, %d deliveries leased; want 1", r.Err, len(r.Leased))
			}
			at := r.Event.CreatedAt.Add(time.Millisecond)
			records = append(records, &ledger.AttemptRecordParams{DeliveryID: r.Leased[0].Delivery.ID, Owner: "w", Now: at,
				Attempt: ledger.Attempt{StartedAt: at, Duration: time.Millisecond, StatusCode: 204},
				Next:    ledger.Next{State: ledger.StateDelivered}})
		}
	}
	// Past the first commits, while the ledger's pages are still being
	// allocated; then the WAL starts empty, and holds exactly the
	// measured commits.
	for i := range commits - measured {
		commit(i)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var busy, logged, copied int
	if err := db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logged, &copied); err != nil || busy != 0 {
		t.Fatalf("checkpoint: %v (busy %d, %d of %d frames copied)", err, busy, copied, logged)
	}
	for i := commits - measured; i < commits; i++ {
		commit(i)
	}

	pages := walCommits(t, path+"-wal")
	if len(pages) != measured {
		t.Fatalf("%d commits in the WAL; want %d", len(pages), measured)
	}
	names := btreePages(t, db)
	written := map[string]bool{}
	for _, c := range pages {
		for _, p := range c {
			written[names[p]] = true
		}
	}
	frames := make([]int, len(pages))
	for i, c := range pages {
		frames[i] = len(c)
	}
	slices.Sort(frames)
	t.Logf("frames per commit: %d–%d, median %d", frames[0], frames[len(frames)-1], frames[len(frames)/2])
	got := slices.Sorted(maps.Keys(written))
	want := slices.Sorted(slices.Values(handOffBTrees))
	if !slices.Equal(got, want) {
		t.Errorf("%d hand-off commits wrote the B-trees\n%v\nwant\n%v", measured, got, want)
	}
}

// walCommits reads the WAL file at path and returns, for each commit
// since the WAL last started, the page numbers of its frames.
func walCommits(t *testing.T, path string) [][]uint32 {
	t.Helper()
	wal, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(wal) < 32 {
		t.Fatalf("WAL of %d bytes", len(wal))
	}
	pageSize := int(binary.BigEndian.Uint32(wal[8:12]))
	salt := wal[16:24]
	var commits [][]uint32
	var cur []uint32
	for off := 32; off+24+pageSize <= len(wal); off += 24 + pageSize {
		h := wal[off : off+24]
		if string(h[8:16]) != string(salt) {
			break // a frame of the WAL's previous generation
		}
		cur = append(cur, binary.BigEndian.Uint32(h[0:4]))
		if binary.BigEndian.Uint32(h[4:8]) != 0 { // the database's size: a commit frame
			commits = append(commits, cur)
			cur = nil
		}
	}
	return commits
}

// btreePages maps each page of the ledger db to the B-tree it belongs to
// (the dbstat virtual table).
func btreePages(t *testing.T, db *sql.DB) map[uint32]string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT name, pageno FROM dbstat`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	names := map[uint32]string{}
	for rows.Next() {
		var name string
		var p uint32
		if err := rows.Scan(&name, &p); err != nil {
			t.Fatal(err)
		}
		names[p] = name
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}
