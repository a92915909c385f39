-- A delivery that re-sends an event already sent or attempted (a recovery's
-- retry, a reissued event's deliveries, a replay) says so: its first
-- attempt spends the endpoint's retry budget like a retry and is not
-- counted as a first attempt, so that re-sending never raises the
-- allowance it draws from (ledger.Delivery.Resend, docs/adr/0035). A
-- constant default makes the column a catalogue change: existing rows are
-- not rewritten, and read as ordinary deliveries.

-- +goose Up
ALTER TABLE deliveries ADD COLUMN resend boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE deliveries DROP COLUMN resend;
