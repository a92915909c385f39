package engine

import (
	"context"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// sweepBatch bounds the rows one sweep or prune call touches, so that
// background work never holds the ledger's writer long enough to stall
// dispatch.
const sweepBatch = 500

// runServices runs the engine's background work until ctx is done: overdue
// acknowledgements, deliveries whose event expired, secrets whose grace
// period ended, retention, and
// compaction that makes scrubbed bytes unrecoverable. Each is bounded per
// round; errors are logged and retried next round.
func (e *Engine) runServices(ctx context.Context) {
	log := e.opts.Logger.WithName("services")
	sweep := time.NewTicker(e.opts.SweepInterval)
	defer sweep.Stop()
	// Retention and compaction start one interval after the engine, not at
	// once: a checkpoint that truncates a large WAL holds the writer, and
	// a restart under load should not begin with that pause.
	lastPrune, lastCompact := e.opts.Clock.Now(), e.opts.Clock.Now()
	pruneBacklog := false
	for round := 0; ; round++ {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C:
		}
		e.refreshBreakers(ctx, e.opts.Clock.Now(), round%breakerSweepEvery == 0)
		e.renewSlots(ctx, e.opts.Clock.Now())
		if err := e.sweepAckTimeouts(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "acknowledgement timeouts")
		}
		now := e.opts.Clock.Now()
		e.sweepExpired(ctx, now)
		if n, err := e.store.SecretsScrubDue(ctx, now, sweepBatch); err != nil && ctx.Err() == nil {
			log.Error(err, "scrubbing secrets")
		} else {
			e.opts.Metrics.observeScrubbed(n)
		}
		// A backlog (more expired rows than one round removes) is drained
		// at every sweep rather than every PruneInterval, so that retention
		// keeps up with any sustained ingest rate.
		if pruneBacklog || now.Sub(lastPrune) >= e.opts.PruneInterval {
			lastPrune = now
			pruneBacklog = e.prune(ctx, now)
			e.pruneOutcomes(ctx, now)
		}
		if now.Sub(lastCompact) >= e.opts.CompactInterval {
			lastCompact = now
			if err := e.store.Compact(ctx); err != nil && ctx.Err() == nil {
				log.Error(err, "compacting the ledger")
			}
		}
	}
}

// pruneRounds bounds the Prune calls of one round: each is its own short
// transaction, and a round must leave the writer to dispatch soon.
const pruneRounds = 10

// prune removes expired payloads and evidence in bounded batches and
// reports whether a backlog remains (every batch was full).
func (e *Engine) prune(ctx context.Context, now time.Time) (backlog bool) {
	for range pruneRounds {
		res, err := e.store.Prune(ctx, &ledger.PruneParams{Now: now, Limit: sweepBatch,
			DefaultPayloadRetention: e.opts.DefaultPayloadRetention, DefaultEvidenceRetention: e.opts.DefaultEvidenceRetention})
		if err != nil {
			if ctx.Err() == nil {
				e.opts.Logger.Error(err, "pruning the ledger")
			}
			return false
		}
		e.opts.Metrics.observePruned(res)
		if res.PayloadsPruned+res.EventsDeleted < sweepBatch {
			return false
		}
	}
	return true
}
