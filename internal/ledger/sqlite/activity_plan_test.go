package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestActivityPlan checks the poll of the endpoints' counters
// (EndpointActivitySince; EndpointActivityList is its zero cursor): one
// walk of endpoint_stats in key order (no sort of it, no index of
// changed_at to maintain), and each endpoint's latest deferral one search
// of retry_deferrals' primary key, not a scan of it per endpoint. The
// correlated search runs for the rows the filter keeps, not for every row
// walked: SQLite evaluates a result column only for an output row.
func TestActivityPlan(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	text := strings.Join(queryPlan(t, s, endpointActivitySQL, int64(1)), "\n")
	t.Log(text)
	for _, want := range []string{"SCAN s", "SEARCH d USING PRIMARY KEY (endpoint_id=?)"} {
		if !strings.Contains(text, want) {
			t.Errorf("plan lacks %q:\n%s", want, text)
		}
	}
	for _, bad := range []string{"TEMP B-TREE", "SCAN d"} {
		if strings.Contains(text, bad) {
			t.Errorf("plan has %q:\n%s", bad, text)
		}
	}
}
