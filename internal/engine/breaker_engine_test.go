package engine_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// The circuit breaker with the real engine, real stores and a real
// receiver on loopback (docs/adr/0033).

// switchable is a receiver that answers status until told otherwise,
// and counts what it answered to each event.
type switchable struct {
	*httptest.Server
	status atomic.Int32
	// counting is set once the breaker opened: answers from then on are
	// counted in afterOpen, by status.
	counting  atomic.Bool
	mu        sync.Mutex
	afterOpen map[int]int
	ok        map[string]int // 2xx answers per webhook-id
	requests  atomic.Int64
}

func newSwitchable(t *testing.T, status int) *switchable {
	r := &switchable{afterOpen: map[int]int{}, ok: map[string]int{}}
	r.status.Store(int32(status))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		code := int(r.status.Load())
		r.requests.Add(1)
		r.mu.Lock()
		if r.counting.Load() {
			r.afterOpen[code]++
		}
		if code < 300 {
			r.ok[req.Header.Get("webhook-id")]++
		}
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *switchable) answered(code int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.afterOpen[code]
}

// breakerPolicy retries every 20ms without end but for an hour's age, and
// opens the breaker after 3 failures, probing from 100ms up to 400ms.
func breakerPolicy() ledger.Policy {
	return ledger.Policy{
		Backoff:      backoff.Policy{Strategy: backoff.Fixed, InitialDelay: 20 * time.Millisecond, MaxAge: time.Hour, AttemptTimeout: 5 * time.Second},
		RetryOn:      []string{"NetworkError", "Timeout", "5xx"},
		ReplayWindow: 2 * time.Hour,
		Breaker: &ledger.BreakerPolicy{Failures: 3, ProbeInterval: 100 * time.Millisecond,
			MaxProbeInterval: 400 * time.Millisecond, Ramp: 200 * time.Millisecond},
	}
}

// breakerWatch collects what OnBreaker reports.
type breakerWatch struct {
	opened, closed chan ledger.Breaker
}

func newBreakerWatch(onOpen func()) (*breakerWatch, func(ledger.Breaker)) {
	w := &breakerWatch{opened: make(chan ledger.Breaker, 100), closed: make(chan ledger.Breaker, 100)}
	var last sync.Map
	return w, func(b ledger.Breaker) {
		prev, _ := last.Swap(b.EndpointID, b.Open)
		switch {
		case b.Open && prev != true:
			if onOpen != nil {
				onOpen()
			}
			w.opened <- b
		case !b.Open && prev == true:
			w.closed <- b
		}
	}
}

