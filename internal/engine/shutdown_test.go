package engine_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// TestShutdown: when Run's context ends, an attempt in progress may finish
// within ShutdownGrace and is recorded (a rolling update sends no
// duplicate); past the grace it is cut and released, not counted.
func TestShutdown(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Run("an attempt finishing within the grace is recorded", func(t *testing.T) {
				store := sf.open(t)
				rcv := newHeldReceiver(t)
				stop, done := start(t, engine.Options{Store: store, ShutdownGrace: time.Minute})
				d := publishTo(t, stop.engine, rcv.URL)

				<-rcv.arrived
				stop.cancel()
				close(rcv.release) // the receiver answers after the shutdown began
				<-done

				got, err := store.DeliveryGet(context.Background(), d.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.State != ledger.StateDelivered || got.Attempts != 1 || rcv.requests.Load() != 1 {
					t.Fatalf("after shutdown: delivery %s with %d attempts, receiver saw %d requests; want delivered, 1, 1",
						got.State, got.Attempts, rcv.requests.Load())
				}
			})
			t.Run("an attempt past the grace is released", func(t *testing.T) {
				store := sf.open(t)
				rcv := newHeldReceiver(t) // never answers before the engine stops
				stop, done := start(t, engine.Options{Store: store, ShutdownGrace: 50 * time.Millisecond})
				d := publishTo(t, stop.engine, rcv.URL)

				<-rcv.arrived
				stop.cancel()
				<-done

				got, err := store.DeliveryGet(context.Background(), d.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.State != ledger.StateScheduled || got.Attempts != 0 {
					t.Fatalf("after shutdown: delivery %s with %d attempts; want scheduled with 0 (released, not counted)", got.State, got.Attempts)
				}
			})
		})
	}
}

// heldReceiver signals each request and holds it until release is closed.
type heldReceiver struct {
	*httptest.Server
	arrived  chan struct{}
	release  chan struct{}
	requests atomic.Int32
}

func newHeldReceiver(t *testing.T) *heldReceiver {
	r := &heldReceiver{arrived: make(chan struct{}, 1000), release: make(chan struct{})}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// Read the body first: only then does the server notice the
		// client going away and end req.Context().
		_, _ = io.Copy(io.Discard, req.Body)
		r.requests.Add(1)
		r.arrived <- struct{}{}
		select {
		case <-r.release:
			w.WriteHeader(http.StatusNoContent)
		case <-req.Context().Done():
		}
	}))
	t.Cleanup(r.Close)
	return r
}

// publishTo registers one endpoint at url and publishes one event to it.
func publishTo(t *testing.T, e *engine.Engine, url string) ledger.Delivery {
	t.Helper()
	if _, err := e.RegisterEndpoint(context.Background(), endpoint(t, "down", "orders", url, []string{"order.created"}, policy(3, time.Second))); err != nil {
		t.Fatal(err)
	}
	return publish(t, e, "down", "order.created", `{}`).Deliveries[0]
}
