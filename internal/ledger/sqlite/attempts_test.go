package sqlite

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// TestAttemptUpdateVariants records every kind of attempt on deliveries
// whose in-flight row is clean and on rows that carry a stale resolution or
// terminal time, so that each of the four attemptUpdate statements runs:
// the returned and the stored delivery must both be what
// AttemptTransition.Apply makes of the row before, whichever columns the
// statement chosen sets.
func TestAttemptUpdateVariants(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if _, err := s.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{Endpoint: ledger.Endpoint{ID: "shop/all", Namespace: "shop",
		Name: "all", URL: "https://r.example", EventTypes: []string{"*"}}, Now: now}); err != nil {
		t.Fatal(err)
	}
	stale := map[string]string{
		"clean":            ``,
		"stale resolution": `UPDATE deliveries SET exhaust_reason = 'MaxAttempts', resolution = 'dismissed' WHERE id = ?1`,
		"stale terminal":   `UPDATE deliveries SET terminal_at = 1 WHERE id = ?1`,
	}
	nexts := map[string]ledger.Next{
		"scheduled":    {State: ledger.StateScheduled, DueAt: now.Add(time.Minute)},
		"awaiting_ack": {State: ledger.StateAwaitingAck, AckDeadline: now.Add(time.Hour)},
		"delivered":    {State: ledger.StateDelivered},
		"exhausted":    {State: ledger.StateExhausted, Reason: ledger.ExhaustMaxAttempts},
	}
	used := map[int]bool{}
	for rowName, dirty := range stale {
		for nextName, next := range nexts {
			name := rowName + ", " + nextName
			res, err := s.EventInsertMany(ctx, []*ledger.EventInsertParams{{Namespace: "shop", Type: "order.created",
				Data: json.RawMessage(`{}`), Now: now, LeaseTo: &ledger.Lease{Owner: "w", Until: now.Add(time.Hour)}}})
			if err != nil || res[0].Err != nil || len(res[0].Leased) != 1 {
				t.Fatalf("%s: EventInsertMany = %+v, %v", name, res, err)
			}
			id := res[0].Leased[0].Delivery.ID
			if dirty != "" {
				if _, err := s.w.ExecContext(ctx, dirty, id); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
			before, err := s.DeliveryGet(ctx, id)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			p := &ledger.AttemptRecordParams{DeliveryID: id, Owner: "w", Now: now.Add(time.Second),
				Attempt: ledger.Attempt{StartedAt: now, Duration: time.Millisecond, StatusCode: 500, Error: "boom"}, Next: next}
			if next.State == ledger.StateDelivered || next.State == ledger.StateAwaitingAck {
				p.Attempt.StatusCode, p.Attempt.Error = 202, ""
			}
			tr, err := p.Transition()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			want := before
			tr.Apply(&want)
			used[variantKey(want.ExhaustReason != before.ExhaustReason || want.Resolution != before.Resolution,
				!sameNanos(want.TerminalAt, before.TerminalAt))] = true
			got, err := s.AttemptRecordMany(ctx, []*ledger.AttemptRecordParams{p})
			if err != nil || got[0].Err != nil {
				t.Fatalf("%s: AttemptRecordMany = %+v, %v", name, got, err)
			}
			if diff := cmp.Diff(want, got[0].Delivery); diff != "" {
				t.Errorf("%s: returned delivery (-want +got):\n%s", name, diff)
			}
			after, err := s.DeliveryGet(ctx, id)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if diff := cmp.Diff(got[0].Delivery, after); diff != "" {
				t.Errorf("%s: stored delivery differs from the returned one (-returned +stored):\n%s", name, diff)
			}
		}
	}
	if len(used) != len(s.ws.attemptUpdate) {
		t.Errorf("the cases ran %d of the %d attemptUpdate statements", len(used), len(s.ws.attemptUpdate))
	}
}
