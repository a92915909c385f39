package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// TestIdempotencyKeyRaceAcrossProcesses makes another process's
// transaction hold an idempotency key, uncommitted, while a batch with the
// same key is inserted: the batch waits on the key, and then answers as if
// it had run after the winner (duplicate, conflict, or a plain insert when
// the winner rolled back), without leaving deliveries or counts behind for
// the items that lost.
func TestIdempotencyKeyRaceAcrossProcesses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		sameBody   bool
		commit     bool
		wantDup    bool
		wantErr    error
		wantStored int // deliveries of the batch's own event
	}{
		{name: "same body is a duplicate of the winner", sameBody: true, commit: true, wantDup: true},
		{name: "other body conflicts with the winner", commit: true, wantErr: ledger.ErrIdempotencyConflict},
		{name: "winner rolled back", sameBody: true, wantStored: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			schema := pgtest.NewSchema(t)
			s := pgtest.OpenStore(t, schema)
			upsert(t, s, endpoint("shop", "all", "*"))

			mine := event("shop", "order.created", at(time.Second), 64)
			mine.IdempotencyKey = "k"
			again := event("shop", "order.created", at(time.Second), 64) // same key and body later in the batch
			again.Data, again.BodyHash, again.IdempotencyKey = mine.Data, mine.BodyHash, "k"
			winnerID, winnerHash := ledger.NewID("evt", t0), []byte("another body")
			if tc.sameBody {
				winnerHash = mine.BodyHash
			}

			other := rawConn(t, schema)
			tx, err := other.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if _, err := tx.Exec(ctx, `INSERT INTO events (id, namespace, type, data, secret_names, reissue_of,
				idempotency_key, body_hash, created_at) VALUES ($1, 'shop', 'order.created', '{}', 'null', '', 'k', $2, $3)`,
				winnerID, winnerHash, t0.UnixNano()); err != nil {
				t.Fatal(err)
			}
			var xid string
			if err := tx.QueryRow(ctx, `SELECT transactionid::text FROM pg_locks
				WHERE pid = pg_backend_pid() AND locktype = 'transactionid'`).Scan(&xid); err != nil {
				t.Fatal(err)
			}

			type outcome struct {
				res []ledger.EventInsertResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := s.EventInsertMany(ctx, []*ledger.EventInsertParams{mine, again})
				done <- outcome{res, err}
			}()
			waitForWaiter(t, schema, xid)
			if tc.commit {
				err = tx.Commit(ctx)
			} else {
				err = tx.Rollback(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			out := <-done
			if out.err != nil {
				t.Fatalf("EventInsertMany: %v", out.err)
			}

			first, second := out.res[0], out.res[1]
			switch {
			case tc.wantErr != nil:
				if !errors.Is(first.Err, tc.wantErr) || !errors.Is(second.Err, tc.wantErr) {
					t.Fatalf("results: %v, %v; want %v twice", first.Err, second.Err, tc.wantErr)
				}
			case tc.wantDup:
				for i, r := range out.res {
					if r.Err != nil || !r.Duplicate || r.Event.ID != winnerID || len(r.Deliveries) != 0 {
						t.Fatalf("result %d: %+v; want a duplicate of %s", i, r, winnerID)
					}
				}
			default:
				if first.Err != nil || first.Duplicate || len(first.Deliveries) != 1 {
					t.Fatalf("first result: %+v; want inserted", first)
				}
				if second.Err != nil || !second.Duplicate || second.Event.ID != mine.ID {
					t.Fatalf("second result: %+v; want a duplicate of %s", second, mine.ID)
				}
			}
			ds, err := s.DeliveryBrowse(ctx, &ledger.DeliveryBrowseParams{EventID: mine.ID})
			if err != nil || len(ds) != tc.wantStored {
				t.Fatalf("deliveries of the batch's event: %d, %v; want %d", len(ds), err, tc.wantStored)
			}
			wantCountersMatchRecount(t, s, schema)
		})
	}
}

// waitForWaiter returns once a backend waits for transaction xid.
func waitForWaiter(t *testing.T, schema, xid string) {
	t.Helper()
	conn := rawConn(t, schema)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var waiting bool
		err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'transactionid' AND transactionid::text = $1 AND NOT granted)`, xid).Scan(&waiting)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("nobody waited for transaction %s", xid)
}
