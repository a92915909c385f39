package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Kubernetes snapshots (ledger.Snapshots, migration 00020): an upsert that
// writes nothing when the document is the one held; concurrent writers of
// one object serialize on its row, and the last one wins.

const (
	snapshotPutSQL = `INSERT INTO kube_snapshots (kind, namespace, name, doc, updated_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (kind, namespace, name) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at
		WHERE kube_snapshots.doc IS DISTINCT FROM excluded.doc`
	snapshotDeleteSQL = `DELETE FROM kube_snapshots WHERE kind = $1 AND namespace = $2 AND name = $3`
	snapshotListSQL   = `SELECT namespace, name, doc, updated_at FROM kube_snapshots WHERE kind = $1
		ORDER BY namespace COLLATE "C", name COLLATE "C"`
)

// SnapshotPut implements ledger.Snapshots.
func (s *Store) SnapshotPut(ctx context.Context, snap *ledger.Snapshot) (bool, error) {
	if err := snap.Validate(); err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, snapshotPutSQL, snap.Kind, snap.Namespace, snap.Name, snap.Doc, nanos(snap.UpdatedAt))
	if err != nil {
		return false, translate(fmt.Sprintf("put the snapshot of %s %s/%s", snap.Kind, snap.Namespace, snap.Name), err)
	}
	return tag.RowsAffected() > 0, nil
}

// SnapshotDelete implements ledger.Snapshots.
func (s *Store) SnapshotDelete(ctx context.Context, kind, namespace, name string) error {
	if _, err := s.pool.Exec(ctx, snapshotDeleteSQL, kind, namespace, name); err != nil {
		return translate(fmt.Sprintf("delete the snapshot of %s %s/%s", kind, namespace, name), err)
	}
	return nil
}

// SnapshotList implements ledger.Snapshots.
func (s *Store) SnapshotList(ctx context.Context, kind string) ([]ledger.Snapshot, error) {
	rows, err := s.pool.Query(ctx, snapshotListSQL, kind)
	if err != nil {
		return nil, translate("list the snapshots of "+kind, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.Snapshot, error) {
		snap := ledger.Snapshot{Kind: kind}
		var updated int64
		err := row.Scan(&snap.Namespace, &snap.Name, &snap.Doc, &updated)
		if snap.Doc == nil {
			snap.Doc = []byte{}
		}
		snap.UpdatedAt = fromNanos(updated)
		return snap, err
	})
	if err != nil {
		return nil, translate("list the snapshots of "+kind, err)
	}
	return out, nil
}
