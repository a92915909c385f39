-- The live states (scheduled, in_flight, awaiting_ack) and the state CHECK
-- written as equalities joined by OR instead of IN lists. SQLite evaluates
-- an IN list of more than two constants against an ephemeral table, and in
-- a CHECK constraint or a partial index's predicate it builds that table
-- again for every row a statement writes: three times for each recorded
-- attempt (the CHECK, deliveries_live for the old row and for the new one)
-- and twice for each delivery inserted. The OR form accepts and indexes
-- exactly the same rows and is evaluated with plain comparisons.
--
-- The CHECK is changed in place (PRAGMA writable_schema), as SQLite
-- documents for changes that do not alter what is stored ("Making Other
-- Kinds Of Table Schema Changes", https://sqlite.org/lang_altertable.html):
-- every stored row satisfies both forms, so no row is rewritten. The index
-- is dropped and created again, which also moves the schema cookie, so that
-- every connection reloads the schema. TestSchemaHasNoLongInLists checks both.

-- +goose Up
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (state IN (''scheduled'', ''in_flight'', ''awaiting_ack'', ''delivered'', ''exhausted'', ''cancelled''))',
    'CHECK (state = ''scheduled'' OR state = ''in_flight'' OR state = ''awaiting_ack'' OR state = ''delivered'' OR state = ''exhausted'' OR state = ''cancelled'')')
    WHERE type = 'table' AND name = 'deliveries';
PRAGMA writable_schema = OFF;
DROP INDEX deliveries_live;
CREATE INDEX deliveries_live ON deliveries (endpoint_id, state, due_at, id)
    WHERE state = 'scheduled' OR state = 'in_flight' OR state = 'awaiting_ack';

-- +goose Down
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (state = ''scheduled'' OR state = ''in_flight'' OR state = ''awaiting_ack'' OR state = ''delivered'' OR state = ''exhausted'' OR state = ''cancelled'')',
    'CHECK (state IN (''scheduled'', ''in_flight'', ''awaiting_ack'', ''delivered'', ''exhausted'', ''cancelled''))')
    WHERE type = 'table' AND name = 'deliveries';
PRAGMA writable_schema = OFF;
DROP INDEX deliveries_live;
CREATE INDEX deliveries_live ON deliveries (endpoint_id, state, due_at, id) WHERE state IN ('scheduled', 'in_flight', 'awaiting_ack');
