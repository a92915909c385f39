-- Two reads an idle manager makes walked every endpoint, so its cost grew
-- with the number of endpoints (issue #26).
--
-- Every claim round, busy or idle, reads the endpoints whose deliveries
-- wait (paused, or their breaker open): without an index of its own that
-- read walked every endpoint's wide row. The partial index holds only the
-- blocked ones, under the claim query's own predicate, so that the read
-- costs what is blocked. It replaces endpoints_paused (0001), whose
-- narrower predicate no query uses since the breaker (0013).
--
-- The activity poll (ledger.Store.EndpointActivitySince) reads the
-- endpoints whose counters or deferrals changed since its last read:
-- changed_at is when a transaction last did (the store's wall clock, Unix
-- nanoseconds; 0: not since this migration). No index: it would add a
-- B-tree write to every stats update, and a filtered walk of this narrow
-- table every few seconds costs less than that.

-- +goose Up
DROP INDEX endpoints_paused;
CREATE INDEX endpoints_blocked ON endpoints (id) WHERE paused <> 0 OR breaker_open <> 0;
ALTER TABLE endpoint_stats ADD COLUMN changed_at INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE endpoint_stats DROP COLUMN changed_at;
DROP INDEX endpoints_blocked;
CREATE INDEX endpoints_paused ON endpoints (id) WHERE paused <> 0;
