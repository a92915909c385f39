package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// BenchmarkLayout is the PostgreSQL half of the experiment behind ADR
// 0039: the set-based statements the store runs for batches of 100
// delivered events, on three layouts of the deliveries (see the SQLite
// store's BenchmarkLayout): wide (the schema as migrated), narrow (the
// queue in live_deliveries, the wide row inserted at publish and updated
// at settlement) and settle (the wide row inserted once, at settlement).
// path=handoff inserts the deliveries leased to their publisher and
// records them; path=claim inserts them scheduled, claims and records
// them; one transaction per step. It reports the server's CPU per event
// (this session's server process, from /proc: the server must run on this
// machine) and the WAL this session wrote per event, from EXPLAIN (ANALYZE,
// WAL) of every statement of five extra batches (the server is shared:
// pg_stat_wal would count the others' WAL too). LAYOUT=name runs one.
func BenchmarkLayout(b *testing.B) {
	for _, layout := range []string{"wide", "narrow", "settle"} {
		if only := os.Getenv("LAYOUT"); only != "" && only != layout {
			continue
		}
		for _, path := range []string{"handoff", "claim"} {
			b.Run(fmt.Sprintf("layout=%s/path=%s", layout, path), func(b *testing.B) {
				pgLayoutBench(b, layout, path == "claim")
			})
		}
	}
}

const pgNarrowSchema = `
DROP INDEX deliveries_claimable;
DROP INDEX deliveries_ack;
DROP INDEX deliveries_expiring;
CREATE TABLE live_deliveries (
	id          text PRIMARY KEY,
	seq         bigint NOT NULL,
	endpoint_id text NOT NULL,
	state       text NOT NULL,
	attempts    integer NOT NULL DEFAULT 0,
	due_at      bigint NOT NULL,
	lease_owner text NOT NULL DEFAULT '',
	lease_until bigint,
	ack_deadline bigint,
	valid_until bigint
);
CREATE INDEX live_claimable ON live_deliveries (due_at, seq) WHERE state IN ('scheduled', 'in_flight');
CREATE INDEX live_ack ON live_deliveries (ack_deadline, id) WHERE state = 'awaiting_ack';
CREATE INDEX live_expiring ON live_deliveries (valid_until)
	WHERE valid_until IS NOT NULL AND state IN ('scheduled', 'in_flight');
CREATE INDEX live_endpoint ON live_deliveries (endpoint_id);
`

// pgSettleSchema is pgNarrowSchema with what a live delivery needs until
// its wide row exists.
var pgSettleSchema = strings.Replace(pgNarrowSchema, "\tendpoint_id text NOT NULL,",
	"\tevent_id text NOT NULL,\n\tendpoint_id text NOT NULL,\n\tcreated_at bigint NOT NULL,", 1) + `
CREATE INDEX live_event ON live_deliveries (event_id, id);
CREATE SEQUENCE live_seq;
`

const pgSettleInsert = `
	WITH ins AS (
		INSERT INTO events (id, namespace, type, data, secret_names, reissue_of, idempotency_key, body_hash, created_at,
			type_generation, replay_class)
		SELECT u.id, 'shop', 'order.created', u.data, '[]', '', u.id, '\x00', $4, 0, ''
		FROM unnest($1::text[], $3::bytea[]) AS u(id, data)
		ON CONFLICT (namespace, idempotency_key) WHERE idempotency_key <> '' DO NOTHING
		RETURNING id
	)
	INSERT INTO live_deliveries (id, seq, event_id, endpoint_id, created_at, state, due_at, lease_owner, lease_until)
	SELECT u.id, nextval('live_seq'), u.event_id, 'shop/all', $4, $5, $4, $6, $7
	FROM unnest($2::text[], $1::text[]) WITH ORDINALITY AS u(id, event_id, n)
	JOIN ins ON ins.id = u.event_id
	ORDER BY u.n`

const pgSettleWide = `
	INSERT INTO deliveries (id, event_id, endpoint_id, state, attempts, due_at, first_attempt_at, lease_owner,
		last_status, last_error, exhaust_reason, resolution, terminal_at, created_at, resend)
	SELECT l.id, l.event_id, l.endpoint_id, 'delivered', 1, $2, $2, '', 200, '', '', '', $2, l.created_at, false
	FROM live_deliveries l WHERE l.id = ANY($1::text[])`

const pgLayoutInsert = `
	WITH ins AS (
		INSERT INTO events (id, namespace, type, data, secret_names, reissue_of, idempotency_key, body_hash, created_at,
			type_generation, replay_class)
		SELECT u.id, 'shop', 'order.created', u.data, '[]', '', u.id, '\x00', $4, 0, ''
		FROM unnest($1::text[], $3::bytea[]) AS u(id, data)
		ON CONFLICT (namespace, idempotency_key) WHERE idempotency_key <> '' DO NOTHING
		RETURNING id
	)
	INSERT INTO deliveries (id, event_id, endpoint_id, state, attempts, due_at, lease_owner, lease_until,
		last_status, last_error, exhaust_reason, resolution, created_at, resend)
	SELECT u.id, u.event_id, 'shop/all', $5, 0, $4, $6, $7, 0, '', '', '', $4, false
	FROM unnest($2::text[], $1::text[]) WITH ORDINALITY AS u(id, event_id, n)
	JOIN ins ON ins.id = u.event_id
	ORDER BY u.n`

