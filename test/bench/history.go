package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
)

// Flat cost in the ledger's size (issue #15, goal 4): the same engine
// throughput, the same ledger call latencies and the same endpoint status
// refresh cost on an empty ledger and on one holding cfg.historyEvents
// events of history (delivered, not pending). The history is generated
// by the database itself (INSERT ... SELECT over a generated series, in
// transactions of historyChunk events), so that a preload of 10,000,000
// takes minutes, not hours.

const (
	historyChunk = 1_000_000
	// historyExhausted deliveries of the history are unresolved exhausted
	// ones, whatever its size: the controller's status refresh lists them.
	historyExhausted = 1000
	opsEvents        = 10_000 // events of the ledger call measurement
	opsBatch         = 100    // the engine's batch size
)

// historyChunkFor is the events generated per transaction: at most
// historyChunk, and at least five sizes on the way, for the status
// refresh's curve.
func historyChunkFor(n int) int { return min(historyChunk, max(1, (n+4)/5)) }

type ledgerOps struct{ insert, claim, record dist }

// refreshCost is the median latency of the ledger calls one
// WebhookEndpoint status refresh makes (controllers/
// webhookendpoint_controller.go and endpoint_exhausted.go): the
// endpoint, its counters, and, with unresolved exhausted deliveries, the
// first of them and the newest within a window.
type refreshCost struct {
	get, stats, exhaustedFirst, exhaustedWindow time.Duration
}

func (r refreshCost) total() time.Duration {
	return r.get + r.stats + r.exhaustedFirst + r.exhaustedWindow
}

type historyPoint struct {
	events  int
	refresh refreshCost
}

type historyState struct {
	events int
	ops    ledgerOps
	sat    costRun
}

type historyStore struct {
	name          string
	preloadEvents int
	preloadTime   time.Duration
	bytes         int64 // the ledger on disk with the history
	points        []historyPoint
	empty, full   historyState
}

type historyResults struct {
	events           int
	sqlite, postgres historyStore
}

// benchLedger is one ledger of the history step: how to open it in the
// bench process, generate history in it, size it, and run an engine on it.
type benchLedger struct {
	name       string
	open       func(ctx context.Context) (ledger.Store, error)
	generate   func(ctx context.Context, lo, hi int) error
	size       func(ctx context.Context) (int64, error)
	engineArgs []string
	serverPIDs func() ([]int, error)
	cleanup    func()
}

func runHistory(cfg config, bin, work string, h *historyResults) error {
	t, err := startTracker()
	if err != nil {
		return err
	}
	defer t.close()
	h.events = cfg.historyEvents
	if listed(cfg.historyStores, "sqlite") {
		step(fmt.Sprintf("flat cost with %d events of history on SQLite", cfg.historyEvents))
		sq := sqliteHistoryLedger(filepath.Join(work, "history.db"))
		defer sq.cleanup()
		if h.sqlite, err = historyOn(cfg, bin, t, sq); err != nil {
			return err
		}
		sq.cleanup() // the disk back before the next store fills it
	}
	if !listed(cfg.historyStores, "postgres") {
		return nil
	}
	step(fmt.Sprintf("flat cost with %d events of history on PostgreSQL", cfg.historyEvents))
	pg := postgresHistoryLedger(cfg.postgres, fmt.Sprintf("hk_bench_history_%d", time.Now().UnixNano()))
	defer pg.cleanup()
	h.postgres, err = historyOn(cfg, bin, t, pg)
	return err
}

