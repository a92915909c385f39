-- An event carries its type's contract (a WebhookEventType), stamped at
-- publish so that every process decides from the ledger and nothing later
-- needs the Kubernetes object (docs/adr/0038): the generation of the type
-- that validated it (0: none did), its replay class ('' is Retryable), the
-- instant after which it is never sent (valid_until, NULL: no bound) and
-- the type's retry policy replacing the endpoints' (policy_override, JSON
-- ledger.Policy; NULL: the endpoints'). Rows from before carry none.
--
-- A delivery repeats its event's valid_until, so that the sweep that
-- cancels expired deliveries (ledger.Store.DeliveryClaimExpired) walks a
-- partial index of the deliveries still to send that have a bound, due
-- first, instead of the events: a delivery leaves the index when it is
-- sent, cancelled or ends otherwise. The predicate's state terms are
-- equalities, as deliveries_live's (0011).
--
-- The schema is reloaded first, as in 0014 (0011 rewrote the schema text).

-- +goose Up
PRAGMA writable_schema = RESET;
ALTER TABLE events ADD COLUMN type_generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN replay_class TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN valid_until INTEGER;
ALTER TABLE events ADD COLUMN policy_override TEXT;
ALTER TABLE deliveries ADD COLUMN valid_until INTEGER;
CREATE INDEX deliveries_expiring ON deliveries (valid_until)
    WHERE valid_until IS NOT NULL AND (state = 'scheduled' OR state = 'in_flight');

-- +goose Down
PRAGMA writable_schema = RESET;
DROP INDEX deliveries_expiring;
ALTER TABLE deliveries DROP COLUMN valid_until;
ALTER TABLE events DROP COLUMN policy_override;
ALTER TABLE events DROP COLUMN valid_until;
ALTER TABLE events DROP COLUMN replay_class;
ALTER TABLE events DROP COLUMN type_generation;
