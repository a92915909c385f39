package engine_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// The engine tests run the real engine against both real stores and real
// HTTP receivers on loopback. Time is the real clock with millisecond
// policies; every wait is on an explicit condition.

type storeFactory struct {
	name string
	open func(t *testing.T) ledger.Store
}

func stores() []storeFactory {
	return []storeFactory{
		{"sqlite", func(t *testing.T) ledger.Store {
			s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"postgres", func(t *testing.T) ledger.Store { return pgtest.NewSchemaStore(t) }},
	}
}

// receiver is a real HTTP server that records what it received and answers
// with the status its respond function picks.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	ids      map[string]int
	bodies   []map[string]any
	received chan string
}

func newReceiver(t *testing.T, respond func(n int) int) *receiver {
	r := &receiver{ids: map[string]int{}, received: make(chan string, 10000)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var env map[string]any
		_ = json.Unmarshal(body, &env)
		id := req.Header.Get("webhook-id")
		r.mu.Lock()
		r.ids[id]++
		n := r.ids[id]
		r.bodies = append(r.bodies, env)
		r.mu.Unlock()
		w.WriteHeader(respond(n))
		r.received <- id
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ids[id]
}

func policy(attempts int32, delay time.Duration) ledger.Policy {
	return ledger.Policy{
		Backoff: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: delay, MaxAttempts: attempts, AttemptTimeout: 5 * time.Second},
		RetryOn: []string{"NetworkError", "Timeout", "429", "5xx"},
	}
}

func endpoint(t *testing.T, ns, name, url string, types []string, p ledger.Policy) ledger.Endpoint {
	secret, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Endpoint{
		ID: ledger.EndpointID(ns, name), Namespace: ns, Name: name, URL: url, EventTypes: types,
		Secrets: []ledger.SigningSecret{{Value: secret}}, Policy: p,
		AckMode: ledger.AckResponse, MaxInFlight: 16,
	}
}

// run runs an engine until the test ends.
func run(t *testing.T, opts engine.Options) *engine.Engine {
	t.Helper()
	r, _ := start(t, opts)
	return r.engine
}

// running is an engine whose Run the test may end early with cancel.
type running struct {
	engine *engine.Engine
	cancel context.CancelFunc
}

// start runs an engine until the test cancels it or ends; done is closed
// once Run has returned (nil, checked) and the engine is closed.
func start(t *testing.T, opts engine.Options) (running, <-chan struct{}) {
	t.Helper()
	e, err := engine.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return startEngine(t, e)
}

// startEngine is start for an engine the test made (and used) beforehand.
func startEngine(t *testing.T, e *engine.Engine) (running, <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := e.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
		e.Close()
	}()
	t.Cleanup(func() { cancel(); <-done })
	return running{engine: e, cancel: cancel}, done
}

func publish(t *testing.T, e *engine.Engine, ns, typ string, data string) ledger.EventInsertResult {
	t.Helper()
	now := time.Now()
	res, err := e.Publish(context.Background(), &ledger.EventInsertParams{
		ID: ledger.NewID("evt", now), Namespace: ns, Type: typ, Data: json.RawMessage(data), Now: now,
	})
	if err != nil || res.Err != nil {
		t.Fatalf("publish: %v / %v", err, res.Err)
	}
	return res
}

// eventually waits, with Gomega's Eventually, until cond holds. The
// timeout only bounds a test that would otherwise hang: it is generous
// because a loaded 2-core CI machine under -race can take tens of seconds
// for work (pruning thousands of events with fsync) that is quick alone.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	gomega.NewWithT(t).Eventually(cond).WithTimeout(2*time.Minute).WithPolling(5*time.Millisecond).
		Should(gomega.BeTrue(), "waiting for %s", what)
}

