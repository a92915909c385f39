-- The delivery API (ledger.Browser) pages through events per namespace and
-- shows what a recovery made of each delivery on every row it lists.

-- +goose Up
CREATE INDEX events_namespace ON events (namespace, id);
CREATE INDEX recovery_items_delivery ON recovery_items (delivery_id) WHERE outcome IN ('Retried', 'Reissued');

-- +goose Down
DROP INDEX recovery_items_delivery;
DROP INDEX events_namespace;
