-- Settlement: acknowledgements, the scrubbing of one-time secrets, and the
-- retention of payloads and evidence (lessons 1, 3 and 6), as the first
-- schema's header planned. See ledger/settlementrules.go for the rules
-- these columns serve.
--
-- Every index added here is partial on a condition that a freshly
-- inserted event or delivery does not meet, so that ingest maintains none
-- of them. (retry_of, resolved_by and resolved_at come with the recovery
-- migration, 00003.)

-- +goose Up
ALTER TABLE events
	-- When a secret grace period ends; SecretsScrubDue then deletes the
	-- event's row in event_secrets.
	ADD COLUMN secrets_scrub_due bigint,
	-- When retention removed the event's data.
	ADD COLUMN payload_pruned_at bigint,
	-- The event reached no endpoint: its retention runs from its creation,
	-- under the default retention.
	ADD COLUMN undelivered boolean NOT NULL DEFAULT false;
-- Set once the event's payload was pruned: retention walks the deliveries
-- that ended in the order they ended, and each stage walks only its own.
ALTER TABLE deliveries ADD COLUMN payload_pruned boolean NOT NULL DEFAULT false;

-- Acknowledgement timeouts, earliest deadline first.
CREATE INDEX deliveries_ack ON deliveries (ack_deadline, id) WHERE state = 'awaiting_ack';
-- SecretsScrubDue walks the grace periods that ended.
CREATE INDEX events_scrub_due ON events (secrets_scrub_due, id)
	WHERE secrets_scrub_due IS NOT NULL AND secrets_scrub_at IS NULL;
-- Prune walks ended deliveries in the order they ended (terminal_at is NULL
-- while a delivery is live), and events that reached no endpoint by age.
CREATE INDEX deliveries_settled ON deliveries (payload_pruned, terminal_at) WHERE terminal_at IS NOT NULL;
CREATE INDEX events_undelivered_payload ON events (created_at) WHERE undelivered AND payload_pruned_at IS NULL;
CREATE INDEX events_undelivered ON events (created_at) WHERE undelivered;

-- +goose Down
DROP INDEX events_undelivered;
DROP INDEX events_undelivered_payload;
DROP INDEX deliveries_settled;
DROP INDEX events_scrub_due;
DROP INDEX deliveries_ack;
ALTER TABLE deliveries DROP COLUMN payload_pruned;
ALTER TABLE events DROP COLUMN undelivered, DROP COLUMN payload_pruned_at, DROP COLUMN secrets_scrub_due;
