package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// TestAddressedEvent: an event published through the engine with
// EventInsertParams.Endpoint reaches that endpoint's receiver, signed and
// enveloped as any event, and no other receiver of the namespace, even one
// subscribed to every type; one addressed to an unknown endpoint is
// refused with ledger.ErrUnknownEndpoint and sends nothing.
func TestAddressedEvent(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			target := newReceiver(t, func(int) int { return 204 })
			bystander := newReceiver(t, func(int) int { return 204 })
			e := run(t, engine.Options{Store: sf.open(t)})
			ctx := context.Background()
			for _, ep := range []ledger.Endpoint{
				endpoint(t, "shop", "billing", target.URL, []string{"invoice.*"}, policy(3, time.Millisecond)),
				endpoint(t, "shop", "all", bystander.URL, []string{"*"}, policy(3, time.Millisecond)),
			} {
				if _, err := e.RegisterEndpoint(ctx, ep); err != nil {
					t.Fatal(err)
				}
			}
			addressed := func(to string) (ledger.EventInsertResult, error) {
				now := time.Now()
				return e.Publish(ctx, &ledger.EventInsertParams{
					ID: ledger.NewID("evt", now), Namespace: "shop", Type: "hookkeeper.test",
					Data: json.RawMessage(`{"test":true}`), Endpoint: to, Now: now,
				})
			}
			res, err := addressed("shop/billing")
			if err != nil || res.Err != nil || len(res.Deliveries) != 1 {
				t.Fatalf("publish: %v / %v, %d deliveries, want 1", err, res.Err, len(res.Deliveries))
			}
			eventually(t, "the delivery to billing", func() bool {
				s, _ := e.EndpointStats(ctx, "shop/billing")
				return s.Delivered == 1
			})
			if got := target.count(res.Event.ID); got != 1 {
				t.Fatalf("billing's receiver saw the event %d times, want 1", got)
			}
			target.mu.Lock()
			typ := target.bodies[0]["type"]
			target.mu.Unlock()
			if typ != "hookkeeper.test" {
				t.Fatalf("envelope type %v", typ)
			}
			// A later event to the bystander proves it was serving all along;
			// it must have seen that one and not the addressed one.
			other := publish(t, e, "shop", "order.created", `{}`)
			eventually(t, "the bystander's own event", func() bool {
				s, _ := e.EndpointStats(ctx, "shop/all")
				return s.Delivered == 1
			})
			if got := bystander.count(other.Event.ID); got != 1 {
				t.Fatalf("the bystander saw its own event %d times, want 1", got)
			}
			if got := bystander.count(res.Event.ID); got != 0 {
				t.Fatalf("the bystander (subscribed to *) received the addressed event %d times", got)
			}
			if s, _ := e.EndpointStats(ctx, "shop/all"); s.Delivered != 1 || s.Pending != 0 {
				t.Fatalf("the bystander's ledger counters %+v, want its own event only", s)
			}

			res, err = addressed("shop/nobody")
			if err != nil || !errors.Is(res.Err, ledger.ErrUnknownEndpoint) || len(res.Deliveries) != 0 {
				t.Fatalf("addressed to an unknown endpoint: %v / %v, %d deliveries", err, res.Err, len(res.Deliveries))
			}
		})
	}
}
