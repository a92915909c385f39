package postgres_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// fillHistory writes n events in namespace shop, each with an idempotency
// key (key-1 … key-n) and one delivered delivery spread over ten endpoints,
// and unresolved exhausted deliveries of the first exhausted events to
// shop/billing; then ANALYZE. Plain SQL, so that a large ledger takes
// seconds.
func fillHistory(t testing.TB, conn *pgx.Conn, n, exhausted int) {
	t.Helper()
	ctx := context.Background()
	for _, step := range []struct {
		q string
		n int
	}{
		{`INSERT INTO events (id, namespace, type, data, secret_names, reissue_of, idempotency_key, body_hash, created_at)
		SELECT format('evt_h%s', lpad(i::text, 10, '0')), 'shop', 'order.created', '{"pad":"x"}', '[]', '',
			'key-' || i, '\x00', i
		FROM generate_series(1, $1::int) i`, n},
		{`INSERT INTO deliveries (id, event_id, endpoint_id, state, attempts, due_at, first_attempt_at, lease_owner,
			last_status, last_error, exhaust_reason, resolution, terminal_at, created_at)
		SELECT format('dlv_h%s', lpad(i::text, 10, '0')), format('evt_h%s', lpad(i::text, 10, '0')),
			'shop/ep' || (i % 10), 'delivered', 1, i, i, '', 204, '', '', '', i, i
		FROM generate_series(1, $1::int) i`, n},
		{`INSERT INTO deliveries (id, event_id, endpoint_id, state, attempts, due_at, first_attempt_at, lease_owner,
			last_status, last_error, exhaust_reason, resolution, terminal_at, created_at)
		SELECT format('dlv_x%s', lpad(i::text, 10, '0')), format('evt_h%s', lpad(i::text, 10, '0')),
			'shop/billing', 'exhausted', 5, i, i, '', 500, 'boom', 'attempts', 'unresolved', i, i
		FROM generate_series(1, $1::int) i`, exhausted},
	} {
		if _, err := conn.Exec(ctx, step.q, step.n); err != nil {
			t.Fatalf("fill history: %v", err)
		}
	}
	if _, err := conn.Exec(ctx, `ANALYZE events; ANALYZE deliveries`); err != nil {
		t.Fatalf("analyze: %v", err)
	}
}

// explain returns the plan of sql with args under plan_cache_mode mode:
// PREPARE and EXPLAIN EXECUTE, as pgx runs a cached statement, so that a
// generic plan shows as the server would run it.
func explain(t *testing.T, conn *pgx.Conn, mode, sql string, args ...any) string {
	t.Helper()
	prepareCheck(t, conn, mode, sql)
	return explainCheck(t, conn, sql, args...)
}

