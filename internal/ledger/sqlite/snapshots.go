package sqlite

import (
	"context"
	"fmt"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Kubernetes snapshots (ledger.Snapshots, migration 0020): an upsert that
// writes nothing when the document is the one held.

var snapshotSQL = struct {
	put, del, list string
}{
	put: `INSERT INTO kube_snapshots (kind, namespace, name, doc, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
		ON CONFLICT (kind, namespace, name) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at
		WHERE kube_snapshots.doc <> excluded.doc`,
	del:  `DELETE FROM kube_snapshots WHERE kind = ?1 AND namespace = ?2 AND name = ?3`,
	list: `SELECT namespace, name, doc, updated_at FROM kube_snapshots WHERE kind = ?1 ORDER BY namespace, name`,
}

// SnapshotPut implements ledger.Snapshots.
func (s *Store) SnapshotPut(ctx context.Context, snap *ledger.Snapshot) (bool, error) {
	if err := snap.Validate(); err != nil {
		return false, err
	}
	op := fmt.Sprintf("put the snapshot of %s %s/%s", snap.Kind, snap.Namespace, snap.Name)
	var changed bool
	err := s.write(ctx, op, func(t *wtx) error {
		res, err := t.tx.ExecContext(t.ctx, snapshotSQL.put, snap.Kind, snap.Namespace, snap.Name, snap.Doc, nanos(snap.UpdatedAt))
		if err != nil {
			return translate(op, err)
		}
		n, err := res.RowsAffected()
		changed = n > 0
		return translate(op, err)
	})
	return changed, err
}

// SnapshotDelete implements ledger.Snapshots.
func (s *Store) SnapshotDelete(ctx context.Context, kind, namespace, name string) error {
	op := fmt.Sprintf("delete the snapshot of %s %s/%s", kind, namespace, name)
	return s.write(ctx, op, func(t *wtx) error {
		_, err := t.tx.ExecContext(t.ctx, snapshotSQL.del, kind, namespace, name)
		return translate(op, err)
	})
}

// SnapshotList implements ledger.Snapshots.
func (s *Store) SnapshotList(ctx context.Context, kind string) ([]ledger.Snapshot, error) {
	op := "list the snapshots of " + kind
	rows, err := s.r.QueryContext(ctx, snapshotSQL.list, kind)
	if err != nil {
		return nil, translate(op, err)
	}
	defer func() { _ = rows.Close() }()
	var out []ledger.Snapshot
	for rows.Next() {
		snap := ledger.Snapshot{Kind: kind}
		var updated int64
		if err := rows.Scan(&snap.Namespace, &snap.Name, &snap.Doc, &updated); err != nil {
			return nil, translate(op, err)
		}
		if snap.Doc == nil {
			snap.Doc = []byte{}
		}
		snap.UpdatedAt = fromNanos(updated)
		out = append(out, snap)
	}
	return out, translate(op, rows.Err())
}
