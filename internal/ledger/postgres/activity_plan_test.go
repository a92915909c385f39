package postgres_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// activityChanged is how many endpoints of activityLedger changed after
// activityStamp: one shard each.
const (
	activityChanged = 5
	activityStamp   = 4000
)

// activityLedger is a ledger of 5,000 endpoints of 16 shards each, with
// deferrals of a tenth of them, analysed; the shards were stamped changed
// at 1000, but for one shard of activityChanged endpoints, at 5000.
func activityLedger(t *testing.T) *pgx.Conn {
	t.Helper()
	schema := pgtest.NewSchema(t)
	pgtest.OpenStore(t, schema)
	conn := rawConn(t, schema)
	for _, q := range []string{
		`INSERT INTO endpoint_stats (endpoint_id, shard, changed_at)
			SELECT format('shop/s%s', i), g, CASE WHEN i % 1000 = 7 AND g = 3 THEN 5000 ELSE 1000 END
			FROM generate_series(1, 5000) i, generate_series(0, 15) g`,
		`INSERT INTO retry_deferrals (endpoint_id, minute, deferred, first_at, last_at)
			SELECT format('shop/s%s', i), m, 1, m * 60000000000, m * 60000000000
			FROM generate_series(1, 5000, 10) i, generate_series(1, 30) m`,
		`ANALYZE endpoint_stats; ANALYZE retry_deferrals`,
	} {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return conn
}

// explainWith returns the plan of q with EXPLAIN's options how, run as a
// statement of its own with args (a custom plan, as the server keeps for
// the poll: its generic plan would assume a third of the rows changed).
func explainWith(t *testing.T, conn *pgx.Conn, how, q string, args ...any) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "EXPLAIN "+how+" "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	t.Log(plan)
	return plan
}

// TestActivityPlan checks the poll of every endpoint's counters
// (EndpointActivityList, and EndpointActivitySince's zero cursor):
// endpoint_stats and retry_deferrals read once each, nothing read once per
// endpoint, no other table read, and a cost under the server's JIT
// threshold.
func TestActivityPlan(t *testing.T) {
	conn := activityLedger(t)
	// No parameters: the plan is the one every execution gets.
	plan := explainWith(t, conn, "", postgres.EndpointActivitySQL)
	if strings.Contains(plan, "SubPlan") {
		t.Errorf("plan reads something once per endpoint:\n%s", plan)
	}
	for _, table := range []string{"endpoint_stats", "retry_deferrals"} {
		if n := strings.Count(plan, "on "+table); n != 1 {
			t.Errorf("plan reads %s %d times, want once:\n%s", table, n, plan)
		}
	}
	if strings.Contains(plan, "JIT") {
		t.Errorf("the poll's estimated cost makes the server JIT-compile it:\n%s", plan)
	}
	for _, table := range []string{"deliveries", "events", "attempts", "endpoints "} {
		if strings.Contains(plan, "on "+table) {
			t.Errorf("plan reads %s:\n%s", table, plan)
		}
	}
}

// actualRows matches a plan node's line and what it produced in all its
// loops: "-> Sort (...) (actual time=... rows=80 loops=1)".
var actualRows = regexp.MustCompile(`^\s*(?:->\s+)?([A-Za-z ]+?)\s+(?:on \S+ )?.*\(actual time=\S+ rows=(\d+) loops=(\d+)\)`)

// TestActivitySincePlan checks the poll of what changed
// (EndpointActivitySince), run: only the shards of the endpoints that
// changed are combined and sorted (a filtered scan finds them, no index
// of changed_at), their shards and latest deferral are read by primary
// key, no other table is read, and the server does not JIT-compile it.
func TestActivitySincePlan(t *testing.T) {
	conn := activityLedger(t)
	plan := explainWith(t, conn, "(ANALYZE)", postgres.EndpointActivitySinceSQL, int64(activityStamp))
	lines := strings.Split(plan, "\n")
	if m := actualRows.FindStringSubmatch(lines[0]); m == nil || m[2] != strconv.Itoa(activityChanged) {
		t.Errorf("plan does not return the %d changed endpoints:\n%s", activityChanged, plan)
	}
	checked := 0
	for _, line := range lines {
		m := actualRows.FindStringSubmatch(line)
		if m == nil || !strings.Contains(m[1], "Sort") && !strings.Contains(m[1], "Aggregate") {
			continue
		}
		checked++
		rows, _ := strconv.Atoi(m[2])
		loops, _ := strconv.Atoi(m[3])
		if rows*loops > activityChanged*postgres.StatsShards {
			t.Errorf("%s produced %d rows, more than the %d changed endpoints' shards:\n%s",
				m[1], rows*loops, activityChanged*postgres.StatsShards, plan)
		}
	}
	if checked == 0 {
		t.Errorf("no sort or aggregate found in the plan:\n%s", plan)
	}
	for _, index := range []string{"endpoint_stats_pkey", "retry_deferrals_pkey"} {
		if !strings.Contains(plan, index) {
			t.Errorf("plan does not use %s:\n%s", index, plan)
		}
	}
	if strings.Contains(plan, "JIT") {
		t.Errorf("the poll's estimated cost makes the server JIT-compile it:\n%s", plan)
	}
	for _, table := range []string{"deliveries", "events", "attempts", "endpoints "} {
		if strings.Contains(plan, "on "+table) {
			t.Errorf("plan reads %s:\n%s", table, plan)
		}
	}
}
