-- Retry budgets and recovery operations (lessons 5, 7 and 8). The
-- deliveries table already has retry_of, resolved_by and resolved_at.

-- +goose Up
-- One bucket per endpoint and Unix minute: the first attempts recorded in
-- that minute (AttemptRecordMany) and the retries taken from its budget
-- (RetryBudgetAcquire). Buckets older than ledger.BudgetRetention decide
-- nothing and are deleted when an endpoint opens a new minute's retries.
CREATE TABLE retry_budgets (
    endpoint_id    TEXT    NOT NULL,
    minute         INTEGER NOT NULL,
    first_attempts INTEGER NOT NULL DEFAULT 0,
    retries        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (endpoint_id, minute)
) STRICT, WITHOUT ROWID;

-- The recorded result of each (operation, delivery) of a DeliveryRecovery,
-- refusals included, so that applying it again changes nothing. No foreign
-- keys: an operation's record outlives the pruning of what it touched.
CREATE TABLE recovery_items (
    operation_key    TEXT    NOT NULL,
    delivery_id      TEXT    NOT NULL,             -- the exhausted delivery
    event_id         TEXT    NOT NULL,             -- its event
    endpoint_id      TEXT    NOT NULL,             -- its endpoint
    action           TEXT    NOT NULL,             -- Retry, Reissue, Dismiss
    outcome          TEXT    NOT NULL,             -- Retried, Reissued, AwaitingReissue, Refused, Dismissed
    reason           TEXT    NOT NULL DEFAULT '',  -- refusal reason
    new_event_id     TEXT    NOT NULL DEFAULT '',  -- the copy, the reissue request, then the replacement
    new_delivery_id  TEXT    NOT NULL DEFAULT '',
    request_event_id TEXT    NOT NULL DEFAULT '',  -- the hookkeeper.reissue.requested event
    created_at       INTEGER NOT NULL,
    completed_at     INTEGER,                      -- when a replacement completed a reissue request
    UNIQUE (operation_key, delivery_id)
) STRICT;

-- Ingest completes the items waiting for a replacement of an event.
CREATE INDEX recovery_items_awaiting ON recovery_items (event_id) WHERE outcome = 'AwaitingReissue';

-- +goose Down
DROP TABLE recovery_items;
DROP TABLE retry_budgets;
