-- The ledger's first schema. Times are INTEGER unix nanoseconds UTC;
-- booleans INTEGER 0/1; lists and nested configuration JSON text. Rows are
-- never deleted by this version: endpoints are soft-deleted, deliveries
-- and attempts are history. Later migrations add payload and evidence
-- pruning, retry budgets and recovery operations beside these tables.

-- +goose Up
CREATE TABLE endpoints (
    id              TEXT    PRIMARY KEY,          -- "<namespace>/<name>"
    namespace       TEXT    NOT NULL,
    name            TEXT    NOT NULL,
    url             TEXT    NOT NULL,
    event_types     TEXT    NOT NULL,             -- JSON array of patterns
    signing_secrets BLOB    NOT NULL,             -- JSON [{"value": base64, "notAfter": ns}]
    policy          TEXT    NOT NULL,             -- JSON ledger.Policy
    ack_mode        TEXT    NOT NULL,
    ack_timeout_ns  INTEGER NOT NULL,
    paused          INTEGER NOT NULL,
    dead_letter     TEXT    NOT NULL,             -- endpoint id or ''
    rate_per_second INTEGER NOT NULL,
    rate_burst      INTEGER NOT NULL,
    max_in_flight   INTEGER NOT NULL,
    headers         TEXT    NOT NULL,             -- JSON [{"name","value"}]
    version         INTEGER NOT NULL,
    deleted         INTEGER NOT NULL DEFAULT 0,   -- soft delete: history keeps its endpoint
    updated_at      INTEGER NOT NULL
) STRICT;

-- Fan-out loads a namespace's live endpoints once per batch.
CREATE INDEX endpoints_namespace ON endpoints (namespace) WHERE deleted = 0;
-- Claims skip paused endpoints. (Deleted endpoints have no live deliveries:
-- deletion cancels them and nothing new is routed to them.)
CREATE INDEX endpoints_paused ON endpoints (id) WHERE paused <> 0;

CREATE TABLE events (
    id                  TEXT    PRIMARY KEY,
    namespace           TEXT    NOT NULL,
    type                TEXT    NOT NULL,
    data                BLOB,                     -- NULL once the payload is pruned
    secrets             BLOB,                     -- NULL when none or scrubbed
    secret_names        TEXT    NOT NULL DEFAULT '[]',
    secrets_scrubbed_at INTEGER,
    reissue_of          TEXT    NOT NULL DEFAULT '',  -- no FK: the original may be pruned first
    idempotency_key     TEXT    NOT NULL DEFAULT '',
    body_hash           BLOB,
    created_at          INTEGER NOT NULL
) STRICT;

-- Deduplication evidence; an empty key never dedupes.
CREATE UNIQUE INDEX events_idempotency ON events (namespace, idempotency_key) WHERE idempotency_key <> '';
CREATE INDEX events_reissue_of ON events (reissue_of) WHERE reissue_of <> '';

CREATE TABLE deliveries (
    id               TEXT    PRIMARY KEY,
    event_id         TEXT    NOT NULL REFERENCES events (id),
    endpoint_id      TEXT    NOT NULL REFERENCES endpoints (id),
    state            TEXT    NOT NULL CHECK (state IN ('scheduled', 'in_flight', 'awaiting_ack', 'delivered', 'exhausted', 'cancelled')),
    due_at           INTEGER NOT NULL,
    lease_owner      TEXT    NOT NULL DEFAULT '',
    lease_until      INTEGER,
    attempts         INTEGER NOT NULL DEFAULT 0,
    first_attempt_at INTEGER,
    ack_deadline     INTEGER,
    last_status      INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT    NOT NULL DEFAULT '',
    exhaust_reason   TEXT    NOT NULL DEFAULT '',
    resolution       TEXT    NOT NULL DEFAULT '',  -- '', unresolved, retried, reissued, dismissed
    resolved_at      INTEGER,                      -- when a recovery resolved it
    resolved_by      TEXT    NOT NULL DEFAULT '',  -- the recovery operation key
    retry_of         TEXT    NOT NULL DEFAULT '',  -- the exhausted delivery a recovery retried
    terminal_at      INTEGER,
    created_at       INTEGER NOT NULL
) STRICT;

-- Claim walks due scheduled deliveries in due order, and expired leases;
-- partial indexes stay as small as the live work, whatever the history.
CREATE INDEX deliveries_due ON deliveries (due_at, id) WHERE state = 'scheduled';
CREATE INDEX deliveries_lease ON deliveries (lease_until) WHERE state = 'in_flight';
CREATE INDEX deliveries_ack ON deliveries (ack_deadline) WHERE state = 'awaiting_ack';
-- The live deliveries of one endpoint: what its deletion cancels, and its
-- due deliveries when claims must skip a blocked endpoint's backlog.
CREATE INDEX deliveries_live ON deliveries (endpoint_id, state, due_at, id) WHERE state IN ('scheduled', 'in_flight', 'awaiting_ack');
-- Listing by endpoint or event, and the unresolved work of an endpoint.
CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, id);
CREATE INDEX deliveries_event ON deliveries (event_id, id);
CREATE INDEX deliveries_unresolved ON deliveries (endpoint_id, terminal_at) WHERE resolution = 'unresolved';
CREATE INDEX deliveries_retry_of ON deliveries (retry_of) WHERE retry_of <> '';

CREATE TABLE attempts (
    delivery_id      TEXT    NOT NULL REFERENCES deliveries (id),
    number           INTEGER NOT NULL,
    owner            TEXT    NOT NULL,
    started_at       INTEGER NOT NULL,
    duration_ns      INTEGER NOT NULL,
    status_code      INTEGER NOT NULL,
    error            TEXT    NOT NULL DEFAULT '',
    response_excerpt BLOB,                         -- NULL once pruned
    recorded_at      INTEGER NOT NULL,
    PRIMARY KEY (delivery_id, number)
) STRICT;

-- Counters maintained in the transactions that change what they count.
CREATE TABLE endpoint_stats (
    endpoint_id          TEXT    PRIMARY KEY REFERENCES endpoints (id),
    pending              INTEGER NOT NULL DEFAULT 0,
    in_flight            INTEGER NOT NULL DEFAULT 0,
    awaiting_ack         INTEGER NOT NULL DEFAULT 0,
    delivered            INTEGER NOT NULL DEFAULT 0,
    exhausted_unresolved INTEGER NOT NULL DEFAULT 0,
    cancelled            INTEGER NOT NULL DEFAULT 0,
    last_success_at      INTEGER,
    last_failure_at      INTEGER,
    last_failure_reason  TEXT    NOT NULL DEFAULT ''
) STRICT;

-- +goose Down
DROP TABLE endpoint_stats;
DROP TABLE attempts;
DROP TABLE deliveries;
DROP TABLE events;
DROP TABLE endpoints;
