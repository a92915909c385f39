-- An endpoint's rateLimit and maxInFlight held in the ledger (ledger.Limits,
-- ADR 0047), as on PostgreSQL (see its migration 00018). The embedded
-- ledger serves one process, so its engine keeps these limits in memory;
-- the tables keep the two drivers one contract.

-- +goose Up
CREATE TABLE endpoint_rates (
    endpoint_id TEXT    PRIMARY KEY,
    tat         INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE TABLE endpoint_slot_leases (
    endpoint_id TEXT    NOT NULL,
    holder      TEXT    NOT NULL,
    held        INTEGER NOT NULL,
    want        INTEGER NOT NULL,
    until       INTEGER NOT NULL,
    PRIMARY KEY (endpoint_id, holder)
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE endpoint_slot_leases;
DROP TABLE endpoint_rates;
