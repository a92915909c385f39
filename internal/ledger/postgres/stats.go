package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// statsShards is how many rows (shards) of endpoint_stats hold one
// endpoint's counters. Every write transaction of an endpoint (insert,
// claim, record, acknowledgement, sweeps) changes its counters, and a
// changed row stays locked until its transaction commits: with one row the
// transactions of one endpoint ran one after the other. With statsShards
// rows, a transaction adds its whole delta to one of them, so those of one
// endpoint wait for each other only when they pick the same row.
//
// Why 16: one process has a handful of write streams per endpoint in
// flight at once (ingest, claim, record and acknowledgement group commits,
// sweeps), and the shards are dealt round-robin within a process, so its
// transactions never meet on a row; a few replicas dealing independently
// meet on a given row with probability 1/16 per pair. Reads sum at most 16
// rows of one index range, and an endpoint has only the rows its writers
// used.
const statsShards = 16

// statsShardNext deals shards round-robin to the process's transactions,
// from a random start so that replicas do not walk the rows in step.
var statsShardNext atomic.Uint32

func init() { statsShardNext.Store(rand.Uint32()) }

// nextStatsShard is the shard of the next transaction that writes stats.
func nextStatsShard() int16 { return int16(statsShardNext.Add(1) % statsShards) }

// applyStats writes a transaction's stats changes (see queueStats).
func applyStats(ctx context.Context, tx pgx.Tx, s ledger.StatsDelta) error {
	b := &pgx.Batch{}
	queueStats(b, s)
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("update endpoint stats: %w", err)
	}
	return nil
}

// changeStampSQL is the stamp of a change for EndpointActivitySince: the
// server's clock in Unix nanoseconds, which every replica shares (theirs
// may be skewed), read when the statement writes the row, as late in its
// transaction as the store's lock order puts the stats.
const changeStampSQL = `(extract(epoch FROM clock_timestamp()) * 1e9)::bigint`

// queueStats adds to b the statement that writes a transaction's stats
// changes, all of them to one shard (nextStatsShard) of every endpoint it
// touches: one upsert, which takes the rows in endpoint-ID order (the
// ORDER BY feeds the insert row by row, and each row is locked, or
// inserted, as it comes; the first transaction that picks a shard creates
// its row, EndpointUpsert creates shard 0). It does per row what
// ledger.StatsChange.Apply says; EndpointStats combines the rows. (A lock
// of the existing rows ahead of the upsert, as with one row per endpoint,
// would take them out of order with the rows the upsert creates.)
//
// Why two transactions still never deadlock: order the rows by (endpoint
// ID, shard). A transaction locks its stats rows in increasing order of
// that key (one shard, endpoint IDs ascending), and takes them where the
// store's global lock order puts endpoint_stats (doc.go): after its
// endpoint, delivery, event, recovery item and retry budget rows, before
// its outcome rows. So a transaction only ever waits for a lock that comes
// after every lock it holds; along a chain of waits the locks only grow,
// and no chain can close into a cycle. Two transactions on different
// shards share no stats row; on the same shard they lock in endpoint-ID
// order, as with one row per endpoint.
//
// last_failure_order (a sequence value drawn when a failure is written,
// under the row's lock) orders failures of the same instant written to
// different shards, so that the later transaction's reason wins, as on
// one row. writes tells these
// updates from those of a store older than migration 00011 (see there).
// changed_at stamps the row for EndpointActivitySince (changeStampSQL).
func queueStats(b *pgx.Batch, s ledger.StatsDelta) {
	ids := s.Endpoints()
	if len(ids) == 0 {
		return
	}
	var cols [ledger.NumCounters][]int64
	successAt := make([]*int64, len(ids))
	failureAt := make([]*int64, len(ids))
	reasons := make([]string, len(ids))
	for i, id := range ids {
		d := s[id]
		for c := range cols {
			cols[c] = append(cols[c], d.Counts[c])
		}
		successAt[i], failureAt[i], reasons[i] = nullNanos(d.SuccessAt), nullNanos(d.FailureAt), d.FailureReason
	}
	b.Queue(`
		INSERT INTO endpoint_stats AS s (endpoint_id, shard, pending, in_flight, awaiting_ack, delivered,
			exhausted_unresolved, cancelled, last_success_at, last_failure_at, last_failure_reason, last_failure_order,
			changed_at)
		SELECT u.endpoint_id, $11, u.pending, u.in_flight, u.awaiting_ack, u.delivered, u.exhausted_unresolved,
			u.cancelled, u.success_at, u.failure_at,
			CASE WHEN u.failure_at IS NULL THEN '' ELSE u.failure_reason END,
			CASE WHEN u.failure_at IS NULL THEN 0 ELSE nextval('endpoint_stats_failure_order') END,
			`+changeStampSQL+`
		FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[],
			$7::bigint[], $8::bigint[], $9::bigint[], $10::text[])
			AS u(endpoint_id, pending, in_flight, awaiting_ack, delivered, exhausted_unresolved,
				cancelled, success_at, failure_at, failure_reason)
		ORDER BY u.endpoint_id
		ON CONFLICT (endpoint_id, shard) DO UPDATE SET
			pending = s.pending + excluded.pending,
			in_flight = s.in_flight + excluded.in_flight,
			awaiting_ack = s.awaiting_ack + excluded.awaiting_ack,
			delivered = s.delivered + excluded.delivered,
			exhausted_unresolved = s.exhausted_unresolved + excluded.exhausted_unresolved,
			cancelled = s.cancelled + excluded.cancelled,
			last_success_at = GREATEST(s.last_success_at, excluded.last_success_at),
			last_failure_at = GREATEST(s.last_failure_at, excluded.last_failure_at),
			last_failure_reason = CASE
				WHEN excluded.last_failure_at >= COALESCE(s.last_failure_at, excluded.last_failure_at)
				THEN excluded.last_failure_reason ELSE s.last_failure_reason END,
			last_failure_order = CASE
				WHEN excluded.last_failure_at >= COALESCE(s.last_failure_at, excluded.last_failure_at)
				THEN nextval('endpoint_stats_failure_order') ELSE s.last_failure_order END,
			writes = s.writes + 1,
			changed_at = excluded.changed_at`,
		ids, cols[ledger.CounterPending], cols[ledger.CounterInFlight], cols[ledger.CounterAwaitingAck],
		cols[ledger.CounterDelivered], cols[ledger.CounterExhaustedUnresolved], cols[ledger.CounterCancelled],
		successAt, failureAt, reasons, nextStatsShard())
}

