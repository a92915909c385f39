package engine

import (
	"context"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Retries put off by an endpoint's retry budget are recorded in the shared
// ledger (ledger.RetryDeferrals), not in this process: the endpoint's
// RetryBudgetLimited condition is written by the leader, and it must count
// what every replica deferred.

// recordDeferral records one retry of endpoint deferred at now. A failed
// record is logged and costs only the condition's count: the retry itself
// is deferred all the same, and the metric counts it.
func (e *Engine) recordDeferral(ctx context.Context, endpoint string, now time.Time) {
	err := e.store.RetryDeferralRecord(ctx, &ledger.RetryDeferralParams{EndpointID: endpoint, Count: 1, Now: now})
	if err != nil && ctx.Err() == nil {
		e.opts.Logger.Error(err, "recording a retry deferred by the retry budget", "endpoint", endpoint)
	}
}

// RetryBudgetDeferrals reports the endpoint's latest streak of retries
// deferred by its retry budget, on any engine sharing the ledger, as of
// now (Count 0 when none; ledger.DeferralStreak.Active says whether it
// still holds).
func (e *Engine) RetryBudgetDeferrals(ctx context.Context, endpointID string, now time.Time) (ledger.DeferralStreak, error) {
	return ledger.RetryDeferralStreak(ctx, e.store, endpointID, now)
}
