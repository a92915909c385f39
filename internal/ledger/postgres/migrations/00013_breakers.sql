-- Each endpoint's circuit breaker (ledger.Breakers, docs/adr/0033): one
-- JSON document per endpoint that ever opened one, written only by the
-- breaker transactions, which lock the endpoint's row FOR NO KEY UPDATE
-- first (compatible with the FOR KEY SHARE of the publishes fanning out to
-- it; exclusive with EndpointDelete's FOR UPDATE), so the breakers of one
-- endpoint change one transaction at a time across processes. closed_at
-- (Unix nanoseconds, NULL while open) lets the engines list the breakers
-- still ramping. endpoints.breaker_open mirrors the document's Open so
-- that a claim skips a held endpoint the way it skips a paused one.

-- +goose Up
CREATE TABLE endpoint_breakers (
	endpoint_id text    NOT NULL PRIMARY KEY,
	open        boolean NOT NULL,
	closed_at   bigint,
	state       jsonb   NOT NULL
);
ALTER TABLE endpoints ADD COLUMN breaker_open boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE endpoints DROP COLUMN breaker_open;
DROP TABLE endpoint_breakers;
