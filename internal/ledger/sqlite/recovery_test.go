package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/ledgertest"
)

// rawDB opens a second connection pool on the store's file, to change rows
// behind the store's back.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestRecoveryRefusals runs the recovery rules on events whose secrets and
// data were removed directly in the tables, as scrubbing and pruning do.
func TestRecoveryRefusals(t *testing.T) {
	var paths sync.Map // *sqlite.Store → file
	exec := func(t *testing.T, s ledger.Store, query, id string) {
		t.Helper()
		path, _ := paths.Load(s)
		if _, err := rawDB(t, path.(string)).Exec(query, id); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	ledgertest.ExerciseRecoveryRefusals(t, func(t *testing.T) ledger.Store {
		path := filepath.Join(t.TempDir(), "ledger.db")
		s := open(t, path)
		paths.Store(s, path)
		return s
	}, ledgertest.Simulation{
		ScrubSecrets: func(t *testing.T, s ledger.Store, id string) {
			exec(t, s, `UPDATE events SET secrets = NULL WHERE id = ?1`, id)
		},
		PrunePayload: func(t *testing.T, s ledger.Store, id string) {
			exec(t, s, `UPDATE events SET data = NULL WHERE id = ?1`, id)
		},
	})
}

// TestRetryBudgetDeletesOldBuckets checks that the first retry of a minute
// deletes the endpoint's buckets older than ledger.BudgetRetention.
func TestRetryBudgetDeletesOldBuckets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	s := open(t, path)
	m := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	b := ledger.RetryBudget{MinPerMinute: 1}
	for _, a := range []struct {
		ep  string
		now time.Time
	}{
		{"shop/a", m}, {"shop/b", m}, {"shop/a", m.Add(30 * time.Minute)}, {"shop/b", m.Add(30 * time.Minute)},
		{"shop/a", m.Add(61 * time.Minute)}, // ages shop/a's first bucket out
	} {
		if answer, err := s.RetryBudgetAcquire(t.Context(), &ledger.RetryBudgetParams{EndpointID: a.ep, Budget: b, Now: a.now}); err != nil || !answer.Taken {
			t.Fatalf("RetryBudgetAcquire(%s, %v) = %v, %v", a.ep, a.now, answer, err)
		}
	}
	rows, err := rawDB(t, path).Query(`SELECT endpoint_id, minute FROM retry_budgets ORDER BY endpoint_id, minute`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var ep string
		var minute int64
		if err := rows.Scan(&ep, &minute); err != nil {
			t.Fatal(err)
		}
		got = append(got, ep+"@"+time.Unix(minute*60, 0).UTC().Format("15:04"))
	}
	want := []string{"shop/a@03:34", "shop/a@04:05", "shop/b@03:04", "shop/b@03:34"}
	if len(got) != len(want) {
		t.Fatalf("buckets %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("buckets %v, want %v", got, want)
		}
	}
}