func receive[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(2 * time.Minute):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func TestBreaker(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Run("a down receiver gets only probes while open, then every delivery once", func(t *testing.T) {
				t.Parallel()
				store := sf.open(t)
				rcv := newSwitchable(t, 503)
				watch, onBreaker := newBreakerWatch(func() { rcv.counting.Store(true) })
				e := run(t, engine.Options{Store: store, OnBreaker: onBreaker, SweepInterval: 50 * time.Millisecond})
				ctx := context.Background()
				ep := endpoint(t, "shop", "billing", rcv.URL, []string{"*"}, breakerPolicy())
				// One attempt at a time: nothing else is in flight when
				// the breaker opens, so every answer after it is a probe's.
				ep.MaxInFlight = 1
				if _, err := e.RegisterEndpoint(ctx, ep); err != nil {
					t.Fatal(err)
				}
				const n = 20
				var ids []string
				for range n {
					ids = append(ids, publish(t, e, "shop", "order.created", `{"n":1}`).Event.ID)
				}
				b := receive(t, "the breaker to open", watch.opened)
				if b.Reason != ledger.BreakerFailing || b.Failures < 3 || b.LastFailure != "HTTP 503" {
					t.Fatalf("opened breaker = %+v, want Failing after 3 failures with HTTP 503", b)
				}
				eventually(t, "three probes", func() bool {
					b, err := e.Breaker(ctx, "shop/billing")
					return err == nil && b.Probes >= 3
				})
				rcv.status.Store(204)
				closed := receive(t, "the breaker to close", watch.closed)
				if closed.CloseReason != ledger.BreakerProbeSucceeded {
					t.Fatalf("closed breaker = %+v, want ProbeSucceeded", closed)
				}
				eventually(t, "every delivery", func() bool {
					s, _ := e.EndpointStats(ctx, "shop/billing")
					return s.Delivered == n
				})
				final, err := e.Breaker(ctx, "shop/billing")
				if err != nil {
					t.Fatal(err)
				}
				if got := rcv.answered(503); got != final.Probes-1 {
					t.Fatalf("the receiver answered 503 %d times while the breaker was open, want %d (the failed probes of %d)", got, final.Probes-1, final.Probes)
				}
				for _, id := range ids {
					rcv.mu.Lock()
					got := rcv.ok[id]
					rcv.mu.Unlock()
					if got != 1 {
						t.Fatalf("event %s delivered %d times, want 1", id, got)
					}
				}
			})

			t.Run("one 410 holds the endpoint: the next 100 events wait, none exhausted", func(t *testing.T) {
				t.Parallel()
				store := sf.open(t)
				rcv := newSwitchable(t, 410)
				healthy := newReceiver(t, func(int) int { return 204 })
				watch, onBreaker := newBreakerWatch(nil)
				exhausted := make(chan engine.ExhaustedNotice, 200)
				e := run(t, engine.Options{Store: store, OnBreaker: onBreaker, SweepInterval: 50 * time.Millisecond,
					OnExhausted: func(n engine.ExhaustedNotice) { exhausted <- n }})
				ctx := context.Background()
				for _, ep := range []ledger.Endpoint{
					endpoint(t, "shop", "gone", rcv.URL, []string{"*"}, breakerPolicy()),
					endpoint(t, "shop", "control", healthy.URL, []string{"*"}, breakerPolicy()),
				} {
					if _, err := e.RegisterEndpoint(ctx, ep); err != nil {
						t.Fatal(err)
					}
				}
				publish(t, e, "shop", "order.created", `{"n":0}`)
				b := receive(t, "the breaker to open", watch.opened)
				if b.Reason != ledger.BreakerGone || b.NextProbeAt != nil {
					t.Fatalf("breaker after a 410 = %+v, want Gone without automatic probes", b)
				}
				for range 100 {
					publish(t, e, "shop", "order.created", `{"n":1}`)
				}
				// The control endpoint received every event: the engine
				// has had each of them in hand.
				eventually(t, "the control endpoint's deliveries", func() bool {
					s, _ := e.EndpointStats(ctx, "shop/control")
					return s.Delivered == 101
				})
				s, err := e.EndpointStats(ctx, "shop/gone")
				if err != nil {
					t.Fatal(err)
				}
				if s.Pending != 101 || s.ExhaustedUnresolved != 0 || rcv.requests.Load() != 1 {
					t.Fatalf("after one 410: pending %d, exhausted %d, requests %d; want 101 waiting, 0 exhausted, 1 request",
						s.Pending, s.ExhaustedUnresolved, rcv.requests.Load())
				}
				select {
				case n := <-exhausted:
					t.Fatalf("a delivery was exhausted: %+v", n.Delivery)
				default:
				}
				// An admin's probe: still 410, still held.
				if _, err := e.ProbeNow(ctx, "shop/gone"); err != nil {
					t.Fatal(err)
				}
				eventually(t, "the requested probe", func() bool { return rcv.requests.Load() == 2 })
				eventually(t, "the failed probe recorded", func() bool {
					b, _ := e.Breaker(ctx, "shop/gone")
					return b.Open && b.Probes == 1 && b.ProbeDelivery == "" && b.LastProbeResult == "HTTP 410"
				})
				// The receiver is back; the next probe closes the breaker
				// and everything is delivered.
				rcv.status.Store(204)
				if _, err := e.ProbeNow(ctx, "shop/gone"); err != nil {
					t.Fatal(err)
				}
				receive(t, "the breaker to close", watch.closed)
				eventually(t, "every held delivery", func() bool {
					s, _ := e.EndpointStats(ctx, "shop/gone")
					return s.Delivered == 101
				})
			})

			t.Run("held past the horizon: exhausted unsent with CircuitOpen, recoverable", func(t *testing.T) {
				t.Parallel()
				store := sf.open(t)
				rcv := newSwitchable(t, 410)
				watch, onBreaker := newBreakerWatch(nil)
				exhausted := make(chan engine.ExhaustedNotice, 10)
				e := run(t, engine.Options{Store: store, OnBreaker: onBreaker, SweepInterval: 20 * time.Millisecond,
					OnExhausted: func(n engine.ExhaustedNotice) { exhausted <- n }})
				ctx := context.Background()
				p := breakerPolicy()
				p.Backoff.MaxAge = 300 * time.Millisecond
				if _, err := e.RegisterEndpoint(ctx, endpoint(t, "shop", "gone", rcv.URL, []string{"*"}, p)); err != nil {
					t.Fatal(err)
				}
				first := publish(t, e, "shop", "order.created", `{"n":0}`)
				receive(t, "the breaker to open", watch.opened)
				second := publish(t, e, "shop", "order.created", `{"n":1}`)
				got := map[string]ledger.Delivery{}
				for len(got) < 2 {
					n := receive(t, "the held deliveries' exhaustion", exhausted)
					got[n.Delivery.EventID] = n.Delivery
				}
				for _, ev := range []struct {
					id       string
					attempts int
				}{{first.Event.ID, 1}, {second.Event.ID, 0}} {
					d := got[ev.id]
					if d.ExhaustReason != ledger.ExhaustCircuitOpen || d.Resolution != ledger.ResolutionUnresolved || d.Attempts != ev.attempts {
						t.Fatalf("held delivery of %s = %+v, want exhausted CircuitOpen, unresolved, %d attempts", ev.id, d, ev.attempts)
					}
				}
				if rcv.requests.Load() != 1 {
					t.Fatalf("the receiver got %d requests, want the one 410", rcv.requests.Load())
				}
				list, err := e.ExhaustedList(ctx, &ledger.ExhaustedListParams{EndpointID: "shop/gone", Limit: 10})
				if err != nil || len(list) != 2 {
					t.Fatalf("ExhaustedList = %d, %v; want both held deliveries, recoverable", len(list), err)
				}
			})
		})
	}
}

