package sqlite_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
)

// BenchmarkLayout is the experiment behind ADR 0039: the statements the
// store runs for delivered events, on four layouts of the deliveries:
//   - wide: the ledger's schema as migrated;
//   - narrow: the live deliveries' mutable columns and the queue's indexes
//     in a narrow table, live_deliveries; the wide row inserted at publish
//     and written once more at settlement;
//   - settle: the wide row written once, at settlement; until then a
//     delivery is only its narrow row, which also carries its event,
//     endpoint and creation;
//   - keyed: one table, but deliveries and attempts clustered on their keys
//     (WITHOUT ROWID), so that neither writes a second B-tree for its key.
//
// path=handoff inserts deliveries leased to their publisher, then records
// them; path=claim inserts them scheduled, claims and records them. One
// iteration is a batch of 100 events with 1 KiB payloads, one durable
// commit per step. It reports this process's CPU per event (see
// BenchmarkLayoutPaired for a comparison that the machine's other load
// does not skew), the bytes written per event (WAL and checkpoints) and the
// file's size per event after a checkpoint. LAYOUT=name runs one layout.
func BenchmarkLayout(b *testing.B) {
	for _, layout := range []string{"wide", "narrow", "settle", "keyed"} {
		if only := os.Getenv("LAYOUT"); only != "" && only != layout {
			continue
		}
		for _, path := range []string{"handoff", "claim"} {
			b.Run(fmt.Sprintf("layout=%s/path=%s", layout, path), func(b *testing.B) {
				layoutBench(b, layout, path == "claim")
			})
		}
	}
}

// narrowSchema moves the live deliveries' mutable columns and the queue's
// indexes to live_deliveries.
const narrowSchema = `
DROP INDEX deliveries_due;
DROP INDEX deliveries_lease;
DROP INDEX deliveries_ack;
DROP INDEX deliveries_live;
DROP INDEX deliveries_expiring;
CREATE TABLE live_deliveries (
    id               TEXT    PRIMARY KEY,
    endpoint_id      TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    due_at           INTEGER NOT NULL,
    lease_owner      TEXT    NOT NULL DEFAULT '',
    lease_until      INTEGER,
    attempts         INTEGER NOT NULL DEFAULT 0,
    first_attempt_at INTEGER,
    ack_deadline     INTEGER,
    last_status      INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT    NOT NULL DEFAULT '',
    valid_until      INTEGER
) STRICT, WITHOUT ROWID;
CREATE INDEX live_due ON live_deliveries (due_at, id) WHERE state = 'scheduled';
CREATE INDEX live_lease ON live_deliveries (lease_until) WHERE state = 'in_flight';
CREATE INDEX live_ack ON live_deliveries (ack_deadline) WHERE state = 'awaiting_ack';
CREATE INDEX live_endpoint ON live_deliveries (endpoint_id, state, due_at, id);
CREATE INDEX live_expiring ON live_deliveries (valid_until)
    WHERE valid_until IS NOT NULL AND (state = 'scheduled' OR state = 'in_flight');
`

// settleSchema is narrowSchema with the columns a live delivery needs
// until its wide row exists.
var settleSchema = strings.Replace(narrowSchema, `    endpoint_id      TEXT    NOT NULL,`,
	`    event_id         TEXT    NOT NULL,
    endpoint_id      TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,`, 1) + `
CREATE INDEX live_event ON live_deliveries (event_id, id);
`

type layoutStmts struct {
	eventInsert, wideInsert, liveInsert           string
	claimDue, claimLease, claimedRows             string
	leased, wideSettle, liveDelete, attemptInsert string
}

