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

// Reader is the ledger's one read model, as the aggregated API reads it.
type Reader interface {
	ledger.Browser
	AttemptList(ctx context.Context, deliveryID string) ([]ledger.Attempt, error)
}
