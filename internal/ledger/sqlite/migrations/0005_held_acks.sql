-- Acknowledgements that overtook their attempt's record (ledger.HeldAcks):
-- kept until the attempt is recorded, then applied or dropped. The table
-- is empty but for the moments a receiver answers faster than the record.

-- +goose Up
CREATE TABLE held_acks (
    delivery_id TEXT    PRIMARY KEY REFERENCES deliveries (id) ON DELETE CASCADE,
    outcome     TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    received_at INTEGER NOT NULL
);

-- +goose Down
DROP TABLE held_acks;
