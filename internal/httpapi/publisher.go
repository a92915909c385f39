package httpapi

import (
	"context"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Publisher commits one event durably before the handler answers. A
// per-event outcome (idempotent duplicate, idempotency conflict) is in the
// result; the error is for failures of the commit itself. The engine
// implements it.
type Publisher interface {
	Publish(ctx context.Context, params *ledger.EventInsertParams) (ledger.EventInsertResult, error)
}

// Reader is the part of ledger.Store the read API needs.
type Reader interface {
	EventGet(ctx context.Context, id string) (ledger.Event, error)
	DeliveryGet(ctx context.Context, id string) (ledger.Delivery, error)
	DeliveryList(ctx context.Context, params *ledger.DeliveryListParams) ([]ledger.Delivery, error)
	AttemptList(ctx context.Context, deliveryID string) ([]ledger.Attempt, error)
	// EndpointOwners names the owner of each endpoint that has one, so
	// that a delivery shows whom to ask about it.
	EndpointOwners(ctx context.Context, ids []string) (map[string]string, error)
}