// endpointStatsSQL combines an endpoint's shards (one index range of the
// primary key): counters add up, the last success and failure are the
// latest of any shard, and the failure reason comes with the latest
// failure, ties going to the failure written last (last_failure_order),
// then to the lowest shard. No row: the endpoint was never registered.
const endpointStatsSQL = `
	SELECT sum(pending)::bigint, sum(in_flight)::bigint, sum(awaiting_ack)::bigint, sum(delivered)::bigint,
		sum(exhausted_unresolved)::bigint, sum(cancelled)::bigint, max(last_success_at), max(last_failure_at),
		(array_agg(last_failure_reason ORDER BY last_failure_at DESC NULLS LAST, last_failure_order DESC, shard))[1]
	FROM endpoint_stats WHERE endpoint_id = $1
	GROUP BY endpoint_id`

// EndpointStats implements ledger.Store. A deleted endpoint's counters stay
// readable; only an endpoint never registered is ErrNotFound.
func (s *Store) EndpointStats(ctx context.Context, endpointID string) (ledger.EndpointStats, error) {
	st := ledger.EndpointStats{EndpointID: endpointID}
	var successAt, failureAt *int64
	err := s.pool.QueryRow(ctx, endpointStatsSQL, endpointID).Scan(&st.Pending, &st.InFlight, &st.AwaitingAck,
		&st.Delivered, &st.ExhaustedUnresolved, &st.Cancelled, &successAt, &failureAt, &st.LastFailureReason)
	if err != nil {
		return ledger.EndpointStats{}, translate("endpoint stats "+endpointID, err)
	}
	st.LastSuccessAt, st.LastFailureAt = fromNullNanos(successAt), fromNullNanos(failureAt)
	return st, nil
}

// activityCols are the columns of an activity read, from its per-endpoint
// aggregate s (activityShardsSQL) and its latest deferral d.
const activityCols = `s.endpoint_id, s.pending, s.in_flight, s.awaiting_ack, s.delivered, s.exhausted_unresolved,
	s.cancelled, s.last_success_at, s.last_failure_at, s.last_failure_reason, d.last_at`

// activityShardsSQL combines the shards of each endpoint as
// endpointStatsSQL does one's; the statement adds which rows and GROUP BY.
const activityShardsSQL = `
	SELECT endpoint_id, sum(pending)::bigint AS pending, sum(in_flight)::bigint AS in_flight,
		sum(awaiting_ack)::bigint AS awaiting_ack, sum(delivered)::bigint AS delivered,
		sum(exhausted_unresolved)::bigint AS exhausted_unresolved, sum(cancelled)::bigint AS cancelled,
		max(last_success_at) AS last_success_at, max(last_failure_at) AS last_failure_at,
		(array_agg(last_failure_reason ORDER BY last_failure_at DESC NULLS LAST, last_failure_order DESC, shard))[1]
			AS last_failure_reason
	FROM endpoint_stats`