var wideStmts = layoutStmts{
	eventInsert: `INSERT INTO events (id, namespace, type, data, secrets, secret_names, reissue_of, idempotency_key, body_hash, created_at,
			type_generation, replay_class, valid_until, policy_override)
		VALUES (?1, ?2, ?3, ?4, NULL, '[]', '', ?5, ?6, ?7, 0, '', NULL, NULL)
		ON CONFLICT (namespace, idempotency_key) WHERE idempotency_key <> '' DO NOTHING`,
	wideInsert: `INSERT INTO deliveries (id, event_id, endpoint_id, state, due_at, created_at, lease_owner, lease_until, resend, valid_until)
		VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, 0, NULL)`,
	claimDue: `SELECT id FROM deliveries WHERE state = 'scheduled' AND due_at <= ?1 ORDER BY due_at, id LIMIT ?2`,
	claimLease: `UPDATE deliveries SET state = 'in_flight', lease_owner = ?1, lease_until = ?2
		WHERE id IN (SELECT value FROM json_each(?3))`,
	claimedRows: `SELECT d.id, d.event_id, d.state, d.attempts, e.data FROM json_each(?1) j
		JOIN deliveries d ON d.id = j.value JOIN events e ON e.id = d.event_id ORDER BY j.key`,
	leased: `SELECT rowid, attempts FROM deliveries WHERE id = ?1 AND state = 'in_flight' AND lease_owner = ?2`,
	wideSettle: `UPDATE deliveries SET state = ?2, attempts = ?3, first_attempt_at = ?4, due_at = ?5,
		ack_deadline = NULL, last_status = ?6, last_error = '', lease_owner = '', lease_until = NULL, terminal_at = ?4
		WHERE rowid = ?1`,
	attemptInsert: `INSERT INTO attempts (delivery_id, number, owner, started_at, duration_ns, status_code, error, response_excerpt, recorded_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, '', ?7, ?4)`,
}

var narrowStmts = layoutStmts{
	eventInsert: wideStmts.eventInsert,
	wideInsert:  wideStmts.wideInsert,
	liveInsert: `INSERT INTO live_deliveries (id, endpoint_id, state, due_at, lease_owner, lease_until, valid_until)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL)`,
	claimDue: `SELECT id FROM live_deliveries WHERE state = 'scheduled' AND due_at <= ?1 ORDER BY due_at, id LIMIT ?2`,
	claimLease: `UPDATE live_deliveries SET state = 'in_flight', lease_owner = ?1, lease_until = ?2
		WHERE id IN (SELECT value FROM json_each(?3))`,
	claimedRows: `SELECT d.id, d.event_id, l.state, l.attempts, e.data FROM json_each(?1) j
		JOIN live_deliveries l ON l.id = j.value JOIN deliveries d ON d.id = j.value
		JOIN events e ON e.id = d.event_id ORDER BY j.key`,
	leased: `SELECT d.rowid, l.attempts FROM live_deliveries l JOIN deliveries d ON d.id = l.id
		WHERE l.id = ?1 AND l.state = 'in_flight' AND l.lease_owner = ?2`,
	wideSettle:    wideStmts.wideSettle,
	liveDelete:    `DELETE FROM live_deliveries WHERE id = ?1`,
	attemptInsert: wideStmts.attemptInsert,
}

var settleStmts = layoutStmts{
	eventInsert: wideStmts.eventInsert,
	liveInsert: `INSERT INTO live_deliveries (id, event_id, endpoint_id, created_at, state, due_at, lease_owner, lease_until, valid_until)
		VALUES (?1, ?7, ?2, ?4, ?3, ?4, ?5, ?6, NULL)`,
	claimDue:   narrowStmts.claimDue,
	claimLease: narrowStmts.claimLease,
	claimedRows: `SELECT l.id, l.event_id, l.state, l.attempts, e.data FROM json_each(?1) j
		JOIN live_deliveries l ON l.id = j.value JOIN events e ON e.id = l.event_id ORDER BY j.key`,
	leased: `SELECT id, attempts FROM live_deliveries WHERE id = ?1 AND state = 'in_flight' AND lease_owner = ?2`,
	// The wide row, written once: from the live row, as the record leaves it.
	wideSettle: `INSERT INTO deliveries (id, event_id, endpoint_id, state, due_at, attempts, first_attempt_at,
			last_status, terminal_at, created_at, resend)
		SELECT id, event_id, endpoint_id, ?2, ?5, ?3, ?4, ?6, ?4, created_at, 0 FROM live_deliveries WHERE id = ?1`,
	liveDelete:    narrowStmts.liveDelete,
	attemptInsert: wideStmts.attemptInsert,
}

func layoutBench(b *testing.B, layout string, claim bool) {
	l := openLayout(b, layout, claim)
	w0, cpu0 := wchar(b), processCPU(b)
	b.ResetTimer()
	for b.Loop() {
		l.cycle()
	}
	b.StopTimer()
	events := float64(layoutBatch * b.N)
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/events, "cpu-µs/event")
	b.ReportMetric(float64(wchar(b)-w0)/events, "written-B/event")
	b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(l.size())/events, "file-B/event")
}

