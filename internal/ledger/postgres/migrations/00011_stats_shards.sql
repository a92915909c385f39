-- An endpoint's counters are spread over up to 16 rows (shards, see
-- statsShards in stats.go): every write transaction of an endpoint changes
-- its counters, and with one row its inserts, claims and records waited
-- for each other's commits on that row's lock. A transaction adds its whole
-- change to one shard; a reader sums the shards. The row an endpoint had
-- becomes its shard 0, which EndpointUpsert creates; the others are
-- created by the first transaction that writes to them.
--
-- Row locks on the table are taken in (endpoint_id, shard) order, after
-- deliveries, events, recovery items and retry budgets and before outcome
-- buckets (doc.go).
--
-- last_failure_order orders failures of one instant written to different
-- shards (the reason of the one written last is the endpoint's).
--
-- During a rolling update a store from before this migration may still be
-- writing: its UPDATE matches every shard of an endpoint and would add its
-- change to each. writes counts the updates of this version, which always
-- bump it; the trigger skips an update of a shard other than 0 that leaves
-- it alone, so the old store's change lands once, in shard 0. (Its reads
-- see shard 0 only until it is replaced.) A later migration may drop the
-- trigger once no such store can be running.

-- +goose Up
ALTER TABLE endpoint_stats
	ADD COLUMN shard smallint NOT NULL DEFAULT 0 CHECK (shard >= 0),
	ADD COLUMN last_failure_order bigint NOT NULL DEFAULT 0,
	ADD COLUMN writes bigint NOT NULL DEFAULT 0;
ALTER TABLE endpoint_stats DROP CONSTRAINT endpoint_stats_pkey, ADD PRIMARY KEY (endpoint_id, shard);
CREATE SEQUENCE endpoint_stats_failure_order;

-- +goose StatementBegin
CREATE FUNCTION endpoint_stats_skip() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER endpoint_stats_unsharded_update BEFORE UPDATE ON endpoint_stats
	FOR EACH ROW WHEN (OLD.shard <> 0 AND NEW.writes = OLD.writes)
	EXECUTE FUNCTION endpoint_stats_skip();

-- +goose Down
-- Every endpoint's shards fold into its shard 0 as EndpointStats reads
-- them (stats.go, endpointStatsSQL).
DROP TRIGGER endpoint_stats_unsharded_update ON endpoint_stats;
DROP FUNCTION endpoint_stats_skip();
INSERT INTO endpoint_stats (endpoint_id, shard)
	SELECT DISTINCT endpoint_id, 0 FROM endpoint_stats
	ON CONFLICT DO NOTHING;
UPDATE endpoint_stats s SET
	pending = f.pending, in_flight = f.in_flight, awaiting_ack = f.awaiting_ack, delivered = f.delivered,
	exhausted_unresolved = f.exhausted_unresolved, cancelled = f.cancelled,
	last_success_at = f.last_success_at, last_failure_at = f.last_failure_at,
	last_failure_reason = f.last_failure_reason
FROM (
	SELECT endpoint_id, sum(pending) AS pending, sum(in_flight) AS in_flight, sum(awaiting_ack) AS awaiting_ack,
		sum(delivered) AS delivered, sum(exhausted_unresolved) AS exhausted_unresolved, sum(cancelled) AS cancelled,
		max(last_success_at) AS last_success_at, max(last_failure_at) AS last_failure_at,
		(array_agg(last_failure_reason ORDER BY last_failure_at DESC NULLS LAST, last_failure_order DESC, shard))[1]
			AS last_failure_reason
	FROM endpoint_stats GROUP BY endpoint_id
) f
WHERE s.endpoint_id = f.endpoint_id AND s.shard = 0;
DELETE FROM endpoint_stats WHERE shard <> 0;
ALTER TABLE endpoint_stats DROP CONSTRAINT endpoint_stats_pkey,
	DROP COLUMN shard, DROP COLUMN last_failure_order, DROP COLUMN writes,
	ADD PRIMARY KEY (endpoint_id);
DROP SEQUENCE endpoint_stats_failure_order;
