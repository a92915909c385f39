-- Kubernetes snapshots (issue #44, ledger.Snapshots): the last known state
-- of the Kubernetes objects the data plane needs through an API-server
-- outage (the WebhookEventTypes, their RetryPolicies, strict namespaces),
-- one opaque document per object. namespace is '' for cluster-scoped
-- objects; updated_at is Unix nanoseconds of the last change.

-- +goose Up
CREATE TABLE kube_snapshots (
    kind       TEXT    NOT NULL,
    namespace  TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    doc        BLOB    NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (kind, namespace, name)
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE kube_snapshots;