// BenchmarkLayoutPaired runs the layouts of BenchmarkLayout side by side:
// each iteration delivers one batch on every layout, in a rotating order,
// and charges each the CPU time of this goroutine's thread while it ran,
// so that what else runs on the machine weighs on all of them alike.
func BenchmarkLayoutPaired(b *testing.B) {
	for _, path := range []string{"handoff", "claim"} {
		b.Run("path="+path, func(b *testing.B) {
			layouts := []string{"wide", "narrow", "settle", "keyed"}
			ls := make([]*layoutLedger, len(layouts))
			for i, name := range layouts {
				ls[i] = openLayout(b, name, path == "claim")
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu := make([]time.Duration, len(ls))
			i := 0
			for b.Loop() {
				for k := range ls {
					j := (i + k) % len(ls)
					t0 := threadCPU(b)
					ls[j].cycle()
					cpu[j] += threadCPU(b) - t0
				}
				i++
			}
			for j, name := range layouts {
				b.ReportMetric(float64(cpu[j].Microseconds())/float64(layoutBatch*b.N), name+"-cpu-µs/event")
			}
		})
	}
}

// threadCPU is the CPU time of the calling thread.
func threadCPU(b *testing.B) time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		b.Fatal(errno)
	}
	return time.Duration(ts.Nano())
}

// layoutBatch is the events of one cycle.
const layoutBatch = 100

// layoutLedger is one layout's database and its statements.
type layoutLedger struct {
	cycle func()       // delivers one batch
	size  func() int64 // the file's size after a checkpoint
}

func openLayout(b *testing.B, layout string, claim bool) *layoutLedger {
	narrow, keyed, settle := layout == "narrow" || layout == "settle", layout == "keyed", layout == "settle"
	ctx := b.Context()
	path := filepath.Join(b.TempDir(), "ledger.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{
		Endpoint: ledger.Endpoint{ID: "bench/all", Namespace: "bench", Name: "all", URL: "https://r.example", EventTypes: []string{"*"}},
		Now:      time.Now(),
	}); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "foreign_keys(1)", "cache_size(-32768)",
		"temp_store(MEMORY)", "secure_delete(ON)", "wal_autocheckpoint(4000)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String())
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { _ = db.Close() })
	st := wideStmts
	if keyed {
		rebuildKeyed(ctx, b, db)
		st.leased = `SELECT id, attempts FROM deliveries WHERE id = ?1 AND state = 'in_flight' AND lease_owner = ?2`
		st.wideSettle = strings.Replace(st.wideSettle, "WHERE rowid = ?1", "WHERE id = ?1", 1)
	}
	if narrow {
		schema := narrowSchema
		st = narrowStmts
		if settle {
			st, schema = settleStmts, settleSchema
		}
		if _, err := db.ExecContext(ctx, schema); err != nil {
			b.Fatal(err)
		}
	}
	prep := func(text string) *sql.Stmt {
		if text == "" {
			return nil
		}
		p, err := db.PrepareContext(ctx, text)
		if err != nil {
			b.Fatalf("%s: %v", text, err)
		}
		return p
	}
	var (
		eventInsert, wideInsert, liveInsert = prep(st.eventInsert), prep(st.wideInsert), prep(st.liveInsert)
		claimDue, claimLease, claimedRows   = prep(st.claimDue), prep(st.claimLease), prep(st.claimedRows)
		leased, wideSettle, liveDelete      = prep(st.leased), prep(st.wideSettle), prep(st.liveDelete)
		attemptInsert                       = prep(st.attemptInsert)
	)
	const n = layoutBatch
	h := sha256.Sum256(payload)
	tx := func(f func(*sql.Tx)) {
		t, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		f(t)
		if err := t.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	exec := func(t *sql.Tx, st *sql.Stmt, args ...any) {
		if _, err := t.StmtContext(ctx, st).ExecContext(ctx, args...); err != nil {
			b.Fatal(err)
		}
	}
	ids := make([]string, n)
	l := &layoutLedger{}
	l.cycle = func() {
		now := time.Now()
		ns := now.UnixNano()
		state, owner, until := "in_flight", "w", any(now.Add(time.Hour).UnixNano())
		if claim {
			state, owner, until = "scheduled", "", nil
		}
		tx(func(t *sql.Tx) {
			for i := range ids {
				ev := ledger.NewID("evt", now)
				ids[i] = ledger.NewID("dlv", now)
				exec(t, eventInsert, ev, "bench", "order.created", []byte(payload), ev, h[:], ns)
				if !settle {
					exec(t, wideInsert, ids[i], ev, "bench/all", state, ns, owner, until)
				}
				if narrow {
					args := []any{ids[i], "bench/all", state, ns, owner, until}
					if settle {
						args = append(args, ev)
					}
					exec(t, liveInsert, args...)
				}
			}
		})
		if claim {
			tx(func(t *sql.Tx) { claimBatch(ctx, b, t, claimDue, claimLease, claimedRows, ns, ids) })
		}
		tx(func(t *sql.Tx) {
			for _, id := range ids {
				var (
					rowid    any // the rowid, or the key when the table has none
					attempts int
				)
				if err := t.StmtContext(ctx, leased).QueryRowContext(ctx, id, "w").Scan(&rowid, &attempts); err != nil {
					b.Fatal(err)
				}
				exec(t, wideSettle, rowid, "delivered", attempts+1, ns, ns, 200)
				exec(t, attemptInsert, id, attempts+1, "w", ns, int64(time.Millisecond), 200, []byte("ok"))
				if narrow {
					exec(t, liveDelete, id)
				}
			}
		})
	}
	l.size = func() int64 {
		if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			b.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		return fi.Size()
	}
	return l
}

