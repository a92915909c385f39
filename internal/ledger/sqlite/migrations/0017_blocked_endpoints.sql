-- Every claim round, busy or idle, reads the endpoints whose deliveries
-- wait (paused, or their breaker open): without an index of its own that
-- read walked every endpoint's wide row, so an idle manager's cost grew
-- with the number of endpoints (issue #26). The partial index holds only
-- the blocked ones, under the claim query's own predicate, so that the
-- read costs what is blocked. It replaces endpoints_paused (0001), whose
-- narrower predicate no query uses since the breaker (0013).

-- +goose Up
DROP INDEX endpoints_paused;
CREATE INDEX endpoints_blocked ON endpoints (id) WHERE paused <> 0 OR breaker_open <> 0;

-- +goose Down
DROP INDEX endpoints_blocked;
CREATE INDEX endpoints_paused ON endpoints (id) WHERE paused <> 0;
