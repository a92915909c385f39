package sqlite

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// TestActivitySinceSeesALateCommit: a read that began after a transaction
// stamped its change, but before it committed, does not see it; the next
// read, from that read's cursor, does, as it goes back ActivityOverlap.
// Without the overlap it would miss it for good.
func TestActivitySinceSeesALateCommit(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{Endpoint: ledger.Endpoint{ID: "shop/late", Namespace: "shop",
		Name: "late", URL: "https://r.example", EventTypes: []string{"*"}}, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		overlap time.Duration
		seen    bool
	}{{ledger.ActivityOverlap, true}, {0, false}} {
		s.activityOverlap = tc.overlap
		all, c, err := s.EndpointActivitySince(ctx, ledger.ActivityCursor{})
		if err != nil || len(all) != 1 {
			t.Fatalf("from the zero cursor: %+v, %v", all, err)
		}
		before := all[0].Stats.Delivered
		tx, err := s.w.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, writeSQL.statsApply, "shop/late", 0, 0, 0, 1, 0, 0, nil, nil, "", changeStamp()); err != nil {
			t.Fatal(err)
		}
		during, next, err := s.EndpointActivitySince(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range during {
			if a.Stats.Delivered != before {
				t.Fatalf("overlap %v: a read saw an uncommitted change: %+v", tc.overlap, a)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		after, _, err := s.EndpointActivitySince(ctx, next)
		if err != nil {
			t.Fatal(err)
		}
		if seen := len(after) == 1; seen != tc.seen {
			t.Errorf("overlap %v: the next read returned %+v, want the late commit seen: %v", tc.overlap, after, tc.seen)
		}
	}
}
