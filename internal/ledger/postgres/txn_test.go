package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// TestRoundTrips pins the round trips of the store's write paths: BEGIN
// rides with a transaction's first statements, COMMIT with its last
// writes, so a transaction costs one round trip per step that needs the
// answers of the step before. A change that adds one fails here.
func TestRoundTrips(t *testing.T) {
	var rt roundTrips
	s := pgtest.NewSchemaStore(t, postgres.WithDialFunc(rt.dial))
	ctx := t.Context()
	upsert(t, s, endpoint("shop", "all", "*"))
	upsert(t, s, endpoint("shop", "invoices", "invoice.paid"))

	keyed := func(key string) *ledger.EventInsertParams {
		p := event("shop", "order.created", t0, 64)
		p.IdempotencyKey = key
		return p
	}
	claim := func() ledger.ClaimedDelivery {
		t.Helper()
		got, err := s.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: "w", Now: at(time.Hour), LeaseFor: time.Minute, Limit: 1})
		if err != nil || len(got) != 1 {
			t.Fatalf("DeliveryClaim = %d deliveries, %v; want 1", len(got), err)
		}
		return got[0]
	}
	delivered := func(c ledger.ClaimedDelivery) *ledger.AttemptRecordParams {
		return &ledger.AttemptRecordParams{DeliveryID: c.Delivery.ID, Owner: "w", Now: at(time.Hour),
			Attempt: ledger.Attempt{StartedAt: at(time.Hour), StatusCode: 204}, Next: ledger.Next{State: ledger.StateDelivered}}
	}
	k1 := keyed("k1")
	noErr := func(results ...error) error { return errors.Join(results...) }
	inserted := func(res []ledger.EventInsertResult, err error) error {
		errs := []error{err}
		for _, r := range res {
			errs = append(errs, r.Err)
		}
		return noErr(errs...)
	}

	for _, tc := range []struct {
		name string
		want int64
		run  func() error
	}{
		{"insert one event: BEGIN+preload, insert+counters+COMMIT", 2, func() error {
			return inserted(s.EventInsertMany(ctx, events(1, "shop", t0)))
		}},
		{"insert a batch of events", 2, func() error {
			return inserted(s.EventInsertMany(ctx, events(5, "shop", t0)))
		}},
		{"insert an event no endpoint receives (marked undelivered)", 2, func() error {
			return inserted(s.EventInsertMany(ctx, []*ledger.EventInsertParams{event("elsewhere", "x", t0, 64)}))
		}},
		{"insert with an idempotency key: BEGIN+preload, insert+counters+COMMIT", 2, func() error {
			return inserted(s.EventInsertMany(ctx, []*ledger.EventInsertParams{k1}))
		}},
		{"insert a duplicate key: BEGIN+preload, COMMIT", 2, func() error {
			dup := *k1
			return inserted(s.EventInsertMany(ctx, []*ledger.EventInsertParams{&dup}))
		}},
		{"claim: BEGIN+claim, counters+COMMIT", 2, func() error {
			_, err := s.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: "w", Now: at(time.Hour), LeaseFor: time.Minute, Limit: 2})
			return err
		}},
		{"record: BEGIN+locks, writes+counters+COMMIT", 2, nil},
		{"write records and inserts: BEGIN+locks+preload, writes+insert+counters+COMMIT", 2, nil},
		{"release: BEGIN+update, counters+COMMIT", 2, nil},
	} {
		run := tc.run
		switch {
		case strings.HasPrefix(tc.name, "record"):
			c := claim()
			run = func() error {
				res, err := s.AttemptRecordMany(ctx, []*ledger.AttemptRecordParams{delivered(c)})
				return noErr(err, res[0].Err)
			}
		case strings.HasPrefix(tc.name, "write"):
			c := claim()
			run = func() error {
				res, err := s.WriteMany(ctx, &ledger.WriteBatch{Attempts: []*ledger.AttemptRecordParams{delivered(c)}, Events: events(1, "shop", t0)})
				return noErr(err, res.Attempts[0].Err, res.Events[0].Err)
			}
		case strings.HasPrefix(tc.name, "release"):
			c := claim()
			run = func() error {
				return s.DeliveryRelease(ctx, &ledger.DeliveryReleaseParams{DeliveryID: c.Delivery.ID, Owner: "w", DueAt: at(time.Hour), Now: at(time.Hour)})
			}
		}
		before, statements := rt.count(), rt.statements()
		if err := run(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := rt.count() - before; got != tc.want {
			t.Errorf("%s: %d round trips, want %d", tc.name, got, tc.want)
		}
		t.Logf("%s: %d statements", tc.name, rt.statements()-statements)
	}
}

