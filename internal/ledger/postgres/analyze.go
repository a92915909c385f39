package postgres

import (
	"context"
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
	// youngMinChange is the fewest rows changed since the last analysis
	// that make one worth running.
	youngMinChange = 1_000
	// youngCheck is how often the store looks at its tables' sizes.
	youngCheck = time.Second
)

// needsAnalyze reports whether a table with rows rows at its last
// analysis (negative: never analysed) and changed rows changed since is
// young and has doubled since.
func needsAnalyze(rows, changed int64) bool {
	rows = max(rows, 0)
	return rows < youngRows && changed >= max(rows, youngMinChange)
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
	rows, _ := pool.Query(ctx, `SELECT c.relname, c.reltuples::bigint, s.n_mod_since_analyze
		FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = ANY($1)`, hotTables)
	var due []string
	var name string
	var n, changed int64
	_, err := pgx.ForEachRow(rows, []any{&name, &n, &changed}, func() error {
		young = young || n < youngRows
		if needsAnalyze(n, changed) {
			due = append(due, name)
		}
		return nil
	})
	if err != nil {
		return true
	}
	for _, table := range due {
		// table is one of hotTables: no quoting needed.
		if _, err := pool.Exec(ctx, "ANALYZE "+table); err != nil {
			return true
		}
	}
	return young
}
