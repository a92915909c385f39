package ledger

import (
	"context"
	"errors"
	"time"
)

// Kubernetes snapshots (issue #44): the last known state of the few
// Kubernetes objects the data plane needs and cannot read while the API
// server does not answer, such as the WebhookEventTypes that hold
// publishes to their contracts and which namespaces are strict. A process
// started during an API-server outage loads them from here; the manager's
// caches keep them current when it answers.
//
// The table is generic: a document per (Kind, Namespace, Name), opaque to
// the ledger. Every replica may write; writes are idempotent and the last
// writer wins. Cluster-scoped objects have an empty Namespace.

// Snapshots holds the last known state of Kubernetes objects.
type Snapshots interface {
	// SnapshotPut creates or replaces the document of s's object and
	// reports whether it changed anything: a put of the document already
	// held writes nothing (UpdatedAt stays that of the last change).
	SnapshotPut(ctx context.Context, s *Snapshot) (changed bool, err error)
	// SnapshotDelete removes an object's document; an unknown one is not
	// an error (nothing to do).
	SnapshotDelete(ctx context.Context, kind, namespace, name string) error
	// SnapshotList returns every document of kind, by namespace then name.
	SnapshotList(ctx context.Context, kind string) ([]Snapshot, error)
}

// Snapshot is the document of one object.
type Snapshot struct {
	Kind      string
	Namespace string
	Name      string
	Doc       []byte
	// UpdatedAt is when Doc was last changed (the Now of that put).
	UpdatedAt time.Time
}

// Validate reports why s cannot be stored.
func (s *Snapshot) Validate() error {
	switch {
	case s == nil:
		return errors.New("put snapshot: nil snapshot")
	case s.Kind == "" || s.Name == "":
		return errors.New("put snapshot: Kind and Name are required")
	case s.Doc == nil:
		return errors.New("put snapshot: Doc is required")
	case s.UpdatedAt.IsZero():
		return errors.New("put snapshot: UpdatedAt is required")
	}
	return nil
}