// TestBreakerSharedByReplicas: two engines on one PostgreSQL hold and
// probe one breaker: probes are leased one at a time through the ledger,
// not one per engine.
func TestBreakerSharedByReplicas(t *testing.T) {
	store := pgtest.NewSchemaStore(t)
	rcv := newSwitchable(t, 503)
	watch, onBreaker := newBreakerWatch(func() { rcv.counting.Store(true) })
	a := run(t, engine.Options{Store: store, OnBreaker: onBreaker, SweepInterval: 50 * time.Millisecond})
	b := run(t, engine.Options{Store: store, SweepInterval: 50 * time.Millisecond})
	ctx := context.Background()
	ep := endpoint(t, "shop", "billing", rcv.URL, []string{"*"}, breakerPolicy())
	ep.MaxInFlight = 1
	if _, err := a.RegisterEndpoint(ctx, ep); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		publish(t, b, "shop", "order.created", `{"n":1}`)
	}
	receive(t, "the breaker to open", watch.opened)
	eventually(t, "five probes", func() bool {
		br, err := a.Breaker(ctx, "shop/billing")
		return err == nil && br.Probes >= 5
	})
	rcv.status.Store(204)
	receive(t, "the breaker to close", watch.closed)
	final, err := a.Breaker(ctx, "shop/billing")
	if err != nil {
		t.Fatal(err)
	}
	// Engine b may have had its one attempt on the wire when a opened the
	// breaker; every other answer while open is a probe.
	if got := rcv.answered(503); got < final.Probes-1 || got > final.Probes {
		t.Fatalf("the receiver answered 503 %d times while open, want the %d failed probes (+1 at most in flight at opening)", got, final.Probes-1)
	}
	eventually(t, "every delivery", func() bool {
		s, _ := a.EndpointStats(ctx, "shop/billing")
		return s.Delivered == 20
	})
}
