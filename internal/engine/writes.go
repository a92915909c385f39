package engine

import (
	"context"
	"fmt"

	"github.com/hookkeeper/hookkeeper/internal/groupcommit"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Ingest and attempt records share one group commit (ledger.Store's
// WriteMany) wherever ingest commits one batch at a time: always on a
// store that commits one transaction at a time (ledger.SerialWriter:
// SQLite), and by default on one that commits concurrently (PostgreSQL).
// Whatever of either kind queued while the last commit ran goes into the
// next one. A publish is answered only after its commit, so an insert
// commits at once; nobody waits on a record, so it waits (up to
// RecordWait) to ride in the next insert's commit. At low rates an event
// then costs one transaction (one fsync, or one server transaction and
// its WAL flush), not two; at saturation both kinds batch as before. A
// record holds no worker or endpoint slot while it waits (engine.go,
// attempt). Given several ingest committers (WriteBatch.Committers), a
// concurrent store keeps records in a group commit of their own, one
// batch at a time: they are the writes that meet on shared rows (retry
// budgets, outcomes), so that commits running at once would wait for each
// other on them (ADRs 0021 and 0043).

// sharesCommits reports whether ingest and attempt records share one
// group commit on store, with ingest's options opts (above).
func sharesCommits(store ledger.Store, opts groupcommit.Options) bool {
	if sw, ok := store.(ledger.SerialWriter); ok && sw.SerialWrites() {
		return true
	}
	return opts.Committers <= 1
}

// writeItem is one item of the shared group commit: an event to insert or
// an attempt to record.
type writeItem struct {
	event   *ledger.EventInsertParams
	attempt *ledger.AttemptRecordParams
}

// writeOutcome is the result of a writeItem, in the field of its kind.
type writeOutcome struct {
	event   ledger.EventInsertResult
	attempt ledger.AttemptRecordResult
}

// commitWrites commits one batch of the group commit in one transaction.
func (e *Engine) commitWrites(ctx context.Context, items []writeItem) ([]writeOutcome, error) {
	var w ledger.WriteBatch
	for _, it := range items {
		if it.event != nil {
			w.Events = append(w.Events, it.event)
		} else {
			w.Attempts = append(w.Attempts, it.attempt)
		}
	}
	res, err := e.store.WriteMany(ctx, &w)
	if err != nil {
		return nil, err
	}
	if len(res.Events) != len(w.Events) || len(res.Attempts) != len(w.Attempts) {
		return nil, fmt.Errorf("write batch: %d event and %d attempt results for %d and %d items",
			len(res.Events), len(res.Attempts), len(w.Events), len(w.Attempts))
	}
	out := make([]writeOutcome, len(items))
	var ei, ai int
	for i, it := range items {
		if it.event != nil {
			out[i].event = res.Events[ei]
			ei++
		} else {
			out[i].attempt = res.Attempts[ai]
			ai++
		}
	}
	return out, nil
}

// record commits an attempt record. The attempt's worker and endpoint
// slots are already free (attempt), so the record waits, up to RecordWait,
// unless the records pending are at their bound, where a sender is waiting
// for it: for a ride in an insert's commit where the two kinds share one
// (sharesCommits), else for the records that follow it (ADR 0041), so
// that at a steady rate it pays no transaction of its own.
func (e *Engine) record(ctx context.Context, p *ledger.AttemptRecordParams) (writeOutcome, error) {
	if len(e.records) == cap(e.records) {
		return e.recorder.Do(ctx, writeItem{attempt: p})
	}
	return e.recorder.DoLazy(ctx, writeItem{attempt: p}, e.opts.RecordWait)
}