const pgLayoutLiveInsert = `
	INSERT INTO live_deliveries (id, seq, endpoint_id, state, due_at, lease_owner, lease_until)
	SELECT d.id, d.seq, d.endpoint_id, d.state, d.due_at, d.lease_owner, d.lease_until
	FROM deliveries d WHERE d.id = ANY($1::text[])`

var pgLayoutClaim = map[bool]string{
	false: `
	WITH picked AS (
		SELECT id FROM deliveries WHERE state IN ('scheduled', 'in_flight') AND state = 'scheduled' AND due_at <= $1
		ORDER BY due_at, seq LIMIT 100 FOR UPDATE SKIP LOCKED
	), claimed AS (
		UPDATE deliveries d SET state = 'in_flight', lease_owner = 'w', lease_until = $2
		FROM picked WHERE d.id = picked.id RETURNING d.id, d.event_id, d.attempts
	)
	SELECT c.id, c.attempts, e.data FROM claimed c JOIN events e ON e.id = c.event_id`,
	true: `
	WITH picked AS (
		SELECT id FROM live_deliveries WHERE state IN ('scheduled', 'in_flight') AND state = 'scheduled' AND due_at <= $1
		ORDER BY due_at, seq LIMIT 100 FOR UPDATE SKIP LOCKED
	), claimed AS (
		UPDATE live_deliveries l SET state = 'in_flight', lease_owner = 'w', lease_until = $2
		FROM picked WHERE l.id = picked.id RETURNING l.id, l.attempts
	)
	SELECT c.id, c.attempts, e.data FROM claimed c JOIN deliveries d ON d.id = c.id JOIN events e ON e.id = d.event_id`,
}

const pgSettleClaim = `
	WITH picked AS (
		SELECT id FROM live_deliveries WHERE state IN ('scheduled', 'in_flight') AND state = 'scheduled' AND due_at <= $1
		ORDER BY due_at, seq LIMIT 100 FOR UPDATE SKIP LOCKED
	), claimed AS (
		UPDATE live_deliveries l SET state = 'in_flight', lease_owner = 'w', lease_until = $2
		FROM picked WHERE l.id = picked.id RETURNING l.id, l.event_id, l.attempts
	)
	SELECT c.id, c.attempts, e.data FROM claimed c JOIN events e ON e.id = c.event_id`

var pgLayoutLeased = map[bool]string{
	false: `SELECT id, attempts FROM deliveries WHERE id = ANY($1::text[]) AND state = 'in_flight' AND lease_owner = 'w'
		ORDER BY id FOR UPDATE`,
	true: `SELECT id, attempts FROM live_deliveries WHERE id = ANY($1::text[]) AND state = 'in_flight' AND lease_owner = 'w'
		ORDER BY id FOR UPDATE`,
}

const pgLayoutAttempts = `
	INSERT INTO attempts (delivery_id, number, started_at, duration, status_code, error, response_excerpt)
	SELECT u.id, 1, $2, 1000000, 200, '', '\x6f6b' FROM unnest($1::text[]) AS u(id)`

const pgLayoutSettle = `
	UPDATE deliveries d SET state = 'delivered', attempts = 1, due_at = $2,
		first_attempt_at = $2, lease_owner = '', lease_until = NULL,
		ack_deadline = NULL, last_status = 200, last_error = '',
		exhaust_reason = '', resolution = '', terminal_at = $2
	FROM unnest($1::text[]) AS u(id)
	WHERE d.id = u.id`

const pgLayoutLiveDelete = `DELETE FROM live_deliveries WHERE id = ANY($1::text[])`

