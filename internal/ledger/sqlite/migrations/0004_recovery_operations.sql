-- Recovery operations by name (docs/adr/0006): the first start of a
-- DeliveryRecovery records its cutoff and what it was asked to do, so that
-- the object deleted and applied again finds the same operation.

-- +goose Up
CREATE TABLE recovery_operations (
    operation_key TEXT    NOT NULL PRIMARY KEY, -- ledger.RecoveryOperationKey
    spec_hash     TEXT    NOT NULL,             -- what it was asked to do
    object_uid    TEXT    NOT NULL,             -- the object that first started it
    started_at    INTEGER NOT NULL              -- its cutoff
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE recovery_operations;
