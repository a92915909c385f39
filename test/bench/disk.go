package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// Bytes per event on disk (issue #15, goal 5): what a delivered 1 KiB
// event leaves in the ledger, with its payload and after payload
// pruning (evidence kept). The events go through the same ledger calls
// as the engine's (ingest, claim, record), so the rows are the engine's.

const diskEvents = 50_000

type diskStore struct {
	name string
	// Bytes per event: as written (SQLite: file and WAL after a
	// checkpoint; PostgreSQL: pg_total_relation_size of the tables), and
	// after the payloads were pruned, both as the files hold it (SQLite:
	// pages in use; PostgreSQL: after VACUUM, whose freed space later rows
	// reuse) and compacted (SQLite: VACUUM INTO a copy; PostgreSQL: VACUUM
	// FULL).
	written, prunedInUse, prunedCompacted float64
}

type diskResults struct{ sqlite, postgres diskStore }

// diskLedger sizes one ledger: the space its data holds, and what it
// would hold compacted.
type diskLedger struct {
	bl        benchLedger
	inUse     func(ctx context.Context) (int64, error)
	compacted func(ctx context.Context) (int64, error)
}

func runDisk(cfg config, work string, d *diskResults) error {
	step(fmt.Sprintf("bytes per event on disk, %d delivered 1 KiB events", diskEvents))
	path := filepath.Join(work, "disk.db")
	sq := sqliteHistoryLedger(path)
	defer sq.cleanup()
	sqliteDB := func(ctx context.Context, f func(db *sql.DB) error) error {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(60000)")
		if err != nil {
			return err
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			return err
		}
		return f(db)
	}
	var err error
	d.sqlite, err = diskOn(diskLedger{bl: sq,
		inUse: func(ctx context.Context) (n int64, err error) {
			err = sqliteDB(ctx, func(db *sql.DB) error {
				return db.QueryRowContext(ctx, `SELECT ((SELECT page_count FROM pragma_page_count()) - (SELECT freelist_count FROM pragma_freelist_count())) * (SELECT page_size FROM pragma_page_size())`).Scan(&n)
			})
			return n, err
		},
		compacted: func(ctx context.Context) (n int64, err error) {
			cp := filepath.Join(work, "disk-vacuumed.db")
			defer os.Remove(cp)
			err = sqliteDB(ctx, func(db *sql.DB) error {
				if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, cp); err != nil {
					return err
				}
				fi, err := os.Stat(cp)
				if err == nil {
					n = fi.Size()
				}
				return err
			})
			return n, err
		},
	})
	if err != nil {
		return err
	}
	sq.cleanup()
	schema := fmt.Sprintf("hk_bench_disk_%d", time.Now().UnixNano())
	pg := postgresHistoryLedger(cfg.postgres, schema)
	defer pg.cleanup()
	vacuum := func(ctx context.Context, how string) (int64, error) {
		conn, err := pgx.Connect(ctx, cfg.postgres)
		if err != nil {
			return 0, err
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) FROM pg_tables WHERE schemaname = $1`, schema)
		if err != nil {
			return 0, err
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return 0, err
		}
		for _, t := range tables {
			if _, err := conn.Exec(ctx, how+` `+t); err != nil {
				return 0, err
			}
		}
		return pg.size(ctx)
	}
	d.postgres, err = diskOn(diskLedger{bl: pg,
		inUse:     func(ctx context.Context) (int64, error) { return vacuum(ctx, "VACUUM") },
		compacted: func(ctx context.Context) (int64, error) { return vacuum(ctx, "VACUUM FULL") },
	})
	return err
}

func diskOn(dl diskLedger) (diskStore, error) {
	ctx := context.Background()
	ds := diskStore{name: dl.bl.name}
	store, err := dl.bl.open(ctx)
	if err != nil {
		return ds, err
	}
	defer func() { store.Close() }()
	// Payloads are kept a microsecond after delivery, evidence for a year.
	secret, err := signing.GenerateSecret()
	if err != nil {
		return ds, err
	}
	if _, err := store.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{Now: time.Now(), Endpoint: ledger.Endpoint{
		ID: "bench/receiver", Namespace: "bench", Name: "receiver", URL: "http://127.0.0.1:9/hook", EventTypes: []string{"*"},
		Secrets: []ledger.SigningSecret{{Value: secret}}, AckMode: ledger.AckResponse, MaxInFlight: 512,
		Policy: ledger.Policy{
			Backoff:      backoff.Policy{Strategy: backoff.Fixed, InitialDelay: time.Second, MaxAttempts: 10, AttemptTimeout: 5 * time.Second},
			RetryOn:      []string{"5xx"},
			ReplayWindow: time.Hour, PayloadRetention: time.Microsecond, EvidenceRetention: 365 * 24 * time.Hour,
		},
	}}); err != nil {
		return ds, err
	}
	before, err := dl.bl.size(ctx)
	if err != nil {
		return ds, err
	}
	beforeCompacted, err := dl.compacted(ctx)
	if err != nil {
		return ds, err
	}
	for b := 0; b < diskEvents; b += opsEvents {
		if _, err := measureOps(ctx, store, fmt.Sprintf("disk%d", b)); err != nil {
			return ds, err
		}
	}
	after, err := dl.bl.size(ctx)
	if err != nil {
		return ds, err
	}
	pruned := 0
	for {
		res, err := store.Prune(ctx, &ledger.PruneParams{Now: time.Now(), Limit: 5000})
		if err != nil {
			return ds, err
		}
		if res.EventsDeleted > 0 {
			return ds, fmt.Errorf("prune deleted %d events: evidence retention not honoured", res.EventsDeleted)
		}
		if res.PayloadsPruned == 0 {
			break
		}
		pruned += res.PayloadsPruned
	}
	if pruned < diskEvents {
		return ds, fmt.Errorf("pruned the payloads of %d of %d events", pruned, diskEvents)
	}
	prunedInUse, err := dl.inUse(ctx)
	if err != nil {
		return ds, err
	}
	prunedCompacted, err := dl.compacted(ctx)
	if err != nil {
		return ds, err
	}
	ds.written = float64(after-before) / diskEvents
	ds.prunedInUse = float64(prunedInUse-before) / diskEvents
	ds.prunedCompacted = float64(prunedCompacted-beforeCompacted) / diskEvents
	fmt.Printf("  %s: %.0f bytes per event as written; payloads pruned: %.0f in use, %.0f compacted\n", ds.name, ds.written, ds.prunedInUse, ds.prunedCompacted)
	return ds, nil
}
