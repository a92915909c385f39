package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// statsString shows every field of st, times exactly, for comparisons.
func statsString(st ledger.EndpointStats) string {
	show := func(t *time.Time) string {
		if t == nil {
			return "never"
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%s: pending %d, in flight %d, awaiting ack %d, delivered %d, exhausted %d, cancelled %d, "+
		"last success %s, last failure %s %q", st.EndpointID, st.Pending, st.InFlight, st.AwaitingAck, st.Delivered,
		st.ExhaustedUnresolved, st.Cancelled, show(st.LastSuccessAt), show(st.LastFailureAt), st.LastFailureReason)
}

func endpointStats(t *testing.T, s ledger.Store, id string) ledger.EndpointStats {
	t.Helper()
	st, err := s.EndpointStats(context.Background(), id)
	if err != nil {
		t.Fatalf("EndpointStats(%s): %v", id, err)
	}
	return st
}

// writeStats runs the store's stats statements for delta in a transaction
// of conn's; hold, when set, runs before the commit.
func writeStats(t *testing.T, conn *pgx.Conn, delta ledger.StatsDelta, hold func()) {
	t.Helper()
	err := pgx.BeginFunc(context.Background(), conn, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		postgres.QueueStats(b, delta)
		if err := tx.SendBatch(context.Background(), b).Close(); err != nil {
			return err
		}
		if hold != nil {
			hold()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("write stats: %v", err)
	}
}

// shardsOf counts the endpoint_stats rows of endpoint.
func shardsOf(t *testing.T, conn *pgx.Conn, endpoint string) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM endpoint_stats WHERE endpoint_id = $1`, endpoint).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStatsShardsAddUpToTheRule writes random stats changes of two
// endpoints, each in a transaction of its own running the store's
// statements (so that they land on different shards), and after each wants
// EndpointStats to equal ledger.StatsChange.Apply of the same changes in
// the same order: every counter, the last success, and the last failure
// with its reason, where a failure at the same instant as the recorded one
// replaces its reason whichever shard either landed on.
func TestStatsShardsAddUpToTheRule(t *testing.T) {
	t.Parallel()
	schema := pgtest.NewSchema(t)
	s := pgtest.OpenStore(t, schema)
	conn := rawConn(t, schema)
	ids := []string{"shop/a", "shop/b"}
	want := map[string]*ledger.EndpointStats{}
	for _, id := range ids {
		upsert(t, s, endpoint("shop", id[len("shop/"):], "*"))
		want[id] = &ledger.EndpointStats{EndpointID: id}
	}
	// Few instants, so that outcomes often tie with the recorded ones.
	instants := []time.Time{at(0), at(time.Second), at(2 * time.Second)}
	rng := rand.New(rand.NewPCG(15, 16))
	for i := range 6 * postgres.StatsShards {
		delta := ledger.StatsDelta{}
		for _, id := range ids {
			if rng.IntN(4) == 0 {
				continue
			}
			c := delta.Of(id)
			for k := range c.Counts {
				c.Counts[k] = rng.Int64N(7) - 3
			}
			if rng.IntN(2) == 0 {
				tm := instants[rng.IntN(len(instants))]
				c.SuccessAt = &tm
			}
			if rng.IntN(2) == 0 {
				tm := instants[rng.IntN(len(instants))]
				c.FailureAt, c.FailureReason = &tm, fmt.Sprintf("failure %d of %s", i, id)
			}
		}
		writeStats(t, conn, delta, nil)
		for id, c := range delta {
			c.Apply(want[id])
		}
		for _, id := range ids {
			if got, w := statsString(endpointStats(t, s, id)), statsString(*want[id]); got != w {
				t.Fatalf("after change %d:\n got %s\nwant %s", i, got, w)
			}
		}
	}
	for _, id := range ids {
		if n := shardsOf(t, conn, id); n < 2 || n > postgres.StatsShards {
			t.Fatalf("%s has %d stats rows, want 2 to %d: the changes did not spread over shards", id, n, postgres.StatsShards)
		}
	}
}

// TestStatsOfOneEndpointStayExactUnderConcurrentWriters plays two
// processes whose producers and workers all write the stats of the same
// two endpoints at once (every event goes to both, so each transaction
// locks two rows): inserts, claims, releases and records of every outcome.
// No transaction may fail, the counters must equal a recount of the
// deliveries, and the last success and failure (with its reason) must be
// the latest recorded.
func TestStatsOfOneEndpointStayExactUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	schema := pgtest.NewSchema(t)
	stores := []ledger.Store{
		pgtest.OpenStore(t, schema, postgres.WithMaxConns(8)),
		pgtest.OpenStore(t, schema, postgres.WithMaxConns(8)),
	}
	ids := []string{"shop/hot", "shop/twin"}
	for _, id := range ids {
		upsert(t, stores[0], endpoint("shop", id[len("shop/"):], "*"))
	}
	ctx := context.Background()

	// Every record happens at an instant of its own, so the latest outcome
	// of each kind is unique.
	var clock atomic.Int64
	tick := func() time.Time { return at(time.Duration(clock.Add(1)) * time.Millisecond) }
	type last struct {
		success, failure time.Time
		reason           string
	}
	var (
		mu    sync.Mutex
		truth = map[string]*last{}
	)
	note := func(p *ledger.AttemptRecordParams, endpoint string) {
		success, failure := p.Next.StatsOutcome()
		mu.Lock()
		defer mu.Unlock()
		l := truth[endpoint]
		if l == nil {
			l = &last{}
			truth[endpoint] = l
		}
		if success && p.Now.After(l.success) {
			l.success = p.Now
		}
		if failure && p.Now.After(l.failure) {
			l.failure, l.reason = p.Now, ledger.FailureReason(p.Attempt)
		}
	}

	var producers, workers sync.WaitGroup
	var produced atomic.Bool
	for p, s := range stores {
		for range 2 {
			producers.Go(func() {
				for n := range 40 {
					if _, err := s.EventInsertMany(ctx, events(1+n%3, "shop", t0)); err != nil {
						t.Errorf("EventInsertMany: %v", err)
						return
					}
				}
			})
		}
		for w := range 3 {
			owner := fmt.Sprintf("process%d-worker%d", p, w)
			rng := rand.New(rand.NewPCG(uint64(p), uint64(w)))
			workers.Go(func() {
				for {
					done := produced.Load()
					got, err := s.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: owner, Now: tick(), LeaseFor: time.Hour, Limit: 4})
					if err != nil {
						t.Errorf("%s: DeliveryClaim: %v", owner, err)
						return
					}
					if len(got) == 0 && done {
						return
					}
					for _, c := range got {
						now := tick()
						p := &ledger.AttemptRecordParams{
							DeliveryID: c.Delivery.ID, Owner: owner, Now: now,
							Attempt: ledger.Attempt{StartedAt: now, Duration: time.Millisecond, StatusCode: 503},
						}
						switch rng.IntN(6) {
						case 0:
							if err := s.DeliveryRelease(ctx, &ledger.DeliveryReleaseParams{DeliveryID: c.Delivery.ID, Owner: owner, DueAt: now, Now: now}); err != nil {
								t.Errorf("%s: DeliveryRelease: %v", owner, err)
							}
							continue
						case 1:
							p.Attempt.Error = fmt.Sprintf("connection reset at tick %d", clock.Load())
							p.Next = ledger.Next{State: ledger.StateScheduled, DueAt: now}
						case 2:
							p.Next = ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable}
							p.Attempt.Error = fmt.Sprintf("refused at tick %d", clock.Load())
						case 3:
							p.Attempt.StatusCode = 202
							p.Next = ledger.Next{State: ledger.StateAwaitingAck, AckDeadline: now.Add(time.Hour)}
						default:
							p.Attempt.StatusCode = 204
							p.Next = ledger.Next{State: ledger.StateDelivered}
						}
						res, err := s.AttemptRecordMany(ctx, []*ledger.AttemptRecordParams{p})
						if err == nil {
							err = res[0].Err
						}
						if err != nil {
							t.Errorf("%s: AttemptRecordMany: %v", owner, err)
							continue
						}
						note(p, c.Delivery.EndpointID)
					}
				}
			})
		}
	}
	producers.Wait()
	produced.Store(true)
	workers.Wait()
	if t.Failed() {
		return
	}

	wantCountersMatchRecount(t, stores[1], schema)
	conn := rawConn(t, schema)
	for _, id := range ids {
		st := endpointStats(t, stores[0], id)
		l := truth[id]
		if l == nil || l.success.IsZero() || l.failure.IsZero() {
			t.Fatalf("%s: the workload recorded no success or no failure (%+v): the check below proves nothing", id, l)
		}
		if st.LastSuccessAt == nil || !st.LastSuccessAt.Equal(l.success) ||
			st.LastFailureAt == nil || !st.LastFailureAt.Equal(l.failure) || st.LastFailureReason != l.reason {
			t.Errorf("%s: %s\nwant last success %v, last failure %v %q", id, statsString(st), l.success, l.failure, l.reason)
		}
		if n := shardsOf(t, conn, id); n < 2 {
			t.Errorf("%s has %d stats row(s): the writers did not spread over shards", id, n)
		}
	}
}

// TestStatsWriteDoesNotBlockTheEndpointsNextTransaction holds a
// transaction open right after it wrote an endpoint's stats (the store's
// own statements, on a connection of the test's), as a slow insert or
// record would, and wants an insert of the same endpoint to commit
// meanwhile: before the stats were sharded it waited for that commit.
//
// Not parallel: the store deals shards round-robin within the process, and
// the insert must come right after the held transaction's turn, with no
// other test's transaction in between.
func TestStatsWriteDoesNotBlockTheEndpointsNextTransaction(t *testing.T) {
	schema := pgtest.NewSchema(t)
	s := pgtest.OpenStore(t, schema)
	const id = "shop/hot"
	upsert(t, s, endpoint("shop", "hot", "*"))
	holder, probe := rawConn(t, schema), rawConn(t, schema)
	ctx := context.Background()
	// Every shard exists and is visible, so the probe can tell which one is
	// locked.
	if _, err := probe.Exec(ctx, `INSERT INTO endpoint_stats (endpoint_id, shard)
		SELECT $1, g FROM generate_series(0, $2::int - 1) g ON CONFLICT DO NOTHING`, id, postgres.StatsShards); err != nil {
		t.Fatal(err)
	}

	delta := ledger.StatsDelta{}
	delta.Add(id, ledger.StateScheduled, ledger.ResolutionNone, 1)
	writeStats(t, holder, delta, func() {
		// The premise: the held transaction owns one stats row of the
		// endpoint until it commits.
		var free int
		err := pgx.BeginFunc(ctx, probe, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM endpoint_stats WHERE endpoint_id = $1
				FOR NO KEY UPDATE SKIP LOCKED) f`, id).Scan(&free)
		})
		if err != nil {
			t.Fatal(err)
		}
		if free != postgres.StatsShards-1 {
			t.Fatalf("%d of %d stats rows free while the transaction is held, want all but one", free, postgres.StatsShards)
		}

		// The insert must not wait for the held transaction. A deadline
		// bounds the failure instead of hanging the test.
		insertCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := s.EventInsertMany(insertCtx, events(1, "shop", t0))
		if err != nil {
			t.Fatalf("insert while another transaction of the endpoint holds its stats write: %v", err)
		}
		if len(res) != 1 || res[0].Err != nil || len(res[0].Deliveries) != 1 {
			t.Fatalf("insert = %+v", res)
		}
		if st := endpointStats(t, s, id); st.Pending != 1 {
			t.Fatalf("while the held transaction is open: %s, want pending 1 (the insert's only)", statsString(st))
		}
	})
	if st := endpointStats(t, s, id); st.Pending != 2 {
		t.Fatalf("after both committed: %s, want pending 2", statsString(st))
	}
}

