// Package ledgerread is the controllers' one way into the ledger: Reader
// names the few reads their status needs, each the ledger's own, so that
// ledger.Store satisfies it and cmd/main.go hands the store in once. What a
// controller asks the delivery engine to do (register, remove, probe,
// recover, replay) goes through the engine's commands, never a read.
package ledgerread

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Reader is what the controllers read of the ledger.
type Reader interface {
	// EndpointGet is the engine's configuration of an endpoint, or
	// ledger.ErrNotFound.
	EndpointGet(ctx context.Context, id string) (ledger.Endpoint, error)
	EndpointStats(ctx context.Context, endpointID string) (ledger.EndpointStats, error)
	ExhaustedList(ctx context.Context, params *ledger.ExhaustedListParams) ([]ledger.ExhaustedDelivery, error)
	BreakerGet(ctx context.Context, endpointID string) (ledger.Breaker, error)
	RetryDeferralBuckets(ctx context.Context, params *ledger.RetryDeferralBucketsParams) ([]ledger.DeferralBucket, error)
	// OutcomeList reads the outcome evidence (status.evidence).
	OutcomeList(ctx context.Context, params *ledger.OutcomeListParams) ([]ledger.OutcomeBucket, error)
	// EndpointActivitySince reads which endpoints' counters moved.
	EndpointActivitySince(ctx context.Context, c ledger.ActivityCursor) ([]ledger.EndpointActivity, ledger.ActivityCursor, error)
	RecoveryItemsList(ctx context.Context, operationKey string) ([]ledger.RecoveryItem, error)
	ReplayList(ctx context.Context, params *ledger.ReplayListParams) ([]ledger.ReplayCandidate, error)
}

// Breaker is the endpoint's circuit breaker: the zero breaker when it
// never opened.
func Breaker(ctx context.Context, r Reader, endpointID string) (ledger.Breaker, error) {
	b, err := r.BreakerGet(ctx, endpointID)
	if errors.Is(err, ledger.ErrNotFound) {
		return ledger.Breaker{EndpointID: endpointID}, nil
	}
	if err != nil {
		return ledger.Breaker{}, fmt.Errorf("reading the breaker of %s: %w", endpointID, err)
	}
	return b, nil
}

// Deferrals is the endpoint's latest streak of retries its budget
// deferred, on any replica, as of now.
func Deferrals(ctx context.Context, r Reader, endpointID string, now time.Time) (ledger.DeferralStreak, error) {
	buckets, err := r.RetryDeferralBuckets(ctx, &ledger.RetryDeferralBucketsParams{
		EndpointID: endpointID, SinceMinute: ledger.BudgetMinute(now.Add(-ledger.BudgetRetention)),
	})
	if err != nil {
		return ledger.DeferralStreak{}, err
	}
	return ledger.StreakOf(buckets), nil
}

// store is the check that the ledger answers every read.
var _ Reader = ledger.Store(nil)
