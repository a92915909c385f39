-- Settlement: acknowledgements, the scrubbing of one-time secrets, and the
-- retention of payloads and evidence (lessons 1, 3 and 6). See
-- ledger/settlementrules.go for the rules these columns serve.
--
-- Every index added here is partial on a condition that a freshly
-- inserted event or delivery does not meet, so that ingest maintains none
-- of them: they are written when a delivery ends, a grace period starts,
-- or retention runs.

-- +goose Up
-- When a secret grace period ends (the event's secrets are then scrubbed
-- by SecretsScrubDue), and when retention removed the event's data.
ALTER TABLE events ADD COLUMN secrets_scrub_due INTEGER;
ALTER TABLE events ADD COLUMN payload_pruned_at INTEGER;
-- 1 for an event that reached no endpoint: its retention runs from its
-- creation, under the default retention.
ALTER TABLE events ADD COLUMN undelivered INTEGER NOT NULL DEFAULT 0;
-- 1 once the event's payload was pruned: retention walks the deliveries
-- that ended in the order they ended, and each stage walks only its own.
ALTER TABLE deliveries ADD COLUMN payload_pruned INTEGER NOT NULL DEFAULT 0;

-- SecretsScrubDue walks the grace periods that ended.
CREATE INDEX events_scrub_due ON events (secrets_scrub_due)
    WHERE secrets_scrub_due IS NOT NULL AND secrets_scrubbed_at IS NULL;
-- Prune walks ended deliveries in the order they ended (terminal_at is NULL
-- while a delivery is live), and events that reached no endpoint by age.
CREATE INDEX deliveries_settled ON deliveries (payload_pruned, terminal_at) WHERE terminal_at IS NOT NULL;
CREATE INDEX events_undelivered_payload ON events (created_at) WHERE undelivered = 1 AND payload_pruned_at IS NULL;
CREATE INDEX events_undelivered ON events (created_at) WHERE undelivered = 1;

-- +goose Down
DROP INDEX events_undelivered;
DROP INDEX events_undelivered_payload;
DROP INDEX deliveries_settled;
DROP INDEX events_scrub_due;
ALTER TABLE deliveries DROP COLUMN payload_pruned;
ALTER TABLE events DROP COLUMN undelivered;
ALTER TABLE events DROP COLUMN payload_pruned_at;
ALTER TABLE events DROP COLUMN secrets_scrub_due;
