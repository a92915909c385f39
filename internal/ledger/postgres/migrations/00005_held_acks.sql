-- Acknowledgements that overtook their attempt's record (ledger.HeldAcks):
-- kept until the attempt is recorded, then applied or dropped. The table
-- is empty but for the moments a receiver answers faster than the record.

-- +goose Up
CREATE TABLE held_acks (
    delivery_id text   PRIMARY KEY REFERENCES deliveries (id) ON DELETE CASCADE,
    outcome     text   NOT NULL,
    reason      text   NOT NULL,
    received_at bigint NOT NULL
);

-- +goose Down
DROP TABLE held_acks;
