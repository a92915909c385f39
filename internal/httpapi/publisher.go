package httpapi

import (
	"context"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// Publisher commits one event durably before the handler answers: the
// publish core's Committer, which the engine implements.
type Publisher = publish.Committer

// Reader is the ledger's one read model, as the aggregated API reads it.
type Reader interface {
	ledger.Browser
	AttemptList(ctx context.Context, deliveryID string) ([]ledger.Attempt, error)
}
