// Package postgres is the ledger store for several replicas sharing one
// PostgreSQL database. It exists because the embedded SQLite ledger can only
// serve one process: here the queue lives in shared tables, and processes
// divide the work by claiming rows with FOR UPDATE SKIP LOCKED, so that no
// two of them ever hold a live lease on the same delivery.
//
// It implements ledger.Store and passes the shared conformance suite
// (package ledgertest). Choices a reader should know:
//
//   - Instants are stored as bigint Unix nanoseconds, like the SQLite store,
//     so every time.Time reads back exactly as written (in UTC). Times must
//     lie between the years 1678 and 2262; the zero time is stored as 0.
//   - The schema is applied at Open from embedded goose migrations, under a
//     PostgreSQL advisory lock, so two processes may open a fresh database at
//     once. WithSchema confines a store to one schema (search_path), which
//     lets tests run in parallel on one server.
//   - Transactions run at READ COMMITTED. Every transaction takes its row
//     locks in one global order (endpoints, then deliveries, then events,
//     recovery items and retry budgets, then endpoint_stats, then outcome
//     buckets; each by key), so concurrent writers queue instead of
//     deadlocking; a deadlock or serialization failure that still happens is
//     retried a few times (see errors.go).
//   - An endpoint's counters are spread over up to 16 endpoint_stats rows
//     (shards, keyed by endpoint ID and shard): a transaction adds its
//     change to one shard of each endpoint it touches, in endpoint-ID order,
//     and readers sum the shards. One endpoint's inserts, claims and records
//     therefore do not wait for each other's commits on one row (stats.go).
//   - Batches cost a fixed number of round trips whatever their size: rows
//     travel as arrays (unnest), and the statements of one step are
//     pipelined with pgx.Batch.
package postgres
