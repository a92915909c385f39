package engine

import (
	"context"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// pruneOutcomes removes the outcome buckets older than
// ledger.OutcomeRetention, one bounded batch per retention round: a day of
// buckets is a few rows per endpoint, so one batch keeps up.
func (e *Engine) pruneOutcomes(ctx context.Context, now time.Time) {
	if _, err := e.store.OutcomePrune(ctx, now.Add(-ledger.OutcomeRetention), sweepBatch); err != nil && ctx.Err() == nil {
		e.opts.Logger.Error(err, "pruning outcome evidence")
	}
}
