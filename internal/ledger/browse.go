package ledger

import (
	"context"
	"slices"
)

// Browser reads the ledger's history for the delivery API (kubectl get
// deliveries / webhookevents): one page at a time, filtered in the
// database and ordered by ID, so that a caller paging with AfterID sees
// every row exactly once, including while new rows are written (IDs grow
// with time, see NewID), and never makes the store load more than a page.
type Browser interface {
	// DeliveryBrowse lists deliveries with what a reader needs beside them
	// (namespace, event type, what replaced them), filtered by params,
	// ordered by ID, at most params.Limit (ListLimit) of them.
	DeliveryBrowse(ctx context.Context, params *DeliveryBrowseParams) ([]DeliveryView, error)
	// EventBrowse lists events filtered by params, ordered by ID, at most
	// params.Limit (ListLimit). Secrets are never read: every returned
	// event has Secrets nil (SecretNames stay).
	EventBrowse(ctx context.Context, params *EventBrowseParams) ([]Event, error)
}

// DeliveryBrowseParams filters DeliveryBrowse; zero fields do not filter,
// criteria are ANDed.
type DeliveryBrowseParams struct {
	// ID selects one delivery.
	ID         string
	Namespace  string
	EndpointID string
	EventID    string
	EventType  string
	States     []DeliveryState
	Resolution Resolution
	AfterID    string
	// Limit defaults to 100 and is capped at MaxListLimit.
	Limit int
}

// DeliveryView is a delivery as the delivery API shows it.
type DeliveryView struct {
	Delivery
	Namespace string
	EventType string
	// EndpointOwner is the endpoint's Owner now (not when the delivery
	// was made): who to ask about it today.
	EndpointOwner string
	// ReplacedByDelivery and ReplacedByEvent name what a recovery made of
	// this delivery: the retry (a new delivery of the same event), or the
	// reissue (a new event, and its delivery when the engine copied it).
	// Both empty when nothing replaced it (yet).
	ReplacedByDelivery string
	ReplacedByEvent    string
	// EventTrace is the trace context its event was published in: where
	// kubectl shows the delivery's trace id.
	EventTrace TraceContext
}

// EventBrowseParams filters EventBrowse; zero fields do not filter.
type EventBrowseParams struct {
	ID        string
	Namespace string
	Type      string
	AfterID   string
	// Limit defaults to 100 and is capped at MaxListLimit.
	Limit int
}

// FailedStates are the delivery states the stores index for browsing
// (partial indexes of migration 0009): the failed deliveries an admin
// selects, rare among a ledger's deliveries, which a walk in ID order would
// otherwise pass over by the thousand to fill a page.
var FailedStates = []DeliveryState{StateExhausted, StateCancelled}

// SelectsFailed reports whether params select one failed state (one of
// FailedStates), so that a store may walk its index of failed deliveries
// in ID order. (Several states would need the walks merged and sorted;
// the delivery API selects one.)
func (p *DeliveryBrowseParams) SelectsFailed() bool {
	return len(p.States) == 1 && slices.Contains(FailedStates, p.States[0])
}
