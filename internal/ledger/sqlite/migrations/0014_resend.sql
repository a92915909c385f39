-- A delivery that re-sends an event already sent or attempted (a recovery's
-- retry, a reissued event's deliveries, a replay) says so: its first
-- attempt spends the endpoint's retry budget like a retry and is not
-- counted as a first attempt, so that re-sending never raises the
-- allowance it draws from (ledger.Delivery.Resend, docs/adr/0035). Rows
-- from before are ordinary deliveries (0).
--
-- The schema is reloaded first: migration 0011 rewrote the table's text in
-- place, and a connection that ran it still holds the offsets of the old
-- text, at which ADD COLUMN would splice the new column (a syntax error).
-- RESET makes it parse the text as it is now.

-- +goose Up
PRAGMA writable_schema = RESET;
ALTER TABLE deliveries ADD COLUMN resend INTEGER NOT NULL DEFAULT 0;

-- +goose Down
PRAGMA writable_schema = RESET;
ALTER TABLE deliveries DROP COLUMN resend;
