-- Kubernetes snapshots (issue #44, ledger.Snapshots): the last known state
-- of the Kubernetes objects the data plane needs through an API-server
-- outage (the WebhookEventTypes, their RetryPolicies, strict namespaces),
-- one opaque document per object. namespace is '' for cluster-scoped
-- objects; updated_at is Unix nanoseconds of the last change.

-- +goose Up
CREATE TABLE kube_snapshots (
    kind       text   NOT NULL,
    namespace  text   NOT NULL,
    name       text   NOT NULL,
    doc        bytea  NOT NULL,
    updated_at bigint NOT NULL,
    PRIMARY KEY (kind, namespace, name)
);

-- +goose Down
DROP TABLE kube_snapshots;
