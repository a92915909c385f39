-- The retries a retry budget deferred (ledger.RetryDeferrals), one bucket
-- per endpoint and Unix minute like retry_budgets, so that an endpoint's
-- RetryBudgetLimited condition counts what every engine deferred, not only
-- the leader's. Records from several processes add up in one
-- INSERT ... ON CONFLICT DO UPDATE. first_at and last_at (Unix
-- nanoseconds) are the bucket's earliest and latest deferral: streaks are
-- joined across buckets from them. Buckets older than
-- ledger.BudgetRetention are deleted as new minutes open; the index on
-- minute finds them. The table is outside the store's lock order: a
-- record is its own transaction and locks nothing else.

-- +goose Up
CREATE TABLE retry_deferrals (
	endpoint_id text   NOT NULL,
	minute      bigint NOT NULL,
	deferred    bigint NOT NULL,
	first_at    bigint NOT NULL,
	last_at     bigint NOT NULL,
	PRIMARY KEY (endpoint_id, minute)
);
CREATE INDEX retry_deferrals_minute ON retry_deferrals (minute);

-- +goose Down
DROP TABLE retry_deferrals;