func historyOn(cfg config, bin string, t *tracker, bl benchLedger) (historyStore, error) {
	ctx := context.Background()
	hs := historyStore{name: bl.name, preloadEvents: cfg.historyEvents}
	store, err := bl.open(ctx)
	if err != nil {
		return hs, err
	}
	if err := registerBenchEndpoint(ctx, store, t.url); err != nil {
		store.Close()
		return hs, err
	}
	point := func(events int) error {
		r, err := measureRefresh(ctx, store)
		if err != nil {
			return err
		}
		hs.points = append(hs.points, historyPoint{events: events, refresh: r})
		fmt.Printf("  %d events of history: status refresh %s (get %s, stats %s, exhausted first %s, window %s)\n",
			events, r.total(), r.get, r.stats, r.exhaustedFirst, r.exhaustedWindow)
		return nil
	}
	measureState := func(events int) (historyState, error) {
		s := historyState{events: events}
		var err error
		if s.ops, err = measureOps(ctx, store, fmt.Sprintf("ops%d", events)); err != nil {
			return s, err
		}
		store.Close()
		s.sat, err = measureEngine(cfg, bin, t, fmt.Sprintf("%s-history-%d", bl.name, events), bl.engineArgs, bl.serverPIDs, 0)
		if err != nil {
			return s, err
		}
		store, err = bl.open(ctx)
		fmt.Printf("  %d events of history: insert %s, claim %s, record %s per batch of %d\n",
			events, s.ops.insert, s.ops.claim, s.ops.record, opsBatch)
		return s, err
	}
	defer func() { store.Close() }()
	if err := point(0); err != nil {
		return hs, err
	}
	if hs.empty, err = measureState(0); err != nil {
		return hs, err
	}
	var generating time.Duration
	chunk := historyChunkFor(cfg.historyEvents)
	for lo := 0; lo < cfg.historyEvents; lo += chunk {
		hi := min(lo+chunk, cfg.historyEvents)
		t0 := time.Now()
		if err := bl.generate(ctx, lo, hi); err != nil {
			return hs, fmt.Errorf("generate history %d..%d: %w", lo, hi, err)
		}
		generating += time.Since(t0)
		fmt.Printf("  generated %d events of history in %s\n", hi, generating.Round(time.Second))
		if err := point(hi); err != nil {
			return hs, err
		}
	}
	hs.preloadTime = generating
	if hs.bytes, err = bl.size(ctx); err != nil {
		return hs, err
	}
	fmt.Printf("  preload: %d events in %s, ledger %.2f GiB\n", cfg.historyEvents, generating.Round(time.Second), float64(hs.bytes)/(1<<30))
	if hs.full, err = measureState(cfg.historyEvents); err != nil {
		return hs, err
	}
	return hs, nil
}

// measureRefresh times the ledger calls of one endpoint status refresh,
// 21 times each, and keeps the medians.
func measureRefresh(ctx context.Context, store ledger.Store) (refreshCost, error) {
	const rounds = 21
	var get, stats, first, window []time.Duration
	id := ledger.EndpointID("bench", "receiver")
	for range rounds {
		t0 := time.Now()
		if _, err := store.EndpointGet(ctx, id); err != nil {
			return refreshCost{}, err
		}
		t1 := time.Now()
		if _, err := store.EndpointStats(ctx, id); err != nil {
			return refreshCost{}, err
		}
		t2 := time.Now()
		if _, err := store.ExhaustedList(ctx, &ledger.ExhaustedListParams{EndpointID: id, Limit: 1}); err != nil {
			return refreshCost{}, err
		}
		t3 := time.Now()
		if _, err := store.ExhaustedList(ctx, &ledger.ExhaustedListParams{EndpointID: id, ExhaustedAfter: t3.Add(-24 * time.Hour), Limit: 500}); err != nil {
			return refreshCost{}, err
		}
		t4 := time.Now()
		get, stats, first, window = append(get, t1.Sub(t0)), append(stats, t2.Sub(t1)), append(first, t3.Sub(t2)), append(window, t4.Sub(t3))
	}
	return refreshCost{get: distOf(get).p50, stats: distOf(stats).p50, exhaustedFirst: distOf(first).p50, exhaustedWindow: distOf(window).p50}, nil
}

