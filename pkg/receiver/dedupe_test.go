package receiver

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

const replayUntil = "2026-03-11T10:00:00Z" // a week after t0

var replayUntilTime = time.Date(2026, 3, 11, 10, 0, 0, 0, time.UTC)

// setup opens a Receiver and the handler's effects table on db.
func setup(t *testing.T, db *sql.DB, c *clock, opts Options) *Receiver {
	t.Helper()
	r := newReceiver(t, db, c, opts)
	if _, err := db.Exec(effectsTable); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDeduplicates holds the sequences a receiver meets, on both
// databases: each step is one delivery and what it must answer and leave.
func TestDeduplicates(t *testing.T) {
	type step struct {
		d         delivery
		process   ProcessFunc // insertEffect when nil
		status    int
		duplicate bool
		outcome   Outcome
		effects   int // of d.id after the step
	}
	failing := func(context.Context, *sql.Tx, *Event) error { return errors.New("downstream unavailable") }
	rejecting := func(ctx context.Context, tx *sql.Tx, ev *Event) error {
		if err := insertEffect(ctx, tx, ev); err != nil { // a rejection may leave its own trace
			return err
		}
		return Reject("order 7 was cancelled")
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first", []step{
			{d: delivery{id: "msg_1", at: t0, replayUntil: replayUntil}, status: 200, outcome: Processed, effects: 1},
		}},
		{"duplicate: a retry, a recovery's Retry, a replay", []step{
			{d: delivery{id: "msg_1", deliveryID: "dlv_a", at: t0, replayUntil: replayUntil}, status: 200, outcome: Processed, effects: 1},
			{d: delivery{id: "msg_1", deliveryID: "dlv_a", at: t0.Add(time.Second), replayUntil: replayUntil}, status: 200, duplicate: true, outcome: Processed, effects: 1},
			{d: delivery{id: "msg_1", deliveryID: "dlv_b", at: t0.Add(time.Minute), replayUntil: replayUntil}, status: 200, duplicate: true, outcome: Processed, effects: 1},
			{d: delivery{id: "msg_1", deliveryID: "dlv_c", at: t0, secrets: []string{previous}}, status: 200, duplicate: true, outcome: Processed, effects: 1},
		}},
		{"a failed callback leaves nothing and the retry processes", []step{
			{d: delivery{id: "msg_1", at: t0}, process: failing, status: 500, effects: 0},
			{d: delivery{id: "msg_1", at: t0}, status: 200, outcome: Processed, effects: 1},
			{d: delivery{id: "msg_1", at: t0}, status: 200, duplicate: true, outcome: Processed, effects: 1},
		}},
		{"a rejection is remembered", []step{
			{d: delivery{id: "msg_1", at: t0}, process: rejecting, status: 422, outcome: Rejected, effects: 1},
			{d: delivery{id: "msg_1", at: t0}, status: 422, duplicate: true, outcome: Rejected, effects: 1},
		}},
		{"another event is not a duplicate", []step{
			{d: delivery{id: "msg_1", at: t0}, status: 200, outcome: Processed, effects: 1},
			{d: delivery{id: "msg_2", at: t0}, status: 200, outcome: Processed, effects: 1},
		}},
		{"a bad signature is not recorded", []step{
			{d: delivery{id: "msg_1", at: t0, secrets: []string{stranger}}, status: 401, effects: 0},
			{d: delivery{id: "msg_1", at: t0}, status: 200, outcome: Processed, effects: 1},
		}},
	}
	bothDatabases(t, func(t *testing.T, db *sql.DB) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := setup(t, db, &clock{now: t0}, Options{Table: "received_" + sanitize(tt.name)})
				if _, err := db.Exec(`DELETE FROM effects`); err != nil {
					t.Fatal(err)
				}
				for i, s := range tt.steps {
					process := s.process
					if process == nil {
						process = insertEffect
					}
					res, w := receive(t, r, s.d, process)
					if res.Status != s.status || res.Duplicate != s.duplicate || res.Outcome != s.outcome {
						t.Errorf("step %d: status %d duplicate %t outcome %q (%v; %s), want %d %t %q",
							i, res.Status, res.Duplicate, res.Outcome, res.Err, w.Body, s.status, s.duplicate, s.outcome)
					}
					if n := countEffects(t, db, s.d.id); n != s.effects {
						t.Errorf("step %d: %d effects of %s, want %d", i, n, s.d.id, s.effects)
					}
				}
			})
		}
	})
}