// probeStore is a store with a table of its own for the tests of txn.
func probeStore(t *testing.T) (*postgres.Store, *pgx.Conn) {
	t.Helper()
	schema := pgtest.NewSchema(t)
	s := pgtest.OpenStore(t, schema)
	conn := rawConn(t, schema)
	if _, err := conn.Exec(t.Context(), `CREATE TABLE probe (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return s, conn
}

func probeRows(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM probe`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func batchOf(sqls ...string) *pgx.Batch {
	b := &pgx.Batch{}
	for _, sql := range sqls {
		b.Queue(sql)
	}
	return b
}

// wantIdleInPool checks that the pool holds no connection in a
// transaction, and whether the connection pid is back in it.
func wantIdleInPool(t *testing.T, s *postgres.Store, pid uint32, back bool) {
	t.Helper()
	idle := s.Pool().AcquireAllIdle(t.Context())
	found := false
	for _, c := range idle {
		if st := c.Conn().PgConn().TxStatus(); st != 'I' {
			t.Errorf("connection %d is in the pool with transaction status %q", c.Conn().PgConn().PID(), st)
		}
		found = found || c.Conn().PgConn().PID() == pid
		c.Release()
	}
	if found != back {
		t.Errorf("connection %d back in the pool: %v, want %v", pid, found, back)
	}
}

// TestTxnFailedStatementCommitsNothing fails a statement in each pipeline
// of a transaction (the first, with BEGIN; a middle one; the last, with
// COMMIT): nothing of the transaction is committed, the error names the
// operation and the step, and the connection goes back to the pool idle.
func TestTxnFailedStatementCommitsNothing(t *testing.T) {
	const dup = `INSERT INTO probe VALUES (1)`
	for _, tc := range []struct {
		name string
		fn   func(ctx context.Context, tx postgres.Txn) error
	}{
		{"first pipeline", func(ctx context.Context, tx postgres.Txn) error {
			tx.Queue("step", batchOf(`INSERT INTO probe VALUES (2)`, dup, dup))
			_, err := tx.Tx().Exec(ctx, `SELECT 1`)
			return err
		}},
		{"middle pipeline", func(ctx context.Context, tx postgres.Txn) error {
			if _, err := tx.Tx().Exec(ctx, `INSERT INTO probe VALUES (2)`); err != nil {
				return err
			}
			if err := tx.Tx().SendBatch(ctx, batchOf(dup, dup)).Close(); err != nil {
				return fmt.Errorf("step: %w", err)
			}
			return nil
		}},
		{"last pipeline", func(ctx context.Context, tx postgres.Txn) error {
			if _, err := tx.Tx().Exec(ctx, `INSERT INTO probe VALUES (2)`); err != nil {
				return err
			}
			tx.Queue("step", batchOf(dup, dup))
			return nil
		}},
		{"the only pipeline, BEGIN to COMMIT", func(ctx context.Context, tx postgres.Txn) error {
			tx.Queue("step", batchOf(`INSERT INTO probe VALUES (2)`, dup, dup))
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, conn := probeStore(t)
			var pid uint32
			err := s.Tx(t.Context(), "probe op", func(tx postgres.Txn) error {
				pid = tx.Tx().Conn().PgConn().PID()
				return tc.fn(t.Context(), tx)
			})
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
				t.Fatalf("Tx = %v, want the unique violation", err)
			}
			if !strings.HasPrefix(err.Error(), "probe op: step: ") {
				t.Errorf("error %q does not name the operation and the step", err)
			}
			if n := probeRows(t, conn); n != 0 {
				t.Errorf("%d probe rows committed, want none", n)
			}
			wantIdleInPool(t, s, pid, true)
			// The connection works.
			if err := s.Tx(t.Context(), "after", func(tx postgres.Txn) error {
				tx.Queue("insert", batchOf(`INSERT INTO probe VALUES (3)`))
				return nil
			}); err != nil || probeRows(t, conn) != 1 {
				t.Fatalf("a transaction after the failure: %v, %d rows", err, probeRows(t, conn))
			}
		})
	}
}

// TestTxnRetriesConflicts runs a transaction whose first tries fail on
// each error that means a concurrent transaction won (serialization
// failure, deadlock, lock not available), in the last pipeline: it is run
// again, and commits once; one that keeps failing gives up with
// ErrConflict after MaxTxTries.
func TestTxnRetriesConflicts(t *testing.T) {
	for _, code := range []string{"40001", "40P01", "55P03"} {
		t.Run(code, func(t *testing.T) {
			s, conn := probeStore(t)
			raise := fmt.Sprintf(`DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '%s'; END $$`, code)
			tries := 0
			err := s.Tx(t.Context(), "probe", func(tx postgres.Txn) error {
				tries++
				if _, err := tx.Tx().Exec(t.Context(), `INSERT INTO probe VALUES (1)`); err != nil {
					return err
				}
				if tries < 3 {
					tx.Queue("conflict", batchOf(raise))
				}
				return nil
			})
			if err != nil || tries != 3 || probeRows(t, conn) != 1 {
				t.Fatalf("Tx = %v after %d tries with %d rows, want success on the third with 1 row", err, tries, probeRows(t, conn))
			}

			tries = 0
			err = s.Tx(t.Context(), "probe", func(tx postgres.Txn) error {
				tries++
				tx.Queue("conflict", batchOf(`INSERT INTO probe VALUES (2)`, raise))
				return nil
			})
			if !errors.Is(err, postgres.ErrConflict) || tries != postgres.MaxTxTries || probeRows(t, conn) != 1 {
				t.Fatalf("Tx = %v after %d tries with %d rows, want ErrConflict after %d with 1 row", err, tries, probeRows(t, conn), postgres.MaxTxTries)
			}
		})
	}
}

// TestTxnCancelled cancels a transaction's context between two pipelines
// and during a statement: the call fails with the context's error, nothing
// commits, and the pool holds no connection in a transaction (it destroys
// one released in a transaction, or closed by the cancellation).
func TestTxnCancelled(t *testing.T) {
	t.Run("between pipelines", func(t *testing.T) {
		s, conn := probeStore(t)
		ctx, cancel := context.WithCancel(t.Context())
		var pid uint32
		err := s.Tx(ctx, "probe", func(tx postgres.Txn) error {
			pid = tx.Tx().Conn().PgConn().PID()
			if _, err := tx.Tx().Exec(ctx, `INSERT INTO probe VALUES (1)`); err != nil {
				return err
			}
			if st := tx.Tx().Conn().PgConn().TxStatus(); st != 'T' {
				return fmt.Errorf("transaction status %q after the first pipeline, want T", st)
			}
			cancel()
			tx.Queue("insert", batchOf(`INSERT INTO probe VALUES (2)`))
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Tx = %v, want context.Canceled", err)
		}
		wantIdleInPool(t, s, pid, false)
		if n := probeRows(t, conn); n != 0 {
			t.Errorf("%d probe rows committed, want none", n)
		}
	})
	t.Run("during a statement", func(t *testing.T) {
		s, conn := probeStore(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var pid uint32
		errc := make(chan error, 1)
		go func() {
			errc <- s.Tx(ctx, "probe", func(tx postgres.Txn) error {
				pid = tx.Tx().Conn().PgConn().PID()
				tx.Queue("sleep", batchOf(`INSERT INTO probe VALUES (1)`, `SELECT pg_sleep(600)`))
				return nil
			})
		}()
		// Cancel once the server runs the sleep, in the same pipeline as
		// the insert and COMMIT.
		for {
			var n int
			if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
				WHERE query = 'SELECT pg_sleep(600)' AND state = 'active'
				AND backend_xid IS NOT NULL`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				break
			}
			select {
			case err := <-errc:
				t.Fatalf("Tx returned %v before it was cancelled", err)
			case <-time.After(10 * time.Millisecond):
			}
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("Tx = %v, want context.Canceled", err)
		}
		wantIdleInPool(t, s, pid, false)
		if n := probeRows(t, conn); n != 0 {
			t.Errorf("%d probe rows committed, want none", n)
		}
	})
}

// TestGenericPlansEndWithTheTransaction checks that the generic plans of
// the write paths (SET LOCAL) do not outlive their transactions: every
// pooled connection is back at the server's default afterwards, so that
// the reads, whose optional filters need custom plans, keep them.
func TestGenericPlansEndWithTheTransaction(t *testing.T) {
	s := pgtest.NewSchemaStore(t)
	ctx := t.Context()
	upsert(t, s, endpoint("shop", "all", "*"))
	insert(t, s, events(2, "shop", t0))
	claimed, err := s.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: "w", Now: t0, LeaseFor: time.Hour, Limit: 2})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("DeliveryClaim = %d, %v; want 2", len(claimed), err)
	}
	res, err := s.AttemptRecordMany(ctx, []*ledger.AttemptRecordParams{{DeliveryID: claimed[0].Delivery.ID, Owner: "w", Now: t0,
		Attempt: ledger.Attempt{StartedAt: t0, StatusCode: 204}, Next: ledger.Next{State: ledger.StateDelivered}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("AttemptRecordMany: %v, %v", err, res[0].Err)
	}
	conns := s.Pool().AcquireAllIdle(ctx)
	if len(conns) == 0 {
		t.Fatal("no idle connection")
	}
	for _, c := range conns {
		var mode string
		err := c.QueryRow(ctx, `SHOW plan_cache_mode`).Scan(&mode)
		c.Release()
		if err != nil {
			t.Fatal(err)
		}
		if mode != "auto" {
			t.Errorf("a pooled connection has plan_cache_mode %q after the write paths, want auto", mode)
		}
	}
}
