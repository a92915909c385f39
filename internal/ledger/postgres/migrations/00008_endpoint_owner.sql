-- The endpoint's owner (WebhookEndpoint spec.owner, ledger.Endpoint.Owner):
-- carried in the dead-letter event, the delivery read APIs and the
-- exhaustion metrics so that unresolved work reaches the team that owns
-- it. '' when the endpoint names none. A tombstoned endpoint keeps it, so
-- its history still names its owner.

-- +goose Up
ALTER TABLE endpoints ADD COLUMN owner text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE endpoints DROP COLUMN owner;
