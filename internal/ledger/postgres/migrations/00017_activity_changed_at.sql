-- The activity poll (ledger.Store.EndpointActivitySince) reads the
-- endpoints whose counters or deferrals changed since its last read,
-- instead of summing every endpoint's shards every few seconds (issue #26).
-- changed_at is when a transaction last wrote the row (Unix nanoseconds of
-- the server's clock, which every replica shares; 0: not since this
-- migration). A deferral stamps shard 0. Constant default: no rewrite.
--
-- No index: it would add a B-tree write to every stats update (the hot
-- path's rows, updated in place), and a filtered scan of this small table
-- every few seconds costs less.

-- +goose Up
ALTER TABLE endpoint_stats ADD COLUMN changed_at bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE endpoint_stats DROP COLUMN changed_at;
