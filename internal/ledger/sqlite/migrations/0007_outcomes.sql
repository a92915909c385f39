-- Outcome evidence (ledger.OutcomeBucket): per endpoint, per policy
-- version and per hour, how many deliveries settled with each outcome on
-- each attempt, and the time-to-delivery histogram of the delivered ones
-- (t0..t12, ledger.TimeToDeliveryBounds). One row is upserted by the
-- transaction that settles a delivery; OutcomePrune removes old hours.
-- Numbered 0006: 0005 is left to a change written in parallel.

-- +goose Up
CREATE TABLE outcome_buckets (
    endpoint_id       TEXT    NOT NULL,
    policy_name       TEXT    NOT NULL,   -- '' for the default policy
    policy_generation INTEGER NOT NULL,
    hour              INTEGER NOT NULL,   -- start of the hour, unix ns UTC
    outcome           TEXT    NOT NULL,   -- Delivered or an exhaust reason
    attempt           INTEGER NOT NULL,
    namespace         TEXT    NOT NULL,
    count             INTEGER NOT NULL,
    t0 INTEGER NOT NULL, t1 INTEGER NOT NULL, t2 INTEGER NOT NULL, t3 INTEGER NOT NULL,
    t4 INTEGER NOT NULL, t5 INTEGER NOT NULL, t6 INTEGER NOT NULL, t7 INTEGER NOT NULL,
    t8 INTEGER NOT NULL, t9 INTEGER NOT NULL, t10 INTEGER NOT NULL, t11 INTEGER NOT NULL,
    t12 INTEGER NOT NULL,
    first_at          INTEGER NOT NULL,
    last_at           INTEGER NOT NULL,
    PRIMARY KEY (endpoint_id, policy_name, policy_generation, hour, outcome, attempt)
) STRICT, WITHOUT ROWID;

-- A RetryPolicy's evidence is read across its endpoints.
CREATE INDEX outcome_buckets_policy ON outcome_buckets (namespace, policy_name, hour);
-- Pruning walks the oldest hours.
CREATE INDEX outcome_buckets_hour ON outcome_buckets (hour);

-- +goose Down
DROP TABLE outcome_buckets;