// endpointActivitySQL, the read of every endpoint (the zero cursor),
// combines every endpoint's shards in one walk of endpoint_stats grouped by
// endpoint, joined with each endpoint's latest deferral from one aggregate
// of retry_deferrals (which keeps an hour of buckets, BudgetRetention): two
// reads, whatever the number of endpoints, and an estimated cost low
// enough that the server does not JIT-compile it.
const endpointActivitySQL = `
	SELECT ` + activityCols + `
	FROM (` + activityShardsSQL + ` GROUP BY endpoint_id) s
	LEFT JOIN (SELECT endpoint_id, max(last_at) AS last_at FROM retry_deferrals GROUP BY endpoint_id) d
		ON d.endpoint_id = s.endpoint_id
	ORDER BY s.endpoint_id`

// endpointActivitySinceSQL reads the endpoints with a shard stamped changed
// at or after $1: a filtered scan of endpoint_stats finds them, then each
// one's shards (one range of the primary key) and latest deferral (one of
// retry_deferrals') are read, so what is combined, sorted and sent is what
// changed. changed_at has no index (migration 00017): every stats update
// changes it, so an index would cost every update of the hot path a
// B-tree write (and its HOT update), while the scan of this small table
// every few seconds costs the poller alone.
const endpointActivitySinceSQL = `
	SELECT ` + activityCols + `
	FROM (` + activityShardsSQL + `
		WHERE endpoint_id IN (SELECT endpoint_id FROM endpoint_stats WHERE changed_at >= $1)
		GROUP BY endpoint_id) s
	LEFT JOIN LATERAL (SELECT max(last_at) AS last_at FROM retry_deferrals WHERE endpoint_id = s.endpoint_id) d ON true
	ORDER BY s.endpoint_id`

// activityClockSQL is the cursor of an activity read: the start of its
// transaction, sent in the read's pipeline, ahead of it. At READ COMMITTED
// a statement's snapshot is taken after its transaction began, so the
// cursor is no later than the snapshot the rows come from.
// (statement_timestamp() is not: in the extended protocol it is when the
// Execute message came, after Bind took the snapshot; clock_timestamp()
// in the read runs after its snapshot too.)
const activityClockSQL = `SELECT (extract(epoch FROM transaction_timestamp()) * 1e9)::bigint`

// EndpointActivityList implements ledger.Store: EndpointActivitySince from
// the zero cursor.
func (s *Store) EndpointActivityList(ctx context.Context) ([]ledger.EndpointActivity, error) {
	list, _, err := s.EndpointActivitySince(ctx, ledger.ActivityCursor{})
	return list, err
}

// EndpointActivitySince implements ledger.Store: the clock and the read in
// one pipeline, one round trip.
func (s *Store) EndpointActivitySince(ctx context.Context, c ledger.ActivityCursor) ([]ledger.EndpointActivity, ledger.ActivityCursor, error) {
	b := &pgx.Batch{}
	b.Queue(activityClockSQL)
	if c == (ledger.ActivityCursor{}) {
		b.Queue(endpointActivitySQL)
	} else {
		b.Queue(endpointActivitySinceSQL, c.From(s.activityOverlap))
	}
	br := s.pool.SendBatch(ctx, b)
	defer func() { _ = br.Close() }()
	var next ledger.ActivityCursor
	if err := br.QueryRow().Scan(&next.At); err != nil {
		return nil, c, translate("endpoint activity: clock", err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, c, translate("endpoint activity", err)
	}
	defer rows.Close()
	var out []ledger.EndpointActivity
	for rows.Next() {
		var a ledger.EndpointActivity
		st := &a.Stats
		var successAt, failureAt, deferralAt *int64
		if err := rows.Scan(&st.EndpointID, &st.Pending, &st.InFlight, &st.AwaitingAck, &st.Delivered, &st.ExhaustedUnresolved,
			&st.Cancelled, &successAt, &failureAt, &st.LastFailureReason, &deferralAt); err != nil {
			return nil, c, translate("endpoint activity", err)
		}
		st.LastSuccessAt, st.LastFailureAt, a.LastDeferralAt = fromNullNanos(successAt), fromNullNanos(failureAt), fromNullNanos(deferralAt)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, c, translate("endpoint activity", err)
	}
	return out, next, nil
}
