package engine

import (
	"context"
	"fmt"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// On a store that commits one transaction at a time (ledger.SerialWriter:
// SQLite), ingest and attempt records share one group commit (ledger.Store's
// WriteMany): whatever of either kind queued while the last commit ran
// goes into the next one. A publish is answered only after its commit, so
// an insert commits at once; nobody waits on a record, so it waits (up to
// RecordWait) to ride in the next insert's commit. At low rates an event
// then costs one transaction and one fsync, not two; at saturation both
// kinds batch as before. A record holds no worker or endpoint slot while
// it waits (engine.go, attempt). On a store that commits
// concurrently (PostgreSQL) each kind keeps its own group commit, so that
// an insert never waits behind a record's round trips.

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
// for it: on a serial store for a ride in an insert's commit, on a
// concurrent one for the records that follow it, so that at a steady rate
// several share one transaction instead of each paying its own (ADR 0041).
func (e *Engine) record(ctx context.Context, p *ledger.AttemptRecordParams) (writeOutcome, error) {
	if len(e.records) == cap(e.records) {
		return e.recorder.Do(ctx, writeItem{attempt: p})
	}
	return e.recorder.DoLazy(ctx, writeItem{attempt: p}, e.opts.RecordWait)
}