func TestEngine(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Run("delivers every event to every matching endpoint once", func(t *testing.T) {
				t.Parallel()
				store := sf.open(t)
				orders := newReceiver(t, func(int) int { return 204 })
				all := newReceiver(t, func(int) int { return 200 })
				e := run(t, engine.Options{Store: store})
				ctx := context.Background()
				for _, ep := range []ledger.Endpoint{
					endpoint(t, "shop", "orders", orders.URL, []string{"order.*"}, policy(3, time.Millisecond)),
					endpoint(t, "shop", "all", all.URL, []string{"*"}, policy(3, time.Millisecond)),
					endpoint(t, "other", "orders", orders.URL, []string{"*"}, policy(3, time.Millisecond)),
				} {
					if _, err := e.RegisterEndpoint(ctx, ep); err != nil {
						t.Fatal(err)
					}
				}
				const n = 200
				ids := make([]string, 0, n)
				for i := range n {
					typ := "order.created"
					if i%2 == 1 {
						typ = "customer.created"
					}
					res := publish(t, e, "shop", typ, `{"n":1}`)
					ids = append(ids, res.Event.ID)
				}
				eventually(t, "all deliveries", func() bool {
					s1, _ := e.EndpointStats(ctx, "shop/orders")
					s2, _ := e.EndpointStats(ctx, "shop/all")
					return s1.Delivered == n/2 && s2.Delivered == n
				})
				for i, id := range ids {
					want := 0
					if i%2 == 0 {
						want = 1
					}
					if got := orders.count(id); got != want {
						t.Fatalf("event %d delivered %d times to shop/orders, want %d", i, got, want)
					}
					if got := all.count(id); got != 1 {
						t.Fatalf("event %d delivered %d times to shop/all, want 1", i, got)
					}
				}
				if s, _ := e.EndpointStats(ctx, "other/orders"); s.Delivered+s.Pending != 0 {
					t.Fatalf("an endpoint of another namespace got deliveries: %+v", s)
				}
			})

			t.Run("retries until the horizon, then exhausts, notifies and dead-letters", func(t *testing.T) {
				t.Parallel()
				store := sf.open(t)
				failing := newReceiver(t, func(int) int { return 503 })
				dlq := newReceiver(t, func(int) int { return 204 })
				notices := make(chan engine.ExhaustedNotice, 10)
				e := run(t, engine.Options{Store: store, OnExhausted: func(n engine.ExhaustedNotice) { notices <- n }})
				ctx := context.Background()
				src := endpoint(t, "ns", "flaky", failing.URL, []string{"*"}, policy(3, 5*time.Millisecond))
				src.DeadLetter = "ns/dlq"
				if _, err := e.RegisterEndpoint(ctx, endpoint(t, "ns", "dlq", dlq.URL, []string{ledger.DeadLetterEventType}, policy(3, time.Millisecond))); err != nil {
					t.Fatal(err)
				}
				if _, err := e.RegisterEndpoint(ctx, src); err != nil {
					t.Fatal(err)
				}
				res := publish(t, e, "ns", "order.created", `{"order":42}`)

				var notice engine.ExhaustedNotice
				select {
				case notice = <-notices:
				case <-time.After(30 * time.Second):
					t.Fatal("no exhaustion notice")
				}
				d := notice.Delivery
				if d.EventID != res.Event.ID || d.State != ledger.StateExhausted || d.ExhaustReason != ledger.ExhaustMaxAttempts ||
					d.Attempts != 3 || d.Resolution != ledger.ResolutionUnresolved {
					t.Fatalf("exhausted delivery = %+v", d)
				}
				if got := failing.count(res.Event.ID); got != 3 {
					t.Fatalf("receiver saw %d attempts with one webhook-id, want 3", got)
				}
				attempts, err := store.AttemptList(ctx, d.ID)
				if err != nil || len(attempts) != 3 || attempts[2].StatusCode != 503 || attempts[2].Error != "HTTP 503" {
					t.Fatalf("attempts = %+v, %v", attempts, err)
				}
				s, _ := e.EndpointStats(ctx, "ns/flaky")
				if s.ExhaustedUnresolved != 1 || s.Pending != 0 || s.LastFailureReason != "HTTP 503" {
					t.Fatalf("stats = %+v", s)
				}
				eventually(t, "the dead-letter event", func() bool {
					ds, _ := e.EndpointStats(ctx, "ns/dlq")
					return ds.Delivered == 1
				})
				dlq.mu.Lock()
				data, _ := dlq.bodies[0]["data"].(map[string]any)
				typ := dlq.bodies[0]["type"]
				dlq.mu.Unlock()
				if typ != ledger.DeadLetterEventType || data["eventID"] != res.Event.ID || data["reason"] != "MaxAttempts" {
					t.Fatalf("dead-letter envelope type=%v data=%v", typ, data)
				}
			})

			t.Run("a paused endpoint accumulates deliveries and sends them when resumed", func(t *testing.T) {
				t.Parallel()
				store := sf.open(t)
				rcv := newReceiver(t, func(int) int { return 204 })
				e := run(t, engine.Options{Store: store})
				ctx := context.Background()
				ep := endpoint(t, "ns", "paused", rcv.URL, []string{"*"}, policy(3, time.Millisecond))
				ep.Paused = true
				if _, err := e.RegisterEndpoint(ctx, ep); err != nil {
					t.Fatal(err)
				}
				for range 5 {
					publish(t, e, "ns", "a.b", `{}`)
				}
				if s, _ := e.EndpointStats(ctx, "ns/paused"); s.Pending != 5 {
					t.Fatalf("paused endpoint: pending = %d, want 5", s.Pending)
				}
				ep.Paused = false
				if _, err := e.RegisterEndpoint(ctx, ep); err != nil {
					t.Fatal(err)
				}
				eventually(t, "delivery after resume", func() bool {
					s, _ := e.EndpointStats(ctx, "ns/paused")
					return s.Delivered == 5 && s.Pending == 0
				})
			})

			t.Run("removing an endpoint cancels what it had pending", func(t *testing.T) {
				t.Parallel()
				store := sf.open(t)
				e := run(t, engine.Options{Store: store})
				ctx := context.Background()
				ep := endpoint(t, "ns", "gone", "http://127.0.0.1:1/unused", []string{"*"}, policy(3, time.Millisecond))
				ep.Paused = true
				if _, err := e.RegisterEndpoint(ctx, ep); err != nil {
					t.Fatal(err)
				}
				res := publish(t, e, "ns", "a.b", `{}`)
				n, err := e.RemoveEndpoint(ctx, "ns/gone")
				if err != nil || n != 1 {
					t.Fatalf("RemoveEndpoint = %d, %v; want 1 cancelled", n, err)
				}
				d, err := store.DeliveryGet(ctx, res.Deliveries[0].ID)
				if err != nil || d.State != ledger.StateCancelled {
					t.Fatalf("delivery after removal = %+v, %v", d, err)
				}
			})
		})
	}
}
