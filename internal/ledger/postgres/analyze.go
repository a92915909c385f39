package postgres

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A young ledger's plans go wrong: statements the server runs as generic
// plans (after five executions, when they look no costlier) are costed
// on the tables' size at that moment, so plans made while events and
// deliveries hold a few hundred rows scan them whole, and are kept until
// an ANALYZE invalidates them. Autovacuum analyses at most once a minute
// (autovacuum_naptime), so a new ledger under load spent two to four times
// more of the server's CPU per event for its first minute (ADR 0031). The
// store analyses its hot tables itself while they are young, whenever one
// has doubled since its last analysis; past youngRows autovacuum's own
// thresholds keep up, and a doubling takes long enough not to matter.

// hotTables are the tables the write path's statements read by key.
var hotTables = []string{"events", "deliveries", "attempts"}

const (
	// youngRows is the size below which the store analyses a table
	// itself.
	youngRows = 1_000_000
	// youngStatisticsTarget is the statistics target of the store's own
	// analyses: a sample of 3,000 rows (300 per unit) instead of the
	// default's 30,000. They are there to replace plans made on smaller
	// tables, which takes the tables' sizes and a rough picture of their
	// columns. At the default target an analysis of events read 30,000
	// 1 KiB rows: 0.4 s of a server core at 81,000 rows, up to 1 s in the
	// cost runs, on the CPUs the engine shares, and the tail of its
	// publishes (ADR 0031). Autovacuum's analyses keep the default.
	youngStatisticsTarget = 10
	// youngMinChange is the fewest rows added since the last analysis
	// that make one worth running.
	youngMinChange = 1_000
	// youngCheck is how often the store looks at its tables' sizes.
	youngCheck = time.Second
)

// needsAnalyze reports whether a table with rows rows at its last
// analysis (negative: never analysed) and live rows now is young and has
// doubled since. It counts live rows, not rows changed: a delivery is
// inserted and then updated at least once, so counting changes analysed
// deliveries and events at every half again of growth instead of every
// doubling.
func needsAnalyze(rows, live int64) bool {
	rows = max(rows, 0)
	return rows < youngRows && live-rows >= max(rows, youngMinChange)
}

// analyzeYoung analyses each hot table that needsAnalyze, every youngCheck,
// until ctx is done or every hot table is past youngRows. It is best
// effort: an error ends nothing, and autovacuum does the same work later.
func analyzeYoung(ctx context.Context, pool *pgxpool.Pool) {
	t := time.NewTicker(youngCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !analyzeYoungOnce(ctx, pool) {
			return
		}
	}
}

// analyzeYoungOnce analyses the hot tables that need it and reports
// whether any hot table is still young (after an error: true, to look
// again next time).
func analyzeYoungOnce(ctx context.Context, pool *pgxpool.Pool) (young bool) {
	rows, _ := pool.Query(ctx, `SELECT c.relname, c.reltuples::bigint, s.n_live_tup
		FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = ANY($1)`, hotTables)
	var due []string
	var name string
	var n, live int64
	_, err := pgx.ForEachRow(rows, []any{&name, &n, &live}, func() error {
		young = young || n < youngRows
		if needsAnalyze(n, live) {
			due = append(due, name)
		}
		return nil
	})
	if err != nil {
		return true
	}
	for _, table := range due {
		// table is one of hotTables: no quoting needed. SET LOCAL holds
		// for this transaction alone (ANALYZE may run in one).
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL default_statistics_target = "+strconv.Itoa(youngStatisticsTarget)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "ANALYZE "+table)
			return err
		})
		if err != nil {
			return true
		}
	}
	return young
}
