package webhookendpoint

import (
	"strings"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
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
type ExhaustionEvents struct{ endpointWakeups }

// NewExhaustionEvents returns an ExhaustionEvents buffering up to buffer
// notices.
func NewExhaustionEvents(buffer int) *ExhaustionEvents {
	return &ExhaustionEvents{newEndpointWakeups(buffer)}
}

// Notify implements engine.Options.OnExhausted.
func (x *ExhaustionEvents) Notify(n engine.ExhaustedNotice) { x.wake(n.Delivery.EndpointID) }

// BreakerEvents carries the engine's circuit-breaker changes (opened,
// closed, a probe failed, a change another replica made) to the
// WebhookEndpoint controller, so that CircuitOpen, its Events and
// `kubectl wait --for=condition=CircuitOpen` follow the breaker within
// moments. Wire Notify as engine.Options.OnBreaker and Events as
// WebhookEndpointReconciler.Breakers. Like ExhaustionEvents, it never
// blocks the engine.
type BreakerEvents struct{ endpointWakeups }

// NewBreakerEvents returns a BreakerEvents buffering up to buffer notices.
func NewBreakerEvents(buffer int) *BreakerEvents {
	return &BreakerEvents{newEndpointWakeups(buffer)}
}

// Notify implements engine.Options.OnBreaker.
func (x *BreakerEvents) Notify(b ledger.Breaker) { x.wake(b.EndpointID) }

// FilterOverrunEvents carries the engine's filter-overrun notices to the
// WebhookEndpoint controller, so that FilterOverBudget and its Event
// follow within moments. Wire Notify as engine.Options.OnFilterOverrun and
// Events as WebhookEndpointReconciler.FilterOverruns. It never blocks the
// engine (the publish path calls it).
type FilterOverrunEvents struct{ endpointWakeups }

// NewFilterOverrunEvents returns a FilterOverrunEvents buffering up to
// buffer notices.
func NewFilterOverrunEvents(buffer int) *FilterOverrunEvents {
	return &FilterOverrunEvents{newEndpointWakeups(buffer)}
}

// Notify implements engine.Options.OnFilterOverrun.
func (x *FilterOverrunEvents) Notify(endpointID string) { x.wake(endpointID) }

// endpointWakeups is a bounded channel of reconcile requests for endpoints
// named by their ledger ID ("<namespace>/<name>") that drops, and counts,
// what does not fit.
type endpointWakeups struct {
	ch      chan event.GenericEvent
	dropped *atomic.Int64
}

func newEndpointWakeups(buffer int) endpointWakeups {
	return endpointWakeups{ch: make(chan event.GenericEvent, buffer), dropped: new(atomic.Int64)}
}

// wake asks for a reconcile of the endpoint, without blocking.
func (w endpointWakeups) wake(endpointID string) {
	ns, name, ok := strings.Cut(endpointID, "/")
	if !ok || ns == "" || name == "" {
		return
	}
	ev := event.GenericEvent{Object: &hookv1.WebhookEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
	select {
	case w.ch <- ev:
	default:
		w.dropped.Add(1)
	}
}

// Events is the channel the controller watches.
func (w endpointWakeups) Events() <-chan event.GenericEvent { return w.ch }

// Dropped is how many notices were dropped because the buffer was full.
func (w endpointWakeups) Dropped() int64 { return w.dropped.Load() }