// preShardStatsSQL are the stats statements of the store before migration
// 00011, word for word: what a replica not yet replaced runs during a
// rolling update.
var preShardStatsSQL = []string{
	`SELECT 1 FROM endpoint_stats WHERE endpoint_id = ANY($1) ORDER BY endpoint_id FOR NO KEY UPDATE`,
	`
		UPDATE endpoint_stats s SET
			pending = s.pending + u.pending,
			in_flight = s.in_flight + u.in_flight,
			awaiting_ack = s.awaiting_ack + u.awaiting_ack,
			delivered = s.delivered + u.delivered,
			exhausted_unresolved = s.exhausted_unresolved + u.exhausted_unresolved,
			cancelled = s.cancelled + u.cancelled,
			last_success_at = GREATEST(s.last_success_at, u.success_at),
			last_failure_at = GREATEST(s.last_failure_at, u.failure_at),
			last_failure_reason = CASE
				WHEN u.failure_at >= COALESCE(s.last_failure_at, u.failure_at) THEN u.failure_reason
				ELSE s.last_failure_reason END
		FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[],
			$7::bigint[], $8::bigint[], $9::bigint[], $10::text[])
			AS u(endpoint_id, pending, in_flight, awaiting_ack, delivered, exhausted_unresolved,
				cancelled, success_at, failure_at, failure_reason)
		WHERE s.endpoint_id = u.endpoint_id`,
}

