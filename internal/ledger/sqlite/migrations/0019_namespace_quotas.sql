-- Namespace quotas (WebhookQuota, issue #43, docs/adr/0048): each
-- namespace's hard limits and their usage, checked and counted in the
-- transaction that inserts the namespace's events, so that the count is
-- exact and survives restarts. A namespace without a row is not limited
-- and costs its publishes no write here.
--
-- day, events_today and refused_today count the UTC day (days since the
-- epoch); payload_bytes is the data bytes of the namespace's publishes not
-- pruned yet; rate_tat is the publish rate's theoretical arrival time
-- (GCRA, Unix nanoseconds).
--
-- events.quota_bytes is what a publish counted against payload bytes (its
-- data's length; 0 for events that were not published, such as dead
-- letters, and once the payload is pruned), so that pruning gives back
-- exactly what was counted. Constant default: no rewrite of the table.

-- +goose Up
CREATE TABLE namespace_quotas (
    namespace            TEXT    PRIMARY KEY,
    publishes_per_second INTEGER NOT NULL DEFAULT 0,
    publish_burst        INTEGER NOT NULL DEFAULT 0,
    events_per_day       INTEGER NOT NULL DEFAULT 0,
    payload_bytes_hard   INTEGER NOT NULL DEFAULT 0,
    day                  INTEGER NOT NULL DEFAULT 0,
    events_today         INTEGER NOT NULL DEFAULT 0,
    refused_today        INTEGER NOT NULL DEFAULT 0,
    payload_bytes        INTEGER NOT NULL DEFAULT 0,
    rate_tat             INTEGER NOT NULL DEFAULT 0,
    updated_at           INTEGER NOT NULL
) STRICT;
ALTER TABLE events ADD COLUMN quota_bytes INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE events DROP COLUMN quota_bytes;
DROP TABLE namespace_quotas;
