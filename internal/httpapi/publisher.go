package httpapi

import (
	"context"
	"fmt"

	"github.com/hookkeeper/hookkeeper/internal/groupcommit"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Publisher commits one event durably before the handler answers. A
// per-event outcome (idempotent duplicate, idempotency conflict) is in the
// result; the error is for failures of the commit itself. The engine
// implements it; StorePublisher is the plain ledger-backed one.
type Publisher interface {
	Publish(ctx context.Context, params *ledger.EventInsertParams) (ledger.EventInsertResult, error)
}

// Reader is the part of ledger.Store the read API needs.
type Reader interface {
	EventGet(ctx context.Context, id string) (ledger.Event, error)
	DeliveryGet(ctx context.Context, id string) (ledger.Delivery, error)
	DeliveryList(ctx context.Context, params *ledger.DeliveryListParams) ([]ledger.Delivery, error)
	AttemptList(ctx context.Context, deliveryID string) ([]ledger.Attempt, error)
}

// EventInserter is the part of ledger.Store a StorePublisher needs.
type EventInserter interface {
	EventInsertMany(ctx context.Context, params []*ledger.EventInsertParams) ([]ledger.EventInsertResult, error)
}

// StorePublisher publishes through a ledger store, group-committing
// concurrent publishes into one EventInsertMany transaction.
type StorePublisher struct {
	batcher *groupcommit.Batcher[*ledger.EventInsertParams, ledger.EventInsertResult]
}

var _ Publisher = (*StorePublisher)(nil)

// NewStorePublisher returns a Publisher over store. Close it before
// closing the store.
func NewStorePublisher(store EventInserter, opts groupcommit.Options) *StorePublisher {
	return &StorePublisher{batcher: groupcommit.New(store.EventInsertMany, opts)}
}

// Publish implements Publisher. groupcommit.ErrClosed after Close; a
// context error means the event may or may not have been committed.
func (p *StorePublisher) Publish(ctx context.Context, params *ledger.EventInsertParams) (ledger.EventInsertResult, error) {
	res, err := p.batcher.Do(ctx, params)
	if err != nil {
		return ledger.EventInsertResult{}, fmt.Errorf("publishing event %s: %w", params.ID, err)
	}
	return res, nil
}

// Close commits what is queued and refuses further publishes.
func (p *StorePublisher) Close() { p.batcher.Close() }
