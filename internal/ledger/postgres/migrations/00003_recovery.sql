-- Retry budgets and recovery operations (lessons 5, 7 and 8), beside the
-- tables of the first schema as its header planned.

-- +goose Up
-- A recovery retry is a new delivery linked to the exhausted one; the
-- exhausted one only gains a resolution, given by an operation.
ALTER TABLE deliveries
	ADD COLUMN retry_of    text NOT NULL DEFAULT '',
	ADD COLUMN resolved_by text NOT NULL DEFAULT '',
	ADD COLUMN resolved_at bigint;

-- One bucket per endpoint and Unix minute: the first attempts recorded in
-- that minute (AttemptRecordMany) and the retries taken from its budget
-- (RetryBudgetAcquire, one INSERT ... ON CONFLICT DO UPDATE ... WHERE, so
-- that processes sharing the ledger cannot spend the same allowance).
-- Buckets older than ledger.BudgetRetention decide nothing and are deleted
-- when an endpoint opens a new minute's retries.
CREATE TABLE retry_budgets (
	endpoint_id    text   NOT NULL,
	minute         bigint NOT NULL,
	first_attempts bigint NOT NULL DEFAULT 0,
	retries        bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (endpoint_id, minute)
);

-- The recorded result of each (operation, delivery) of a DeliveryRecovery,
-- refusals included, so that applying it again changes nothing. No foreign
-- keys: an operation's record outlives the pruning of what it touched.
CREATE TABLE recovery_items (
	operation_key    text   NOT NULL,
	delivery_id      text   NOT NULL, -- the exhausted delivery
	seq              bigint GENERATED ALWAYS AS IDENTITY,
	event_id         text   NOT NULL, -- its event
	endpoint_id      text   NOT NULL, -- its endpoint
	action           text   NOT NULL, -- Retry, Reissue, Dismiss
	outcome          text   NOT NULL, -- Retried, Reissued, AwaitingReissue, Refused, Dismissed
	reason           text   NOT NULL, -- refusal reason
	new_event_id     text   NOT NULL, -- the copy, the reissue request, then the replacement
	new_delivery_id  text   NOT NULL,
	request_event_id text   NOT NULL, -- the hookkeeper.reissue.requested event
	created_at       bigint NOT NULL,
	completed_at     bigint,          -- when a replacement completed a reissue request
	PRIMARY KEY (operation_key, delivery_id)
);
-- Ingest completes the items waiting for a replacement of an event.
CREATE INDEX recovery_items_awaiting ON recovery_items (event_id) WHERE outcome = 'AwaitingReissue';

-- +goose Down
DROP TABLE recovery_items;
DROP TABLE retry_budgets;
ALTER TABLE deliveries DROP COLUMN resolved_at, DROP COLUMN resolved_by, DROP COLUMN retry_of;