// sanitize makes a table name of a test name.
func sanitize(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s) && len(out) < 30; i++ {
		if c := s[i]; 'a' <= c && c <= 'z' {
			out = append(out, c)
		} else if len(out) > 0 && out[len(out)-1] != '_' {
			out = append(out, '_')
		}
	}
	return string(out)
}

// TestConcurrentDuplicates delivers one event from several goroutines at
// once, on both databases: exactly one runs the callback and commits one
// effect, every other one waits for it and is recognised, all answer 200.
func TestConcurrentDuplicates(t *testing.T) {
	const copies = 8
	bothDatabases(t, func(t *testing.T, db *sql.DB) {
		r := setup(t, db, &clock{now: t0}, Options{})
		start := make(chan struct{})
		results := make([]Result, copies)
		var wg sync.WaitGroup
		for i := range copies {
			wg.Go(func() {
				req := delivery{id: "msg_concurrent", at: t0, replayUntil: replayUntil}.request(t)
				<-start
				results[i] = r.Receive(httptest.NewRecorder(), req, insertEffect)
			})
		}
		close(start)
		wg.Wait()
		processed := 0
		for i, res := range results {
			if res.Status != http.StatusOK || res.Err != nil {
				t.Errorf("copy %d: %d %v", i, res.Status, res.Err)
			}
			if !res.Duplicate {
				processed++
			}
		}
		if processed != 1 {
			t.Errorf("%d copies ran the callback, want 1", processed)
		}
		if n := countEffects(t, db, "msg_concurrent"); n != 1 {
			t.Errorf("%d effects, want 1", n)
		}
	})
}

// TestDuplicateWhileTheFirstRuns holds a duplicate that arrives while the
// first copy's callback has not committed: it is recognised once the first
// commits, and the first copy's failure would let it run instead.
func TestDuplicateWhileTheFirstRuns(t *testing.T) {
	for _, firstFails := range []bool{false, true} {
		name := map[bool]string{false: "the first commits", true: "the first fails"}[firstFails]
		t.Run(name, func(t *testing.T) {
			bothDatabases(t, func(t *testing.T, db *sql.DB) {
				r := setup(t, db, &clock{now: t0}, Options{})
				entered, release := make(chan struct{}), make(chan struct{})
				first := make(chan Result, 1)
				go func() {
					first <- r.Receive(httptest.NewRecorder(), delivery{id: "msg_held", at: t0}.request(t),
						func(ctx context.Context, tx *sql.Tx, ev *Event) error {
							if err := insertEffect(ctx, tx, ev); err != nil {
								return err
							}
							close(entered)
							<-release
							if firstFails {
								return errors.New("the first copy's effect failed")
							}
							return nil
						})
				}()
				<-entered
				second := make(chan Result, 1)
				go func() {
					second <- r.Receive(httptest.NewRecorder(), delivery{id: "msg_held", at: t0}.request(t), insertEffect)
				}()
				close(release)
				a, b := <-first, <-second
				wantFirst, wantSecondDup := http.StatusOK, true
				if firstFails {
					wantFirst, wantSecondDup = http.StatusInternalServerError, false
				}
				if a.Status != wantFirst || a.Duplicate {
					t.Errorf("first: %d duplicate=%t (%v), want %d", a.Status, a.Duplicate, a.Err, wantFirst)
				}
				if b.Status != http.StatusOK || b.Duplicate != wantSecondDup {
					t.Errorf("second: %d duplicate=%t (%v), want 200 duplicate=%t", b.Status, b.Duplicate, b.Err, wantSecondDup)
				}
				if n := countEffects(t, db, "msg_held"); n != 1 {
					t.Errorf("%d effects, want 1", n)
				}
			})
		})
	}
}

