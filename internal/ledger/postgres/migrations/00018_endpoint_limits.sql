-- An endpoint's rateLimit and maxInFlight, held for every engine on the
-- ledger together (ledger.Limits, ADR 0047). endpoint_rates is one GCRA
-- schedule per endpoint: tat is its theoretical arrival time (Unix
-- nanoseconds), advanced by 1/perSecond with each send taken.
-- endpoint_slot_leases is each engine's (holder's) share of an endpoint's
-- in-flight slots until a time (Unix nanoseconds): held never less than its
-- attempts in progress, want what it could fill. Expired leases are deleted
-- by the next lease of the endpoint. Both are outside the store's lock
-- order: a take or a lease is its own transaction and locks nothing else.

-- +goose Up
CREATE TABLE endpoint_rates (
	endpoint_id text   PRIMARY KEY,
	tat         bigint NOT NULL
);
CREATE TABLE endpoint_slot_leases (
	endpoint_id text   NOT NULL,
	holder      text   NOT NULL,
	held        bigint NOT NULL,
	want        bigint NOT NULL,
	until       bigint NOT NULL,
	PRIMARY KEY (endpoint_id, holder)
);

-- +goose Down
DROP TABLE endpoint_slot_leases;
DROP TABLE endpoint_rates;
