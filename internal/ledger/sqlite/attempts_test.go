package sqlite

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// TestAttemptUpdateVariants records every kind of attempt on deliveries
// whose in-flight row is clean and on rows that carry a stale resolution or
// terminal time, each once read by the record and once from the copy its
// lease handed out (AttemptRecordParams.Leased), so that each of the eight
// attemptUpdate statements runs: the returned and the stored delivery must
// both be what AttemptTransition.Apply makes of the row before, whichever
// columns the statement chosen sets. A record from the copy must not read
// the row: its lease read is swapped for a statement that fails.
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
			for _, fromCopy := range []bool{false, true} {
				name := fmt.Sprintf("%s, %s, from the lease's copy %t", rowName, nextName, fromCopy)
				leased := publishLeased(t, s, now, name)
				id := leased.Delivery.ID
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
				if fromCopy {
					leased.Delivery = before
					p.Leased = &leased
				}
				tr, err := p.Transition()
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				want := before
				tr.Apply(&want)
				used[variantKey(want.ExhaustReason != before.ExhaustReason || want.Resolution != before.Resolution,
					!sameNanos(want.TerminalAt, before.TerminalAt), fromCopy)] = true
				restore := func() {}
				if fromCopy {
					restore = forbidLeaseRead(t, s)
				}
				got, err := s.AttemptRecordMany(ctx, []*ledger.AttemptRecordParams{p})
				restore()
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
	}
	if len(used) != len(s.ws.attemptUpdate) {
		t.Errorf("the cases ran %d of the %d attemptUpdate statements", len(used), len(s.ws.attemptUpdate))
	}
}

// publishLeased publishes an event to shop/all at now, its delivery
// leased to "w" for an hour, and returns the lease's copy.
func publishLeased(t *testing.T, s *Store, now time.Time, name string) ledger.ClaimedDelivery {
	t.Helper()
	res, err := s.EventInsertMany(t.Context(), []*ledger.EventInsertParams{{Namespace: "shop", Type: "order.created",
		Data: json.RawMessage(`{}`), Now: now, LeaseTo: &ledger.Lease{Owner: "w", Until: now.Add(time.Hour)}}})
	if err != nil || res[0].Err != nil || len(res[0].Leased) != 1 {
		t.Fatalf("%s: EventInsertMany = %+v, %v", name, res, err)
	}
	return res[0].Leased[0]
}

// forbidLeaseRead swaps the record's lease read for a statement that fails
// when it runs, until the returned function puts it back.
func forbidLeaseRead(t *testing.T, s *Store) (restore func()) {
	t.Helper()
	failing, err := s.w.PrepareContext(t.Context(), `SELECT abs(-9223372036854775807 - 1), ?1, ?2`)
	if err != nil {
		t.Fatal(err)
	}
	read := s.ws.attemptLeased
	s.ws.attemptLeased = failing
	return func() {
		s.ws.attemptLeased = read
		_ = failing.Close()
	}
}

