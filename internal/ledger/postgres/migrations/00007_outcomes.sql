-- Outcome evidence (ledger.OutcomeBucket): per endpoint, per policy
-- version and per hour, how many deliveries settled with each outcome on
-- each attempt, and the time-to-delivery histogram of the delivered ones
-- (ttd, ledger.TimeToDeliveryBounds). One row is upserted by the
-- transaction that settles a delivery, after endpoint_stats (the lock
-- order of doc.go); OutcomePrune
-- removes old hours. Numbered 00006: 00005 is left to a change written in
-- parallel.

-- +goose Up
CREATE TABLE outcome_buckets (
	endpoint_id       text     NOT NULL,
	policy_name       text     NOT NULL,
	policy_generation bigint   NOT NULL,
	hour              bigint   NOT NULL,
	outcome           text     NOT NULL,
	attempt           integer  NOT NULL,
	namespace         text     NOT NULL,
	count             bigint   NOT NULL,
	ttd               bigint[] NOT NULL,
	first_at          bigint   NOT NULL,
	last_at           bigint   NOT NULL,
	PRIMARY KEY (endpoint_id, policy_name, policy_generation, hour, outcome, attempt)
);

CREATE INDEX outcome_buckets_policy ON outcome_buckets (namespace, policy_name, hour);
CREATE INDEX outcome_buckets_hour ON outcome_buckets (hour);

-- +goose Down
DROP TABLE outcome_buckets;
