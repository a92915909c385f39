package engine

import (
	"context"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Endpoint returns an endpoint's registered configuration as the ledger
// holds it, or an error wrapping ledger.ErrNotFound when none is registered
// (or it was removed). The WebhookEndpoint controller compares it with the
// configuration it would register, so that a reconcile that changes nothing
// registers nothing, and reads the signing secret in use from it to notice a
// rotation.
func (e *Engine) Endpoint(ctx context.Context, id string) (ledger.Endpoint, error) {
	return e.store.EndpointGet(ctx, id)
}
