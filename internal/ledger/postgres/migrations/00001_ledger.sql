-- The ledger schema. Conventions, relied on by the Go code:
--   * every instant is a bigint of Unix nanoseconds (UTC); NULL means unset;
--   * nil slices are stored as NULL and empty ones as empty arrays, so that
--     what was written reads back identical;
--   * no column is ever reused for another meaning: later features add
--     columns and tables in new migrations.
--
-- Room left for the features that come next:
--   * secret scrubbing deletes the event's row in event_secrets (a narrow
--     table, cheap to VACUUM so the bytes leave the heap) and sets
--     events.secrets_scrub_at / keeps events.secret_names;
--   * payload and evidence pruning set events.data and
--     attempts.response_excerpt to NULL, then delete whole events (the
--     foreign keys cascade to deliveries and attempts);
--   * retry budgets get a per-endpoint row updated in the same transaction
--     and in the same endpoint-ID order as endpoint_stats;
--   * recovery operations get their own table keyed by the operation key,
--     and deliveries a nullable retry_of column: nothing here assumes one
--     delivery per (event, endpoint).

-- +goose Up
CREATE TABLE endpoints (
	id               text PRIMARY KEY,
	namespace        text NOT NULL,
	name             text NOT NULL,
	url              text NOT NULL,
	event_types      text[],
	secret_values    bytea[],
	secret_not_after bigint[],
	policy           jsonb NOT NULL,
	ack_mode         text NOT NULL,
	ack_timeout      bigint NOT NULL,
	paused           boolean NOT NULL,
	dead_letter      text NOT NULL,
	rate_per_second  integer NOT NULL,
	rate_burst       integer NOT NULL,
	max_in_flight    integer NOT NULL,
	headers          jsonb NOT NULL,
	version          bigint NOT NULL,
	updated_at       bigint NOT NULL,
	-- A deleted endpoint stays as a tombstone (without its secrets), so
	-- that its version keeps counting when it is created again.
	deleted_at       bigint
);
CREATE INDEX endpoints_namespace ON endpoints (namespace, id) WHERE deleted_at IS NULL;

-- One row per endpoint ever registered; it outlives a deleted endpoint as
-- its deliveries do, so that the counters always equal a recount of the
-- deliveries table and stay readable after the delete.
CREATE TABLE endpoint_stats (
	endpoint_id          text PRIMARY KEY,
	pending              bigint NOT NULL DEFAULT 0,
	in_flight            bigint NOT NULL DEFAULT 0,
	awaiting_ack         bigint NOT NULL DEFAULT 0,
	delivered            bigint NOT NULL DEFAULT 0,
	exhausted_unresolved bigint NOT NULL DEFAULT 0,
	cancelled            bigint NOT NULL DEFAULT 0,
	last_success_at      bigint,
	last_failure_at      bigint,
	last_failure_reason  text NOT NULL DEFAULT ''
);

CREATE TABLE events (
	id               text PRIMARY KEY,
	namespace        text NOT NULL,
	type             text NOT NULL,
	data             bytea,
	secret_names     jsonb NOT NULL,
	secrets_scrub_at bigint,
	reissue_of       text NOT NULL,
	idempotency_key  text NOT NULL,
	body_hash        bytea,
	created_at       bigint NOT NULL
);
CREATE UNIQUE INDEX events_idempotency ON events (namespace, idempotency_key)
	WHERE idempotency_key <> '';

CREATE TABLE event_secrets (
	event_id text PRIMARY KEY REFERENCES events (id) ON DELETE CASCADE,
	value    bytea NOT NULL
);

CREATE TABLE deliveries (
	id               text PRIMARY KEY,
	-- seq orders deliveries due at the same instant by insertion (IDs only
	-- order by millisecond), so that claims are first in, first out.
	seq              bigint GENERATED ALWAYS AS IDENTITY,
	event_id         text NOT NULL REFERENCES events (id) ON DELETE CASCADE,
	endpoint_id      text NOT NULL,
	state            text NOT NULL CHECK (state IN
		('scheduled', 'in_flight', 'awaiting_ack', 'delivered', 'exhausted', 'cancelled')),
	attempts         integer NOT NULL,
	due_at           bigint NOT NULL,
	first_attempt_at bigint,
	lease_owner      text NOT NULL,
	lease_until      bigint,
	ack_deadline     bigint,
	last_status      integer NOT NULL,
	last_error       text NOT NULL,
	exhaust_reason   text NOT NULL,
	resolution       text NOT NULL,
	terminal_at      bigint,
	created_at       bigint NOT NULL
);
-- Claims walk this index in due order; in-flight rows stay in it so that an
-- expired lease is found by the same scan.
CREATE INDEX deliveries_claimable ON deliveries (due_at, seq)
	WHERE state IN ('scheduled', 'in_flight');
CREATE INDEX deliveries_event ON deliveries (event_id, id);
CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, id);
CREATE INDEX deliveries_unresolved ON deliveries (endpoint_id, terminal_at)
	WHERE resolution = 'unresolved';

CREATE TABLE attempts (
	delivery_id      text NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
	number           integer NOT NULL,
	started_at       bigint NOT NULL,
	duration         bigint NOT NULL,
	status_code      integer NOT NULL,
	error            text NOT NULL,
	response_excerpt bytea,
	PRIMARY KEY (delivery_id, number)
);

-- +goose Down
DROP TABLE attempts;
DROP TABLE deliveries;
DROP TABLE event_secrets;
DROP TABLE events;
DROP TABLE endpoint_stats;
DROP TABLE endpoints;