// prepareCheck prepares sql as plan_check under plan_cache_mode mode. The
// simple protocol throughout, as DEALLOCATE ALL drops the connection's
// cached statements too.
func prepareCheck(t *testing.T, conn *pgx.Conn, mode, sql string) {
	t.Helper()
	for _, q := range []string{`SET plan_cache_mode = ` + mode, `DEALLOCATE ALL`, `PREPARE plan_check AS ` + sql} {
		if _, err := conn.Exec(context.Background(), q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// explainCheck returns the plan of plan_check (sql) run with args.
func explainCheck(t *testing.T, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	marks := make([]string, len(args))
	for i := range marks {
		marks[i] = fmt.Sprintf("$%d", i+1)
	}
	// The simple protocol writes the arguments as literals of the
	// statement's parameter types.
	rows, err := conn.Query(context.Background(), `EXPLAIN EXECUTE plan_check(`+strings.Join(marks, ", ")+`)`,
		append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	if err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	return strings.Join(lines, "\n")
}

var sortNode = regexp.MustCompile(`\bSort\b`)

// TestPlansStayFlat checks, on a ledger with history, that the statements
// that run once per ingested batch or per endpoint status refresh walk an
// index and read a bounded number of rows, under the generic plan that
// pgx's statement cache ends up with as well as under a custom plan: the
// idempotency reads look keys up in events_idempotency instead of
// scanning every event, and the first unresolved exhausted delivery of an
// endpoint comes from an index in its order instead of a sort of all of
// them. An endpoint's stats are one range of the stats' primary key.
func TestPlansStayFlat(t *testing.T) {
	schema := pgtest.NewSchema(t)
	pgtest.OpenStore(t, schema)
	conn := rawConn(t, schema)
	fillHistory(t, conn, 50000, 2000)
	// Every shard of 5,000 endpoints' stats.
	if _, err := conn.Exec(context.Background(), `INSERT INTO endpoint_stats (endpoint_id, shard)
		SELECT format('shop/s%s', i), g FROM generate_series(1, 5000) i, generate_series(0, $1::int - 1) g`,
		postgres.StatsShards); err != nil {
		t.Fatal(err)
	}
	// A backlog: 20,000 deliveries to send, a few of them of events with a
	// bound (validUntil).
	if _, err := conn.Exec(context.Background(), `INSERT INTO deliveries (id, event_id, endpoint_id, state, attempts, due_at,
			lease_owner, last_status, last_error, exhaust_reason, resolution, created_at, valid_until)
		SELECT format('dlv_b%s', lpad(i::text, 10, '0')), format('evt_h%s', lpad(i::text, 10, '0')), 'shop/ep' || (i % 10),
			'scheduled', 0, i, '', 0, '', '', '', i, CASE WHEN i % 1000 = 0 THEN i END
		FROM generate_series(1, 20000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), `ANALYZE endpoint_stats; ANALYZE deliveries`); err != nil {
		t.Fatal(err)
	}

	nss, keys := make([]string, 100), make([]string, 100)
	for i := range keys {
		nss[i], keys[i] = "shop", fmt.Sprintf("key-%d", 1000+i*37)
	}
	var none []string
	for _, tc := range []struct {
		name  string
		sql   string
		args  []any
		index string
		table string
	}{
		{"events by idempotency key", postgres.EventsByKeySQL, []any{nss, keys}, "events_idempotency", "events"},
		{"deliveries by idempotency key", postgres.DeliveriesByKeySQL, []any{nss, keys}, "events_idempotency", "events"},
		{"first unresolved exhausted delivery", postgres.ExhaustedPageSQL,
			[]any{"shop/billing", int64(-1 << 63), int64(1<<63 - 1), int64(-1 << 63), "", none, none, 1},
			"deliveries_exhausted", "deliveries"},
		{"page of unresolved exhausted deliveries", postgres.ExhaustedPageSQL,
			[]any{"shop/billing", int64(-1 << 63), int64(1<<63 - 1), int64(500), "dlv_x0000000500", none, none, 100},
			"deliveries_exhausted", "deliveries"},
		{"stats of an endpoint, summed over its shards", postgres.EndpointStatsSQL, []any{"shop/s1234"},
			"endpoint_stats_pkey", "endpoint_stats"},
		// The sweep of expired deliveries walks the deliveries still to
		// send whose event has a bound (migration 00016), in bound order.
		{"deliveries whose event expired", postgres.ClaimExpiredSQL, []any{int64(1 << 40), 500, "w", int64(1<<40 + 1)},
			"deliveries_expiring", "deliveries"},
	} {
		for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				plan := explain(t, conn, mode, tc.sql, tc.args...)
				t.Log(plan)
				if !strings.Contains(plan, tc.index) {
					t.Errorf("plan does not use %s:\n%s", tc.index, plan)
				}
				if strings.Contains(plan, "Seq Scan on "+tc.table) {
					t.Errorf("plan scans all of %s:\n%s", tc.table, plan)
				}
				if tc.table == "deliveries" && sortNode.MatchString(plan) {
					t.Errorf("plan sorts the endpoint's deliveries instead of walking an index in order:\n%s", plan)
				}
			})
		}
	}
}

// bigTables grow with the ledger's history: no statement of a write path
// may read all of one.
var bigTables = []string{"events", "event_secrets", "deliveries", "attempts", "endpoints", "endpoint_stats",
	"retry_budgets", "outcome_buckets"}

// TestGenericPlansStayFlat checks the statements of the write paths that
// run their generic plans (txn.genericPlans: inserts, with and without an
// idempotency key, attempt records and what WriteMany combines of them):
// taken from the wire as the store prepares them, each one's generic plan
// on a ledger with history walks indexes instead of scanning a table that
// grows. A statement added to these paths is checked without being listed.
func TestGenericPlansStayFlat(t *testing.T) {
	var rt roundTrips
	schema := pgtest.NewSchema(t)
	s := pgtest.OpenStore(t, schema, postgres.WithDialFunc(rt.dial))
	ctx := t.Context()
	upsert(t, s, endpoint("shop", "all", "*"))
	rt.prepared()

	keyed := event("shop", "order.created", t0, 64)
	keyed.IdempotencyKey = "k1"
	insert(t, s, events(3, "shop", t0))
	insert(t, s, []*ledger.EventInsertParams{keyed})
	hot := rt.prepared()
	claimed, err := s.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: "w", Now: t0, LeaseFor: time.Hour, Limit: 4})
	if err != nil || len(claimed) != 4 {
		t.Fatalf("DeliveryClaim = %d, %v; want 4", len(claimed), err)
	}
	rt.prepared()
	var records []*ledger.AttemptRecordParams
	for i, c := range claimed {
		p := &ledger.AttemptRecordParams{DeliveryID: c.Delivery.ID, Owner: "w", Now: t0,
			Attempt: ledger.Attempt{StartedAt: t0, StatusCode: 204}, Next: ledger.Next{State: ledger.StateDelivered}}
		if i%2 == 1 {
			p.Attempt.StatusCode, p.Next = 500, ledger.Next{State: ledger.StateScheduled, DueAt: at(time.Minute)}
		}
		records = append(records, p)
	}
	res, err := s.AttemptRecordMany(ctx, records)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	hot = append(hot, rt.prepared()...)

	conn := rawConn(t, schema)
	fillHistory(t, conn, 50000, 2000)
	// 5,000 more endpoints like shop/all in other namespaces, and secrets
	// for every fifth event.
	for _, q := range []string{
		`INSERT INTO endpoints SELECT (jsonb_populate_record(e, jsonb_build_object('id', 'ns' || i % 50 || '/h' || i,
			'namespace', 'ns' || i % 50, 'name', 'h' || i))).*
			FROM endpoints e, generate_series(1, 5000) i WHERE e.id = 'shop/all'`,
		`INSERT INTO event_secrets (event_id, value)
			SELECT format('evt_h%s', lpad(i::text, 10, '0')), '\x00' FROM generate_series(1, 50000, 5) i`,
		`ANALYZE`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	slices.Sort(hot)
	hot = slices.Compact(hot)
	if !slices.Contains(hot, postgres.GenericPlansSQL) {
		t.Errorf("the write paths did not ask for generic plans (%q); statements:\n%s", postgres.GenericPlansSQL, strings.Join(hot, "\n"))
	}
	checked := 0
	for _, sql := range hot {
		if !strings.Contains(sql, "$1") {
			continue // BEGIN, SET LOCAL, COMMIT: no plan of their own
		}
		checked++
		plan := genericPlan(t, conn, sql)
		for _, table := range bigTables {
			if regexp.MustCompile(`Seq Scan on ` + table + `\b`).MatchString(plan) {
				t.Errorf("the generic plan scans all of %s:\n%s\n%s", table, sql, plan)
			}
		}
	}
	if checked < 10 {
		t.Errorf("checked %d statements of the write paths, want at least 10:\n%s", checked, strings.Join(hot, "\n"))
	}
}

// genericPlan returns the generic plan of sql: the plan does not depend on
// the arguments, so they are all NULL.
func genericPlan(t *testing.T, conn *pgx.Conn, sql string) string {
	t.Helper()
	prepareCheck(t, conn, "force_generic_plan", sql)
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = 'plan_check'`,
		pgx.QueryExecModeSimpleProtocol).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return explainCheck(t, conn, sql, make([]any, n)...)
}
