package controllers

import (
	"strings"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/engine"
)

// ExhaustionEvents carries the engine's exhaustion notices to the
// WebhookEndpoint controller, so that an exhaustion reaches the endpoint's
// status within moments instead of at the next periodic refresh. Wire
// Notify as engine.Options.OnExhausted and Events as
// WebhookEndpointReconciler.Exhausted.
//
// Notify never blocks the engine: when the buffer is full the notice is
// dropped (and counted), which loses nothing but latency, since the
// controller's workqueue collapses repeated notices for one endpoint anyway
// and the periodic refresh reads the ledger. On a replica that is not the
// leader nobody reads the channel and notices are dropped the same way.
type ExhaustionEvents struct {
	ch      chan event.GenericEvent
	dropped atomic.Int64
}

// NewExhaustionEvents returns an ExhaustionEvents buffering up to buffer
// notices.
func NewExhaustionEvents(buffer int) *ExhaustionEvents {
	return &ExhaustionEvents{ch: make(chan event.GenericEvent, buffer)}
}

// Notify implements engine.Options.OnExhausted.
func (x *ExhaustionEvents) Notify(n engine.ExhaustedNotice) {
	ns, name, ok := strings.Cut(n.Delivery.EndpointID, "/")
	if !ok || ns == "" || name == "" {
		return
	}
	ev := event.GenericEvent{Object: &hookv1.WebhookEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
	select {
	case x.ch <- ev:
	default:
		x.dropped.Add(1)
	}
}

// Events is the channel the controller watches.
func (x *ExhaustionEvents) Events() <-chan event.GenericEvent { return x.ch }

// Dropped is how many notices were dropped because the buffer was full.
func (x *ExhaustionEvents) Dropped() int64 { return x.dropped.Load() }