// measureOps times the engine's three hot ledger calls, batch by batch:
// ingest opsEvents 1 KiB events, claim them, record each delivered.
func measureOps(ctx context.Context, store ledger.Store, run string) (ledgerOps, error) {
	var ins, claims, recs []time.Duration
	data := json.RawMessage(`{"pad":"` + payload + `"}`)
	for b := 0; b < opsEvents; b += opsBatch {
		params := make([]*ledger.EventInsertParams, opsBatch)
		now := time.Now()
		for i := range params {
			params[i] = &ledger.EventInsertParams{
				ID: ledger.NewID("evt", now), Namespace: "bench", Type: "order.created", Data: data,
				IdempotencyKey: run + "-" + strconv.Itoa(b+i), Now: now,
			}
		}
		t0 := time.Now()
		if _, err := store.EventInsertMany(ctx, params); err != nil {
			return ledgerOps{}, err
		}
		ins = append(ins, time.Since(t0))
	}
	const owner = "bench-ops"
	for {
		t0 := time.Now()
		claimed, err := store.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: owner, Now: t0, LeaseFor: time.Minute, Limit: opsBatch})
		if err != nil {
			return ledgerOps{}, err
		}
		if len(claimed) == 0 {
			break
		}
		claims = append(claims, time.Since(t0))
		params := make([]*ledger.AttemptRecordParams, len(claimed))
		now := time.Now()
		for i, c := range claimed {
			params[i] = &ledger.AttemptRecordParams{
				DeliveryID: c.Delivery.ID, Owner: owner, Now: now,
				Attempt: ledger.Attempt{DeliveryID: c.Delivery.ID, StartedAt: now, Duration: time.Millisecond, StatusCode: 204},
				Next:    ledger.Next{State: ledger.StateDelivered},
			}
		}
		t1 := time.Now()
		if _, err := store.AttemptRecordMany(ctx, params); err != nil {
			return ledgerOps{}, err
		}
		recs = append(recs, time.Since(t1))
	}
	if len(recs)*opsBatch < opsEvents {
		return ledgerOps{}, fmt.Errorf("claimed %d batches of %d events", len(recs), opsEvents)
	}
	return ledgerOps{insert: distOf(ins), claim: distOf(claims), record: distOf(recs)}, nil
}

// historyEpoch is when the generated history happened: a year ago, one
// event a millisecond, so that it is older than anything the runs add.
func historyEpoch() int64 { return time.Now().Add(-365 * 24 * time.Hour).UnixNano() }

func sqliteHistoryLedger(path string) benchLedger {
	epoch := historyEpoch()
	return benchLedger{
		name: "sqlite",
		open: func(ctx context.Context) (ledger.Store, error) { return sqlite.Open(ctx, path) },
		generate: func(ctx context.Context, lo, hi int) error {
			// A connection of its own beside the open store: SQLite's own
			// locks order it with the store's writer. The generated history
			// needs no fsync of its own: the checkpoint in size writes it.
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(60000)&_pragma=synchronous(OFF)")
			if err != nil {
				return err
			}
			defer db.Close()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			series := `WITH RECURSIVE s(i) AS (SELECT ?1 UNION ALL SELECT i+1 FROM s WHERE i+1 < ?2) `
			at := `(?3 + i*1000000)`
			stmts := []string{
				series + `INSERT INTO events (id, namespace, type, data, idempotency_key, body_hash, created_at, payload_pruned_at)
					SELECT printf('evt_00%024d', i), 'bench', 'order.created', NULL, 'history-' || i, randomblob(32), ` + at + `, ` + at + ` + 3600000000000 FROM s`,
				series + `INSERT INTO deliveries (id, event_id, endpoint_id, state, due_at, attempts, first_attempt_at, last_status, exhaust_reason, resolution, terminal_at, created_at, payload_pruned)
					SELECT printf('dlv_00%024d', i), printf('evt_00%024d', i), 'bench/receiver',
						CASE WHEN i < ` + strconv.Itoa(historyExhausted) + ` THEN 'exhausted' ELSE 'delivered' END,
						` + at + `, 1, ` + at + `, CASE WHEN i < ` + strconv.Itoa(historyExhausted) + ` THEN 500 ELSE 204 END,
						CASE WHEN i < ` + strconv.Itoa(historyExhausted) + ` THEN 'MaxAttempts' ELSE '' END,
						CASE WHEN i < ` + strconv.Itoa(historyExhausted) + ` THEN 'unresolved' ELSE '' END,
						` + at + ` + 2000000, ` + at + `, 1 FROM s`,
				series + `INSERT INTO attempts (delivery_id, number, owner, started_at, duration_ns, status_code, recorded_at)
					SELECT printf('dlv_00%024d', i), 1, 'history', ` + at + `, 2000000, CASE WHEN i < ` + strconv.Itoa(historyExhausted) + ` THEN 500 ELSE 204 END, ` + at + ` + 2000000 FROM s`,
				`UPDATE endpoint_stats SET delivered = delivered + ?2 - ?1 - max(0, min(?2, ` + strconv.Itoa(historyExhausted) + `) - ?1),
					exhausted_unresolved = exhausted_unresolved + max(0, min(?2, ` + strconv.Itoa(historyExhausted) + `) - ?1)
					WHERE endpoint_id = 'bench/receiver' AND ?3 IS NOT NULL`,
			}
			for _, s := range stmts {
				if _, err := tx.ExecContext(ctx, s, lo, hi, epoch); err != nil {
					return err
				}
			}
			return tx.Commit()
		},
		size: func(ctx context.Context) (int64, error) {
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(60000)")
			if err != nil {
				return 0, err
			}
			defer db.Close()
			if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				return 0, err
			}
			return sqliteFileBytes(path), nil
		},
		engineArgs: []string{"--ledger", "sqlite://" + path},
		cleanup: func() {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(path + suffix)
			}
		},
	}
}