// TestRecordFromStaleCopyReadsTheRow: a record from its lease's copy
// changes the row only while every column the copy holds is still the
// row's. For each column in turn, a copy that differs in it alone must
// move nothing (moveLeasedCopy reports so, and the row stays), and the
// record then reads the row and returns what Apply makes of it; so must a
// copy of another delivery, in another state or of another owner.
func TestRecordFromStaleCopyReadsTheRow(t *testing.T) {
	ctx := t.Context()
	s, now := openWithEndpoint(t)
	later := now.Add(time.Minute)
	skews := map[string]func(d *ledger.Delivery){
		"event":               func(d *ledger.Delivery) { d.EventID += "x" },
		"endpoint":            func(d *ledger.Delivery) { d.EndpointID += "x" },
		"due":                 func(d *ledger.Delivery) { d.DueAt = d.DueAt.Add(time.Nanosecond) },
		"lease until":         func(d *ledger.Delivery) { d.LeaseUntil = &later },
		"no lease until":      func(d *ledger.Delivery) { d.LeaseUntil = nil },
		"attempts":            func(d *ledger.Delivery) { d.Attempts++ },
		"first attempt":       func(d *ledger.Delivery) { d.FirstAttemptAt = &later },
		"acknowledgement":     func(d *ledger.Delivery) { d.AckDeadline = &later },
		"last status":         func(d *ledger.Delivery) { d.LastStatus = 500 },
		"last error":          func(d *ledger.Delivery) { d.LastError = "boom" },
		"exhaust reason":      func(d *ledger.Delivery) { d.ExhaustReason = ledger.ExhaustMaxAttempts },
		"resolution":          func(d *ledger.Delivery) { d.Resolution = ledger.ResolutionUnresolved },
		"terminal":            func(d *ledger.Delivery) { d.TerminalAt = &later },
		"created":             func(d *ledger.Delivery) { d.CreatedAt = d.CreatedAt.Add(time.Nanosecond) },
		"retry of":            func(d *ledger.Delivery) { d.RetryOf = "dlv_x" },
		"resolved by":         func(d *ledger.Delivery) { d.ResolvedBy = "shop/recovery" },
		"resend":              func(d *ledger.Delivery) { d.Resend = !d.Resend },
		"another delivery":    func(d *ledger.Delivery) { d.ID += "x" },
		"another state":       func(d *ledger.Delivery) { d.State = ledger.StateScheduled },
		"another lease owner": func(d *ledger.Delivery) { d.LeaseOwner = "v" },
	}
	// The copy's columns, less the ID, state and lease owner that the
	// record's parameters name: each must have a skew above (the lease's
	// end has two: later, and gone).
	if got, want := len(skews)-4, strings.Count(deliveryCols, ",")+1-3; got != want {
		t.Fatalf("%d columns skewed, want every one of the %d a copy carries", got, want)
	}
	for name, skew := range skews {
		leased := publishLeased(t, s, now, name)
		id := leased.Delivery.ID
		before, err := s.DeliveryGet(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		leased.Delivery = before
		skew(&leased.Delivery)
		p := &ledger.AttemptRecordParams{DeliveryID: id, Owner: "w", Now: now.Add(time.Second), Leased: &leased,
			Attempt: ledger.Attempt{StartedAt: now, Duration: time.Millisecond, StatusCode: 204}, Next: ledger.Next{State: ledger.StateDelivered}}
		tr, err := p.Transition()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var moved bool
		err = s.write(ctx, "record from a skewed copy", func(w *wtx) error {
			_, _, moved, err = s.moveLeasedCopy(w, p, tr)
			return err
		})
		if err != nil || moved {
			t.Fatalf("%s: moveLeasedCopy moved %t, %v; want nothing moved", name, moved, err)
		}
		if after, err := s.DeliveryGet(ctx, id); err != nil || !cmp.Equal(before, after) {
			t.Fatalf("%s: the row changed (%v):\n%s", name, err, cmp.Diff(before, after))
		}
		want := before
		tr.Apply(&want)
		got, err := s.AttemptRecordMany(ctx, []*ledger.AttemptRecordParams{p})
		if err != nil || got[0].Err != nil {
			t.Fatalf("%s: AttemptRecordMany = %+v, %v", name, got, err)
		}
		if diff := cmp.Diff(want, got[0].Delivery); diff != "" {
			t.Errorf("%s: returned delivery (-want +got):\n%s", name, diff)
		}
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

// TestRecordFromHandedOutCopiesReadsNothing: the copies the store hands
// out with a lease, from a publish that leases its deliveries to the
// publisher (the engine's hand-off) and from a claim, are the rows as they
// stand, so that records from them never read the row: the lease read is
// swapped for a statement that fails. An event's secrets come with its
// copy, and its settlement still scrubs them.
func TestRecordFromHandedOutCopiesReadsNothing(t *testing.T) {
	ctx := t.Context()
	s, now := openWithEndpoint(t)
	res, err := s.EventInsertMany(ctx, []*ledger.EventInsertParams{
		{Namespace: "shop", Type: "order.created", Data: json.RawMessage(`{}`), Now: now,
			LeaseTo: &ledger.Lease{Owner: "w", Until: now.Add(time.Hour)}},
		{Namespace: "shop", Type: "order.created", Data: json.RawMessage(`{}`), Now: now,
			Secrets: sensitive.Bytes(`{"token":"t"}`), SecretNames: []string{"token"}},
	})
	if err != nil || res[0].Err != nil || res[1].Err != nil || len(res[0].Leased) != 1 {
		t.Fatalf("EventInsertMany = %+v, %v", res, err)
	}
	claimed, err := s.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: "w", Now: now, LeaseFor: time.Hour, Limit: 10})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("DeliveryClaim = %+v, %v", claimed, err)
	}
	if len(claimed[0].Event.Secrets) == 0 {
		t.Fatal("the claimed copy's event carries no secrets")
	}
	for name, c := range map[string]*ledger.ClaimedDelivery{"handed off": &res[0].Leased[0], "claimed": &claimed[0]} {
		p := &ledger.AttemptRecordParams{DeliveryID: c.Delivery.ID, Owner: "w", Now: now.Add(time.Second), Leased: c,
			Attempt: ledger.Attempt{StartedAt: now, Duration: time.Millisecond, StatusCode: 204}, Next: ledger.Next{State: ledger.StateDelivered}}
		restore := forbidLeaseRead(t, s)
		got, err := s.AttemptRecordMany(ctx, []*ledger.AttemptRecordParams{p})
		restore()
		if err != nil || got[0].Err != nil {
			t.Fatalf("%s: AttemptRecordMany = %+v, %v", name, got, err)
		}
		if got[0].Delivery.State != ledger.StateDelivered || got[0].Delivery.Attempts != 1 {
			t.Errorf("%s: recorded %+v, want delivered after one attempt", name, got[0].Delivery)
		}
	}
	ev, err := s.EventGet(ctx, claimed[0].Event.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Secrets) != 0 || ev.SecretsScrubAt == nil {
		t.Errorf("the delivered event's secrets were not scrubbed: %d bytes, scrubbed at %v", len(ev.Secrets), ev.SecretsScrubAt)
	}
}
