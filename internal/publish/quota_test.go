package publish

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
)

// storeCommit commits each publish alone into a store.
type storeCommit struct{ store ledger.Store }

func (c storeCommit) Publish(ctx context.Context, p *ledger.EventInsertParams) (ledger.EventInsertResult, error) {
	res, err := c.store.EventInsertMany(ctx, []*ledger.EventInsertParams{p})
	if err != nil {
		return ledger.EventInsertResult{}, err
	}
	return res[0], nil
}

// TestQuotaExceeded: over its namespace's quota a publish is refused with
// QuotaExceededError naming the limit and when to retry, nothing is
// recorded, and an idempotent retry of an accepted event is answered as
// before, not refused and not counted again.
func TestQuotaExceeded(t *testing.T) {
	now := time.Date(2030, 3, 4, 23, 0, 0, 0, time.UTC)
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"), sqlite.WithSynchronous("OFF"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	if _, err := store.QuotaSet(t.Context(), &ledger.QuotaSetParams{Namespace: "shop", Hard: ledger.QuotaHard{EventsPerDay: 1}, Now: now}); err != nil {
		t.Fatal(err)
	}
	core := newTestCore(t, storeCommit{store}, func(c *Config) { c.Now = func() time.Time { return now } })
	doc := []byte(`{"type":"order.created","data":{"n":1}}`)
	first, err := core.PublishJSON(t.Context(), "shop", "k1", doc)
	if err != nil {
		t.Fatalf("first publish: %v", err)
	}
	_, err = core.PublishJSON(t.Context(), "shop", "k2", doc)
	qe, ok := errors.AsType[*QuotaExceededError](err)
	if !ok || !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("second publish: %v, want a *QuotaExceededError", err)
	}
	want := QuotaExceededError{Namespace: "shop", Limit: ledger.QuotaEventsPerDay, Hard: 1, Used: 1, RetryAfter: time.Hour}
	if *qe != want {
		t.Errorf("refusal = %+v, want %+v", *qe, want)
	}
	if RetryAfterSeconds(qe.RetryAfter) != 3600 {
		t.Errorf("RetryAfterSeconds = %d, want 3600", RetryAfterSeconds(qe.RetryAfter))
	}
	again, err := core.PublishJSON(t.Context(), "shop", "k1", doc)
	if err != nil || !again.Duplicate || again.Event.ID != first.Event.ID {
		t.Errorf("retry of the accepted event = %+v, %v; want its original", again, err)
	}
	q, err := store.QuotaGet(t.Context(), "shop", now)
	if err != nil || q.Used.EventsToday != 1 || q.Used.RefusedToday != 1 {
		t.Errorf("used = %+v, %v; want 1 event and 1 refused", q.Used, err)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{0: 1, time.Millisecond: 1, time.Second: 1, time.Second + 1: 2, time.Hour: 3600} {
		if got := RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%s) = %d, want %d", d, got, want)
		}
	}
}