// sqliteFileBytes is the size of a SQLite ledger: the file and its WAL.
func sqliteFileBytes(path string) int64 {
	var n int64
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(path + suffix); err == nil {
			n += fi.Size()
		}
	}
	return n
}

func postgresHistoryLedger(dsn, schema string) benchLedger {
	epoch := historyEpoch()
	withConn := func(ctx context.Context, f func(conn *pgx.Conn) error) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `SET search_path TO `+pgx.Identifier{schema}.Sanitize()); err != nil {
			return err
		}
		return f(conn)
	}
	ex := strconv.Itoa(historyExhausted)
	return benchLedger{
		name: "postgres",
		open: func(ctx context.Context) (ledger.Store, error) {
			return postgres.Open(ctx, dsn, postgres.WithSchema(schema))
		},
		generate: func(ctx context.Context, lo, hi int) error {
			return withConn(ctx, func(conn *pgx.Conn) error {
				at := `($3::bigint + i*1000000)`
				err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					stmts := []string{
						`INSERT INTO events (id, namespace, type, data, secret_names, reissue_of, idempotency_key, body_hash, created_at, payload_pruned_at)
							SELECT 'evt_00' || lpad(i::text, 24, '0'), 'bench', 'order.created', NULL, '[]', '', 'history-' || i,
								sha256(i::text::bytea), ` + at + `, ` + at + ` + 3600000000000 FROM generate_series($1::bigint, $2::bigint - 1) i`,
						`INSERT INTO deliveries (id, event_id, endpoint_id, state, attempts, due_at, first_attempt_at, lease_owner, last_status, last_error, exhaust_reason, resolution, terminal_at, created_at, payload_pruned)
							SELECT 'dlv_00' || lpad(i::text, 24, '0'), 'evt_00' || lpad(i::text, 24, '0'), 'bench/receiver',
								CASE WHEN i < ` + ex + ` THEN 'exhausted' ELSE 'delivered' END, 1, ` + at + `, ` + at + `, '',
								CASE WHEN i < ` + ex + ` THEN 500 ELSE 204 END, '',
								CASE WHEN i < ` + ex + ` THEN 'MaxAttempts' ELSE '' END,
								CASE WHEN i < ` + ex + ` THEN 'unresolved' ELSE '' END,
								` + at + ` + 2000000, ` + at + `, true FROM generate_series($1::bigint, $2::bigint - 1) i`,
						`INSERT INTO attempts (delivery_id, number, started_at, duration, status_code, error)
							SELECT 'dlv_00' || lpad(i::text, 24, '0'), 1, ` + at + `, 2000000, CASE WHEN i < ` + ex + ` THEN 500 ELSE 204 END, ''
							FROM generate_series($1::bigint, $2::bigint - 1) i`,
						`UPDATE endpoint_stats SET delivered = delivered + $2 - $1 - greatest(0, least($2, ` + ex + `) - $1),
							exhausted_unresolved = exhausted_unresolved + greatest(0, least($2, ` + ex + `) - $1)
							WHERE endpoint_id = 'bench/receiver' AND shard = 0 AND $3::bigint IS NOT NULL`,
					}
					for _, s := range stmts {
						if _, err := tx.Exec(ctx, s, lo, hi, epoch); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					return err
				}
				// Statistics as autovacuum keeps them on a ledger that grew
				// over time: without them the planner misjudges the tables.
				_, err = conn.Exec(ctx, `ANALYZE events, deliveries, attempts, endpoint_stats`)
				return err
			})
		},
		size: func(ctx context.Context) (int64, error) {
			var n int64
			err := withConn(ctx, func(conn *pgx.Conn) error {
				return conn.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
					FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
					WHERE s.nspname = $1 AND c.relkind = 'r'`, schema).Scan(&n)
			})
			return n, err
		},
		engineArgs: []string{"--ledger", engineDSN(dsn), "--pg-schema", schema},
		serverPIDs: postgresPIDs(dsn),
		cleanup:    func() { dropSchema(dsn, schema) },
	}
}
