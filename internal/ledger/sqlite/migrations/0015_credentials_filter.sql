-- An endpoint's credentials (values the controller read from Secrets, with
-- CA bundles: credential.Set.Store) and its filter (a CEL expression over
-- the event, evaluated at fan-out), stored with the rest of its
-- configuration so that every process sends and matches alike
-- (docs/adr/0036). Rows from before have neither.
--
-- The schema is reloaded first, as in 0014 (0011 rewrote the schema text).

-- +goose Up
PRAGMA writable_schema = RESET;
ALTER TABLE endpoints ADD COLUMN credentials BLOB;
ALTER TABLE endpoints ADD COLUMN filter TEXT NOT NULL DEFAULT '';

-- +goose Down
PRAGMA writable_schema = RESET;
ALTER TABLE endpoints DROP COLUMN filter;
ALTER TABLE endpoints DROP COLUMN credentials;
