package httpapi

import (
	"context"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// Publisher commits one event durably before the handler answers: the
// publish core's Committer, which the engine implements.
type Publisher = publish.Committer

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
