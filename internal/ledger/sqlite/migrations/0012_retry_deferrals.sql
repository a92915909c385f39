-- The retries a retry budget deferred (ledger.RetryDeferrals), one bucket
-- per endpoint and Unix minute like retry_budgets, so that an endpoint's
-- RetryBudgetLimited condition counts what every engine deferred. first_at
-- and last_at (Unix nanoseconds) are the bucket's earliest and latest
-- deferral: streaks are joined across buckets from them. Buckets older
-- than ledger.BudgetRetention are deleted as new minutes open; the index
-- on minute finds them.

-- +goose Up
CREATE TABLE retry_deferrals (
    endpoint_id TEXT    NOT NULL,
    minute      INTEGER NOT NULL,
    deferred    INTEGER NOT NULL,
    first_at    INTEGER NOT NULL,
    last_at     INTEGER NOT NULL,
    PRIMARY KEY (endpoint_id, minute)
) STRICT, WITHOUT ROWID;
CREATE INDEX retry_deferrals_minute ON retry_deferrals (minute);

-- +goose Down
DROP TABLE retry_deferrals;
