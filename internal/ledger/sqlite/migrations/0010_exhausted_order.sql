-- ExhaustedList (an endpoint status refresh asks it for the first
-- unresolved exhausted delivery) pages in (terminal_at, id) order. The
-- index it had stopped at terminal_at, so SQLite sorted each run of equal
-- terminal_at (USE TEMP B-TREE FOR LAST TERM OF ORDER BY). With id in the
-- index and the query's WHERE clause as the predicate, word for word, the
-- page is an index walk in order that stops at the limit. Only exhausted
-- deliveries have entries, as before.

-- +goose Up
CREATE INDEX deliveries_exhausted ON deliveries (endpoint_id, terminal_at, id)
    WHERE resolution = 'unresolved' AND state = 'exhausted';
DROP INDEX deliveries_unresolved;

-- +goose Down
CREATE INDEX deliveries_unresolved ON deliveries (endpoint_id, terminal_at) WHERE resolution = 'unresolved';
DROP INDEX deliveries_exhausted;
