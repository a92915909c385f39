package sqlite_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/ledgertest"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// open opens a store on a fresh file and closes it with the test.
func open(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	ledgertest.Exercise(t, func(t *testing.T) ledger.Store {
		return open(t, filepath.Join(t.TempDir(), "ledger.db"))
	})
}

func TestActivityExact(t *testing.T) {
	ledgertest.ExerciseActivityExact(t, func(t *testing.T) ledger.Store {
		s := open(t, filepath.Join(t.TempDir(), "ledger.db"))
		s.SetActivityOverlap(0)
		return s
	})
}

// TestCommittedEventSurvivesReopen closes the file after a commit and
// reads the event, its secrets and its delivery back from a new store.
func TestCommittedEventSurvivesReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	now := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)

	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := s.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{
		Endpoint: ledger.Endpoint{ID: "shop/all", Namespace: "shop", Name: "all", URL: "https://r.example", EventTypes: []string{"*"}},
		Now:      now,
	}); err != nil {
		t.Fatalf("EndpointUpsert: %v", err)
	}
	id := ledger.NewID("evt", now)
	res, err := s.EventInsertMany(ctx, []*ledger.EventInsertParams{{
		ID: id, Namespace: "shop", Type: "order.created", Data: json.RawMessage(`{"a":1}`),
		Secrets: sensitive.Bytes(`{"token":"t"}`), SecretNames: []string{"token"}, IdempotencyKey: "k", BodyHash: []byte{1}, Now: now,
	}})
	if err != nil || res[0].Err != nil || len(res[0].Deliveries) != 1 {
		t.Fatalf("EventInsertMany = %+v, %v", res, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = open(t, path) // migrations are already applied: a no-op
	ev, err := s.EventGet(ctx, id)
	if err != nil {
		t.Fatalf("EventGet after reopen: %v", err)
	}
	if string(ev.Data) != `{"a":1}` || string(ev.Secrets.Reveal()) != `{"token":"t"}` || !ev.CreatedAt.Equal(now) {
		t.Fatalf("event after reopen: %+v (secrets %q)", ev, ev.Secrets.Reveal())
	}
	d, err := s.DeliveryGet(ctx, res[0].Deliveries[0].ID)
	if err != nil || d.State != ledger.StateScheduled {
		t.Fatalf("delivery after reopen: %+v, %v", d, err)
	}
	st, err := s.EndpointStats(ctx, "shop/all")
	if err != nil || st.Pending != 1 {
		t.Fatalf("stats after reopen: %+v, %v", st, err)
	}
	// The idempotency key survived too.
	again, err := s.EventInsertMany(ctx, []*ledger.EventInsertParams{{
		ID: ledger.NewID("evt", now), Namespace: "shop", Type: "order.created", Data: json.RawMessage(`{"a":1}`),
		IdempotencyKey: "k", BodyHash: []byte{1}, Now: now,
	}})
	if err != nil || !again[0].Duplicate || again[0].Event.ID != id {
		t.Fatalf("replay after reopen = %+v, %v; want a duplicate of %s", again, err, id)
	}
}
