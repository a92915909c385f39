-- An event carries its type's contract (a WebhookEventType), stamped at
-- publish so that every replica decides from the ledger and nothing later
-- needs the Kubernetes object (docs/adr/0038): the generation of the type
-- that validated it (0: none did), its replay class ('' is Retryable), the
-- instant after which it is never sent (valid_until, NULL: no bound) and
-- the type's retry policy replacing the endpoints' (policy_override,
-- ledger.Policy as JSON; NULL: the endpoints'). Constant defaults and
-- nullable columns: catalogue changes, no rewrite; rows from before carry
-- none.
--
-- A delivery repeats its event's valid_until, so that the sweep that
-- cancels expired deliveries (ledger.Store.DeliveryClaimExpired) walks a
-- partial index of the deliveries still to send that have a bound, instead
-- of the events: a delivery leaves the index when it is sent, cancelled
-- or ends otherwise. Existing rows have no bound and stay out of it.

-- +goose Up
ALTER TABLE events ADD COLUMN type_generation bigint NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN replay_class text NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN valid_until bigint;
ALTER TABLE events ADD COLUMN policy_override jsonb;
ALTER TABLE deliveries ADD COLUMN valid_until bigint;
CREATE INDEX deliveries_expiring ON deliveries (valid_until)
	WHERE valid_until IS NOT NULL AND state IN ('scheduled', 'in_flight');

-- +goose Down
DROP INDEX deliveries_expiring;
ALTER TABLE deliveries DROP COLUMN valid_until;
ALTER TABLE events DROP COLUMN policy_override;
ALTER TABLE events DROP COLUMN valid_until;
ALTER TABLE events DROP COLUMN replay_class;
ALTER TABLE events DROP COLUMN type_generation;
