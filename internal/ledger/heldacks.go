package ledger

import (
	"context"
	"errors"
)

// HeldAcks keeps the acknowledgements that overtake their attempt's
// record. A fast receiver can post its acknowledgement before the sender
// has recorded the 2xx that starts the wait (the record may be batched, or
// made by another replica). Rather than hold the request until the record
// lands, the ledger keeps the acknowledgement, and whoever records the
// attempt applies it (or drops it when the attempt did not end
// awaiting_ack); the acknowledgement-timeout sweep applies what a crash
// left held, so that a held acknowledgement is never lost.
type HeldAcks interface {
	// AckHold keeps an acknowledgement of an in-flight delivery of a
	// Callback-mode endpoint (a later one of the same delivery replaces
	// it) and returns the delivery. A delivery in another state, or of a
	// Response-mode endpoint, gives ErrNotInFlight with the delivery as it
	// is (awaiting_ack: the record landed meanwhile, apply with AckRecord);
	// an unknown one ErrNotFound.
	AckHold(ctx context.Context, params *AckRecordParams) (Delivery, error)
	// AckHeldTake removes and returns the held acknowledgements of the
	// deliveries, in no particular order. Each is returned once, whichever
	// process takes it.
	AckHeldTake(ctx context.Context, deliveryIDs []string) ([]AckRecordParams, error)
}

// ErrNotInFlight is AckHold's answer for a delivery that is not in flight.
var ErrNotInFlight = errors.New("delivery is not in flight")
