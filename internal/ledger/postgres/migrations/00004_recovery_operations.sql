-- Recovery operations by name (docs/adr/0006): the first start of a
-- DeliveryRecovery records its cutoff and what it was asked to do, so that
-- the object deleted and applied again finds the same operation.

-- +goose Up
CREATE TABLE recovery_operations (
	operation_key text   PRIMARY KEY, -- ledger.RecoveryOperationKey
	spec_hash     text   NOT NULL,    -- what it was asked to do
	object_uid    text   NOT NULL,    -- the object that first started it
	started_at    bigint NOT NULL     -- its cutoff
);

-- +goose Down
DROP TABLE recovery_operations;