func pgLayoutBench(b *testing.B, layout string, claim bool) {
	l := openPgLayout(b, layout, claim)
	cpu0 := sessionCPU(b, l.pid)
	b.ResetTimer()
	for b.Loop() {
		l.cycle()
	}
	b.StopTimer()
	b.ReportMetric(float64(pgLayoutBatch*b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64((sessionCPU(b, l.pid)-cpu0).Microseconds())/float64(pgLayoutBatch*b.N), "server-cpu-µs/event")
	b.ReportMetric(l.wal(5), "wal-B/event")
}

// BenchmarkLayoutPaired runs the layouts of BenchmarkLayout side by side:
// each iteration delivers one batch on every layout, in a rotating order,
// and each layout's server CPU is its own session's, so that what else
// runs on the machine weighs on all of them alike.
func BenchmarkLayoutPaired(b *testing.B) {
	for _, path := range []string{"handoff", "claim"} {
		b.Run("path="+path, func(b *testing.B) {
			layouts := []string{"wide", "narrow", "settle"}
			ls := make([]*pgLayoutLedger, len(layouts))
			cpu0 := make([]time.Duration, len(layouts))
			for i, name := range layouts {
				ls[i] = openPgLayout(b, name, path == "claim")
				cpu0[i] = sessionCPU(b, ls[i].pid)
			}
			i := 0
			for b.Loop() {
				for k := range ls {
					ls[(i+k)%len(ls)].cycle()
				}
				i++
			}
			for j, name := range layouts {
				cpu := sessionCPU(b, ls[j].pid) - cpu0[j]
				b.ReportMetric(float64(cpu.Microseconds())/float64(pgLayoutBatch*b.N), name+"-server-cpu-µs/event")
			}
		})
	}
}

// pgLayoutBatch is the events of one cycle.
const pgLayoutBatch = 100

// pgLayoutLedger is one layout's schema and session.
type pgLayoutLedger struct {
	cycle func()                   // delivers one batch
	wal   func(cycles int) float64 // WAL bytes per event of that many more cycles
	pid   uint32                   // the session's server process
}

func openPgLayout(b *testing.B, layout string, claim bool) *pgLayoutLedger {
	narrow, settle := layout != "wide", layout == "settle"
	schema := pgtest.NewSchema(b)
	s := pgtest.OpenStore(b, schema)
	upsert(b, s, endpoint("shop", "all", "*"))
	conn := rawConn(b, schema)
	ctx := context.Background()
	if narrow {
		schema := pgNarrowSchema
		if settle {
			schema = pgSettleSchema
		}
		if _, err := conn.Exec(ctx, schema); err != nil {
			b.Fatal(err)
		}
	}
	const n = pgLayoutBatch
	data := make([][]byte, n)
	for i := range data {
		data[i] = []byte(`{"pad":"` + strings.Repeat("x", 1024-10) + `"}`)
	}
	var walBytes int64 // summed by exec when explain is on
	explain := false
	exec := func(tx pgx.Tx, q string, args ...any) {
		if !explain {
			if _, err := tx.Exec(ctx, q, args...); err != nil {
				b.Fatalf("%v: %s", err, q)
			}
			return
		}
		var plan []struct {
			Plan struct {
				WALBytes int64 `json:"WAL Bytes"`
			} `json:"Plan"`
		}
		var raw []byte
		if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, WAL, FORMAT JSON) "+q, args...).Scan(&raw); err != nil {
			b.Fatalf("%v: %s", err, q)
		}
		if err := json.Unmarshal(raw, &plan); err != nil {
			b.Fatal(err)
		}
		walBytes += plan[0].Plan.WALBytes
	}
	tx := func(f func(pgx.Tx)) {
		t, err := conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		f(t)
		if err := t.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	l := &pgLayoutLedger{pid: conn.PgConn().PID()}
	l.cycle = func() {
		now := time.Now()
		ns := now.UnixNano()
		evs, ids := make([]string, n), make([]string, n)
		for i := range ids {
			evs[i], ids[i] = ledger.NewID("evt", now), ledger.NewID("dlv", now)
		}
		state, owner, until := "in_flight", "w", any(now.Add(time.Hour).UnixNano())
		if claim {
			state, owner, until = "scheduled", "", nil
		}
		tx(func(t pgx.Tx) {
			switch {
			case settle:
				exec(t, pgSettleInsert, evs, ids, data, ns, state, owner, until)
			case narrow:
				exec(t, pgLayoutInsert, evs, ids, data, ns, state, owner, until)
				exec(t, pgLayoutLiveInsert, ids)
			default:
				exec(t, pgLayoutInsert, evs, ids, data, ns, state, owner, until)
			}
		})
		if claim {
			q := pgLayoutClaim[narrow]
			if settle {
				q = pgSettleClaim
			}
			tx(func(t pgx.Tx) { exec(t, q, ns, ns+int64(time.Minute)) })
		}
		tx(func(t pgx.Tx) {
			exec(t, pgLayoutLeased[narrow], ids)
			if settle {
				exec(t, pgSettleWide, ids, ns)
			} else {
				exec(t, pgLayoutSettle, ids, ns)
			}
			exec(t, pgLayoutAttempts, ids, ns)
			if narrow {
				exec(t, pgLayoutLiveDelete, ids)
			}
		})
	}
	l.wal = func(cycles int) float64 {
		explain, walBytes = true, 0
		defer func() { explain = false }()
		for range cycles {
			l.cycle()
		}
		return float64(walBytes) / float64(n*cycles)
	}
	return l
}

// sessionCPU is the CPU time the server process pid ran so far, from
// /proc/pid/schedstat.
func sessionCPU(b *testing.B, pid uint32) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		b.Fatalf("the server's CPU needs the server on this machine: %v", err)
	}
	ns, err := strconv.ParseInt(strings.Fields(string(raw))[0], 10, 64)
	if err != nil {
		b.Fatalf("schedstat of %d: %v", pid, err)
	}
	return time.Duration(ns)
}
