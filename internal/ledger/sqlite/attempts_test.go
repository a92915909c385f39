package sqlite

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// TestAttemptUpdateVariants records every kind of attempt on deliveries
// whose in-flight row is clean and on rows that carry a stale resolution or
// terminal time, so that each of the four attemptUpdate statements runs:
// the returned and the stored delivery must both be what
// AttemptTransition.Apply makes of the row before, whichever columns the
// statement chosen sets.
func TestAttemptUpdateVariants(t *testing.T) {
	ctx := t.Context()
	s, now := openWithEndpoint(t)
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

// TestRecordSettlesOnlyEventsWithSecrets: a record runs the settlement's
// statement only for events that still hold secrets when their delivery is
// read (an event's secrets only ever go away), so a batch of records of
// events without secrets costs no settlement at all. The test swaps the
// settlement for a statement that writes down its argument.
func TestRecordSettlesOnlyEventsWithSecrets(t *testing.T) {
	ctx := t.Context()
	s, now := openWithEndpoint(t)
	if _, err := s.w.ExecContext(ctx, `CREATE TABLE settled_calls (events TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	settle := s.st.settle
	t.Cleanup(func() { _ = settle.Close() })
	calling, err := s.w.PrepareContext(ctx, `INSERT INTO settled_calls (events) VALUES (?1)`)
	if err != nil {
		t.Fatal(err)
	}
	s.st.settle = calling

	publish := func(secrets bool) *ledger.AttemptRecordParams {
		t.Helper()
		p := &ledger.EventInsertParams{Namespace: "shop", Type: "order.created", Data: json.RawMessage(`{}`), Now: now,
			LeaseTo: &ledger.Lease{Owner: "w", Until: now.Add(time.Hour)}}
		if secrets {
			p.Secrets, p.SecretNames = sensitive.Bytes(`{"token":"t"}`), []string{"token"}
		}
		res, err := s.EventInsertMany(ctx, []*ledger.EventInsertParams{p})
		if err != nil || res[0].Err != nil || len(res[0].Leased) != 1 {
			t.Fatalf("EventInsertMany = %+v, %v", res, err)
		}
		return &ledger.AttemptRecordParams{DeliveryID: res[0].Leased[0].Delivery.ID, Owner: "w", Now: now.Add(time.Second),
			Attempt: ledger.Attempt{StartedAt: now, Duration: time.Millisecond, StatusCode: 204}, Next: ledger.Next{State: ledger.StateDelivered}}
	}
	calls := func() []string {
		t.Helper()
		var list string
		if err := s.w.QueryRowContext(ctx, `SELECT json_group_array(events) FROM settled_calls`).Scan(&list); err != nil {
			t.Fatal(err)
		}
		var got []string
		if err := json.Unmarshal([]byte(list), &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	record := func(ps ...*ledger.AttemptRecordParams) {
		t.Helper()
		res, err := s.AttemptRecordMany(ctx, ps)
		if err != nil {
			t.Fatalf("AttemptRecordMany: %v", err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("AttemptRecordMany: %v", r.Err)
			}
		}
	}

	record(publish(false), publish(false))
	if got := calls(); len(got) != 0 {
		t.Fatalf("records of events without secrets settled %v, want no settlement", got)
	}
	plain, secret := publish(false), publish(true)
	d, err := s.DeliveryGet(ctx, secret.DeliveryID)
	if err != nil {
		t.Fatal(err)
	}
	record(plain, secret)
	got := calls()
	if len(got) != 1 {
		t.Fatalf("settlements of a batch with one event holding secrets: %v, want one", got)
	}
	var settled map[string]int64
	if err := json.Unmarshal([]byte(got[0]), &settled); err != nil {
		t.Fatal(err)
	}
	if _, ok := settled[d.EventID]; !ok || len(settled) != 1 {
		t.Fatalf("settled %v, want only the event with secrets, %s", settled, d.EventID)
	}
}

// openWithEndpoint opens a ledger with one endpoint, shop/all, that
// receives every event type, and returns the time it was created at.
func openWithEndpoint(t *testing.T) (*Store, time.Time) {
	t.Helper()
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
	return s, now
}
