-- Field-selected lists of the delivery API (ledger.Browser) on the states
-- and resolutions an admin looks for (exhausted or cancelled deliveries, a
-- resolution) walk these in ID order, so that a page costs a page however
-- rare the matches are among an endpoint's or the ledger's deliveries.
-- Partial: only failed deliveries have entries, so the hot path (scheduled
-- → in_flight → delivered) never writes them. The browse queries repeat
-- each WHERE clause literally, which lets the planner use them with bound
-- parameters.

-- +goose Up
CREATE INDEX deliveries_failed_endpoint ON deliveries (endpoint_id, state, id) WHERE state IN ('exhausted', 'cancelled');
CREATE INDEX deliveries_failed ON deliveries (state, id) WHERE state IN ('exhausted', 'cancelled');
CREATE INDEX deliveries_resolution_endpoint ON deliveries (endpoint_id, resolution, id) WHERE resolution <> '';
CREATE INDEX deliveries_resolution ON deliveries (resolution, id) WHERE resolution <> '';

-- +goose Down
DROP INDEX deliveries_resolution;
DROP INDEX deliveries_resolution_endpoint;
DROP INDEX deliveries_failed;
DROP INDEX deliveries_failed_endpoint;
