-- An endpoint's credentials (values the controller read from Secrets, with
-- CA bundles: credential.Set.Store) and its filter (a CEL expression over
-- the event, evaluated at fan-out), stored with the rest of its
-- configuration so that every replica sends and matches alike
-- (docs/adr/0036). Constant defaults: a catalogue change, no rewrite.

-- +goose Up
ALTER TABLE endpoints ADD COLUMN credentials bytea;
ALTER TABLE endpoints ADD COLUMN filter text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE endpoints DROP COLUMN filter;
ALTER TABLE endpoints DROP COLUMN credentials;
