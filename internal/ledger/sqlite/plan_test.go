package sqlite

import (
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// tableScan matches a plan line that reads every event or delivery (the
// aliases are e and d; json_each scans are the filters' few IDs).
var tableScan = regexp.MustCompile(`(?m)^SCAN (d|e|x|events|deliveries)\b`)

// TestPlansStayFlat checks that the statements run once per ingested event
// or per endpoint status refresh cost the same at any ledger size: an
// idempotency key is one lookup in events_idempotency, and a page of an
// endpoint's unresolved exhausted deliveries (the refresh asks for the
// first) walks deliveries_exhausted in (terminal_at, id) order and stops,
// instead of collecting and sorting all of them (USE TEMP B-TREE); the
// live deliveries of one endpoint are found in deliveries_live.
func TestPlansStayFlat(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for _, tc := range []struct {
		name, sql, index string
		args             []any
	}{
		{"event by idempotency key", writeSQL.eventByKey, "events_idempotency", []any{"shop", "key-1"}},
		{"first unresolved exhausted delivery", recoverySQL.exhaustedPage, "deliveries_exhausted",
			[]any{"shop/billing", int64(math.MinInt64), int64(math.MaxInt64), int64(math.MinInt64), "", "[]", "[]", 1}},
		{"filtered page of unresolved exhausted deliveries", recoverySQL.exhaustedPage, "deliveries_exhausted",
			[]any{"shop/billing", int64(0), int64(1000), int64(500), "dlv_1", `["dlv_2"]`, `["evt_1"]`, 100}},
		// deliveries_live's predicate is the OR of the live states
		// (migration 0011): a query uses it only if its WHERE clause
		// implies that predicate.
		// A replay walks a namespace's events in ID order, and reads one
		// event's deliveries.
		{"a page of a namespace's events for a replay", replaySQL.page, "events_namespace",
			[]any{"shop", "evt_0", "evt_z", "", int64(0), int64(1000), 256}},
		{"an event's deliveries to a replay's endpoint", replaySQL.deliveries, "deliveries_event", []any{"evt_1", "shop/billing"}},
		{"due deliveries of a blocked endpoint", writeSQL.claimDueOf, "deliveries_live", []any{"shop/billing", int64(0), 10}},
		{"live deliveries of a deleted endpoint", settleSQL.liveEvents, "deliveries_live", []any{"shop/billing"}},
		{"cancel the live deliveries of a deleted endpoint", writeSQL.deliveriesCancel, "deliveries_live", []any{"shop/billing", int64(0)}},
		// The sweep of expired deliveries walks the deliveries still to
		// send whose event has a bound (migration 0016), not the ledger.
		{"deliveries whose event expired", writeSQL.claimExpiring, "deliveries_expiring", []any{int64(1000), 500}},
		// A record from its lease's copy finds the row by its key; its
		// guards must not pick an index the update moves.
		{"record an attempt from the lease's copy", attemptUpdateSQL(false, false, true), "sqlite_autoindex_deliveries_1 (id=?)",
			append([]any{"dlv_1"}, make([]any, 29)...)},
		// Every claim round reads the blocked endpoints: it walks them
		// alone (migration 0017), not every endpoint's row.
		{"blocked endpoints", writeSQL.pausedEndpoints, "endpoints_blocked", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := queryPlan(t, s, tc.sql, tc.args...)
			text := strings.Join(plan, "\n")
			t.Log(text)
			if !strings.Contains(text, tc.index) {
				t.Errorf("plan does not use %s:\n%s", tc.index, text)
			}
			if strings.Contains(text, "TEMP B-TREE") {
				t.Errorf("plan sorts every match:\n%s", text)
			}
			if tableScan.MatchString(text) {
				t.Errorf("plan scans all events or deliveries:\n%s", text)
			}
		})
	}
}

// queryPlan returns the details of EXPLAIN QUERY PLAN q with args, one per
// line of the plan.
func queryPlan(t *testing.T, s *Store, q string, args ...any) []string {
	t.Helper()
	rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}
