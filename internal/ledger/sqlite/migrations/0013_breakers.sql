-- Each endpoint's circuit breaker (ledger.Breakers, docs/adr/0033): one
-- JSON document per endpoint that ever opened one, written only by the
-- breaker transactions. closed_at (Unix nanoseconds, NULL while open)
-- lets the engines list the breakers still ramping. endpoints.breaker_open
-- mirrors the document's Open so that a claim skips a held endpoint the
-- way it skips a paused one, without reading the document.

-- +goose Up
CREATE TABLE endpoint_breakers (
    endpoint_id TEXT    NOT NULL PRIMARY KEY,
    open        INTEGER NOT NULL,
    closed_at   INTEGER,
    state       BLOB    NOT NULL
) STRICT, WITHOUT ROWID;
ALTER TABLE endpoints ADD COLUMN breaker_open INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE endpoints DROP COLUMN breaker_open;
DROP TABLE endpoint_breakers;
