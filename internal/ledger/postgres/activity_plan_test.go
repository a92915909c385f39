package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// TestActivityPlan checks the poll of every endpoint's counters
// (EndpointActivityList) on 5,000 endpoints of 16 shards each, with
// deferrals of a tenth of them: endpoint_stats and retry_deferrals read
// once each, nothing read once per endpoint, no other table read, and a
// cost under the server's JIT threshold.
func TestActivityPlan(t *testing.T) {
	schema := pgtest.NewSchema(t)
	pgtest.OpenStore(t, schema)
	conn := rawConn(t, schema)
	for _, q := range []string{
		`INSERT INTO endpoint_stats (endpoint_id, shard)
			SELECT format('shop/s%s', i), g FROM generate_series(1, 5000) i, generate_series(0, 15) g`,
		`INSERT INTO retry_deferrals (endpoint_id, minute, deferred, first_at, last_at)
			SELECT format('shop/s%s', i), m, 1, m * 60000000000, m * 60000000000
			FROM generate_series(1, 5000, 10) i, generate_series(1, 30) m`,
		`ANALYZE endpoint_stats; ANALYZE retry_deferrals`,
	} {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// No parameters: the plan is the one every execution gets.
	rows, err := conn.Query(context.Background(), "EXPLAIN "+postgres.EndpointActivitySQL)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	t.Log(plan)
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