// rebuildKeyed replaces deliveries and attempts with copies clustered on
// their keys, made from the migrated schema's own text, and recreates
// their indexes (with foreign keys off: the tables are empty; held_acks,
// which the benchmark does not write, goes).
func rebuildKeyed(ctx context.Context, b *testing.B, db *sql.DB) {
	tables := schemaText(ctx, b, db, `SELECT sql FROM sqlite_schema WHERE type = 'table' AND name IN ('deliveries', 'attempts')`)
	indexes := schemaText(ctx, b, db, `SELECT sql FROM sqlite_schema
		WHERE type = 'index' AND tbl_name IN ('deliveries', 'attempts') AND sql IS NOT NULL`)
	stmts := []string{`PRAGMA foreign_keys = OFF`, `DROP TABLE held_acks`, `DROP TABLE attempts`, `DROP TABLE deliveries`}
	for _, q := range tables {
		if !strings.HasSuffix(q, ") STRICT") {
			b.Fatalf("not a STRICT table: %s", q)
		}
		stmts = append(stmts, q+", WITHOUT ROWID")
	}
	stmts = append(append(stmts, indexes...), `PRAGMA foreign_keys = ON`)
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
}

// schemaText returns the first column of q's rows.
func schemaText(ctx context.Context, b *testing.B, db *sql.DB, q string) []string {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			b.Fatal(err)
		}
		out = append(out, text)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

func claimBatch(ctx context.Context, b *testing.B, t *sql.Tx, due, lease, rows *sql.Stmt, now int64, want []string) {
	r, err := t.StmtContext(ctx, due).QueryContext(ctx, now, len(want))
	if err != nil {
		b.Fatal(err)
	}
	var got []string
	for r.Next() {
		var id string
		if err := r.Scan(&id); err != nil {
			b.Fatal(err)
		}
		got = append(got, id)
	}
	if err := r.Close(); err != nil {
		b.Fatal(err)
	}
	if len(got) != len(want) {
		b.Fatalf("claimed %d, want %d", len(got), len(want))
	}
	list, _ := json.Marshal(got)
	if _, err := t.StmtContext(ctx, lease).ExecContext(ctx, "w", now+int64(time.Minute), string(list)); err != nil {
		b.Fatal(err)
	}
	r, err = t.StmtContext(ctx, rows).QueryContext(ctx, string(list))
	if err != nil {
		b.Fatal(err)
	}
	for r.Next() {
		var (
			id, ev, state string
			attempts      int
			data          []byte
		)
		if err := r.Scan(&id, &ev, &state, &attempts, &data); err != nil {
			b.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		b.Fatal(err)
	}
}

// wchar is the bytes this process has passed to write(2) so far.
func wchar(b *testing.B) int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no wchar in /proc/self/io")
	return 0
}