// TestStatsShardsMigration takes a ledger from before the shards through
// migration 00011 and back: the counters read the same after the upgrade,
// after writes to many shards, after a write by a store of the old version
// (which lands once, not once per shard), after the downgrade (folded into
// one row per endpoint) and after upgrading again.
func TestStatsShardsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.NewSchema(t)
	if err := postgres.MigrateTo(ctx, pgtest.DSN(t), schema, 10); err != nil {
		t.Fatal(err)
	}
	conn := rawConn(t, schema)
	if _, err := conn.Exec(ctx, `INSERT INTO endpoint_stats (endpoint_id, pending, in_flight, awaiting_ack, delivered,
			exhausted_unresolved, cancelled, last_success_at, last_failure_at, last_failure_reason)
		VALUES ('shop/a', 1, 2, 3, 4, 5, 6, $1, $2, 'HTTP 500'), ('shop/b', 0, 0, 0, 0, 0, 0, NULL, NULL, '')`,
		at(time.Second).UnixNano(), at(2*time.Second).UnixNano()); err != nil {
		t.Fatal(err)
	}
	success, failure := at(time.Second), at(2*time.Second)
	want := map[string]*ledger.EndpointStats{
		"shop/a": {EndpointID: "shop/a", Pending: 1, InFlight: 2, AwaitingAck: 3, Delivered: 4, ExhaustedUnresolved: 5,
			Cancelled: 6, LastSuccessAt: &success, LastFailureAt: &failure, LastFailureReason: "HTTP 500"},
		"shop/b": {EndpointID: "shop/b"},
	}
	check := func(step string, s ledger.Store) {
		t.Helper()
		for id, w := range want {
			if got := statsString(endpointStats(t, s, id)); got != statsString(*w) {
				t.Fatalf("%s:\n got %s\nwant %s", step, got, statsString(*w))
			}
		}
	}

	s := pgtest.OpenStore(t, schema) // migrates to the latest version
	check("after the upgrade", s)

	// Shards are dealt by a counter of the process that parallel tests
	// advance too: write until every shard has a row.
	for i := 0; i < 3*postgres.StatsShards || shardsOf(t, conn, "shop/a") < postgres.StatsShards; i++ {
		if i == 100*postgres.StatsShards {
			t.Fatalf("after %d writes shop/a has %d stats rows, want %d", i, shardsOf(t, conn, "shop/a"), postgres.StatsShards)
		}
		delta := ledger.StatsDelta{}
		delta.Add("shop/a", ledger.StateScheduled, ledger.ResolutionNone, 1)
		delta.Add("shop/b", ledger.StateDelivered, ledger.ResolutionNone, 2)
		delta.Outcome("shop/b", true, i%2 == 1, at(time.Duration(i)*time.Second), fmt.Sprintf("failure %d", i))
		writeStats(t, conn, delta, nil)
		for id, c := range delta {
			c.Apply(want[id])
		}
	}
	check("after writes to every shard", s)
	if n := shardsOf(t, conn, "shop/a"); n != postgres.StatsShards {
		t.Fatalf("shop/a has %d stats rows, want %d", n, postgres.StatsShards)
	}

	old := ledger.StatsDelta{}
	old.Add("shop/a", ledger.StateInFlight, ledger.ResolutionNone, 5)
	old.Outcome("shop/a", false, true, at(time.Hour), "written by the old store")
	old.Add("shop/b", ledger.StateCancelled, ledger.ResolutionNone, 7)
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		ids, a, b := []string{"shop/a", "shop/b"}, old["shop/a"], old["shop/b"]
		col := func(c ledger.Counter) []int64 { return []int64{a.Counts[c], b.Counts[c]} }
		if _, err := tx.Exec(ctx, preShardStatsSQL[0], ids); err != nil {
			return err
		}
		failureAt := a.FailureAt.UnixNano()
		_, err := tx.Exec(ctx, preShardStatsSQL[1], ids, col(ledger.CounterPending), col(ledger.CounterInFlight),
			col(ledger.CounterAwaitingAck), col(ledger.CounterDelivered), col(ledger.CounterExhaustedUnresolved),
			col(ledger.CounterCancelled), []*int64{nil, nil}, []*int64{&failureAt, nil}, []string{a.FailureReason, ""})
		return err
	})
	if err != nil {
		t.Fatalf("write as the old store: %v", err)
	}
	for id, c := range old {
		c.Apply(want[id])
	}
	check("after a write of the old store", s)

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := postgres.MigrateTo(ctx, pgtest.DSN(t), schema, 10); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT endpoint_id, pending, in_flight, awaiting_ack, delivered, exhausted_unresolved,
		cancelled, last_success_at, last_failure_at, last_failure_reason FROM endpoint_stats ORDER BY endpoint_id`)
	if err != nil {
		t.Fatal(err)
	}
	var folded []string
	var st ledger.EndpointStats
	var successAt, failureAt *int64
	_, err = pgx.ForEachRow(rows, []any{&st.EndpointID, &st.Pending, &st.InFlight, &st.AwaitingAck, &st.Delivered,
		&st.ExhaustedUnresolved, &st.Cancelled, &successAt, &failureAt, &st.LastFailureReason}, func() error {
		st.LastSuccessAt, st.LastFailureAt = nil, nil
		if successAt != nil {
			tm := time.Unix(0, *successAt)
			st.LastSuccessAt = &tm
		}
		if failureAt != nil {
			tm := time.Unix(0, *failureAt)
			st.LastFailureAt = &tm
		}
		folded = append(folded, statsString(st))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if wantFolded := []string{statsString(*want["shop/a"]), statsString(*want["shop/b"])}; fmt.Sprint(folded) != fmt.Sprint(wantFolded) {
		t.Fatalf("after the downgrade:\n got %q\nwant %q", folded, wantFolded)
	}

	check("after upgrading again", pgtest.OpenStore(t, schema))
}