// TestRecordsExpire holds the records' lifetime on both databases: kept
// until the replay-until the delivery carried (extended by a later one),
// deleted by Prune after it and not before; the default retention without
// the header.
func TestRecordsExpire(t *testing.T) {
	bothDatabases(t, func(t *testing.T, db *sql.DB) {
		c := &clock{now: t0}
		r := setup(t, db, c, Options{DefaultRetention: 48 * time.Hour})
		ctx := t.Context()
		receive(t, r, delivery{id: "msg_week", at: t0, replayUntil: replayUntil}, insertEffect)
		receive(t, r, delivery{id: "msg_noheader", at: t0}, insertEffect)
		receive(t, r, delivery{id: "msg_extended", at: t0, replayUntil: "2026-03-05T10:00:00Z"}, insertEffect)
		// A replay that may come back later than the first delivery said.
		res, _ := receive(t, r, delivery{id: "msg_extended", at: t0, replayUntil: "2026-03-20T10:00:00Z"}, insertEffect)
		if !res.Duplicate || !res.ReplayUntil.Equal(time.Date(2026, 3, 20, 10, 0, 0, 0, time.UTC)) {
			t.Errorf("the later replay: duplicate=%t replay-until %v", res.Duplicate, res.ReplayUntil)
		}
		// An earlier one does not shorten it.
		receive(t, r, delivery{id: "msg_extended", at: t0, replayUntil: "2026-03-06T10:00:00Z"}, insertEffect)

		rec, found, err := r.Lookup(ctx, "msg_week")
		if err != nil || !found {
			t.Fatalf("Lookup: %v %t", err, found)
		}
		want := Record{WebhookID: "msg_week", ReplayUntil: replayUntilTime, ReceivedAt: t0, Outcome: Processed}
		if rec != want {
			t.Errorf("record %+v, want %+v", rec, want)
		}

		prune := func(now time.Time, deleted int64, kept ...string) {
			t.Helper()
			n, err := r.Prune(ctx, now)
			if err != nil || n != deleted {
				t.Errorf("Prune(%v) = %d, %v; want %d", now, n, err, deleted)
			}
			for _, id := range []string{"msg_week", "msg_noheader", "msg_extended"} {
				_, found, err := r.Lookup(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if want := contains(kept, id); found != want {
					t.Errorf("after Prune(%v): %s kept=%t, want %t", now, id, found, want)
				}
			}
		}
		prune(t0.Add(48*time.Hour), 0, "msg_week", "msg_noheader", "msg_extended") // at its replay-until: kept
		prune(t0.Add(48*time.Hour+time.Millisecond), 1, "msg_week", "msg_extended")
		prune(replayUntilTime, 0, "msg_week", "msg_extended")
		prune(replayUntilTime.Add(time.Millisecond), 1, "msg_extended")
		prune(time.Date(2026, 3, 20, 10, 0, 0, 1e6, time.UTC), 1)

		// Gone: the same id is an event again (hookkeeper sends none past
		// its replay-until).
		res, _ = receive(t, r, delivery{id: "msg_week", at: t0}, insertEffect)
		if res.Duplicate || countEffects(t, db, "msg_week") != 2 {
			t.Errorf("after its record expired: duplicate=%t, %d effects", res.Duplicate, countEffects(t, db, "msg_week"))
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestRunPruner holds the background pruner: it prunes with the injected
// clock until its context ends.
func TestRunPruner(t *testing.T) {
	t.Parallel()
	db := openDB(t, "sqlite")
	c := &clock{now: t0}
	r := setup(t, db, c, Options{})
	receive(t, r, delivery{id: "msg_1", at: t0, replayUntil: replayUntil}, insertEffect)
	if err := r.RunPruner(t.Context(), 0, nil); err == nil {
		t.Error("RunPruner accepted a zero interval")
	}

	ctx, cancel := context.WithCancel(t.Context())
	pruned := make(chan struct{})
	c2 := &clock{now: replayUntilTime.Add(time.Second)}
	r2 := newReceiver(t, db, c2, Options{}) // the same table, a clock past the record
	done := make(chan error, 1)
	go func() { done <- r2.RunPruner(ctx, time.Millisecond, func(err error) { t.Error(err) }) }()
	go func() {
		defer close(pruned)
		for {
			if _, found, err := r.Lookup(ctx, "msg_1"); err != nil || !found {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Millisecond): // polling a condition, not synchronising
			}
		}
	}()
	select {
	case <-pruned:
	case <-time.After(30 * time.Second):
		t.Fatal("the pruner did not delete the expired record")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("RunPruner returned %v, want context.Canceled", err)
	}
}
