package engine_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// An event's type contract with the real engine, both stores and a real
// receiver on loopback (docs/adr/0038): nothing is sent past ValidUntil,
// a type's policy replaces the endpoint's, and every attempt tells the
// receiver until when the event may come back.

// headerReceiver answers status and records, per webhook-id, how many
// requests came and the Hookkeeper-Replay-Until of the last.
type headerReceiver struct {
	*httptest.Server
	status atomic.Int32
	mu     sync.Mutex
	count  map[string]int
	until  map[string]string
}

func newHeaderReceiver(t *testing.T, status int) *headerReceiver {
	r := &headerReceiver{count: map[string]int{}, until: map[string]string{}}
	r.status.Store(int32(status))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id := req.Header.Get("webhook-id")
		r.mu.Lock()
		r.count[id]++
		r.until[id] = req.Header.Get(wire.ReplayUntilHeader)
		r.mu.Unlock()
		w.WriteHeader(int(r.status.Load()))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *headerReceiver) requests(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count[id]
}

func (r *headerReceiver) replayUntil(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.until[id]
}

// contractPolicy retries every minute (of the test's clock) for up to 100
// attempts, without a breaker, replayable for 72h.
func contractPolicy() ledger.Policy {
	return ledger.Policy{
		Backoff: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: time.Minute, MaxAttempts: 100,
			AttemptTimeout: 5 * time.Second},
		RetryOn:      []string{"NetworkError", "Timeout", "5xx"},
		ReplayWindow: 72 * time.Hour,
		Breaker:      &ledger.BreakerPolicy{Disabled: true},
	}
}

// publishContract publishes an event of type typ in shop at now with the
// contract set by edit.
func publishContract(t *testing.T, e *engine.Engine, now time.Time, edit func(p *ledger.EventInsertParams)) ledger.EventInsertResult {
	t.Helper()
	p := &ledger.EventInsertParams{ID: ledger.NewID("evt", now), Namespace: "shop", Type: "order.paid",
		Data: json.RawMessage(`{"amount":42}`), Now: now}
	if edit != nil {
		edit(p)
	}
	res, err := e.Publish(context.Background(), p)
	if err != nil || res.Err != nil {
		t.Fatalf("publish: %v / %v", err, res.Err)
	}
	return res
}

// wantExpired waits until delivery id is cancelled Expired.
func wantExpired(t *testing.T, store ledger.Store, id string) ledger.Delivery {
	t.Helper()
	var d ledger.Delivery
	eventually(t, "delivery "+id+" cancelled Expired", func() bool {
		var err error
		d, err = store.DeliveryGet(context.Background(), id)
		return err == nil && d.State == ledger.StateCancelled
	})
	if d.ExhaustReason != ledger.CancelExpired || d.Resolution != ledger.ResolutionNone {
		t.Fatalf("cancelled delivery %+v, want reason Expired and no resolution", d)
	}
	return d
}

func TestEventContracts(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Run("a delivery not delivered by ValidUntil is cancelled at its next claim, never sent late", func(t *testing.T) {
				t.Parallel()
				store := sf.open(t)
				clock := &manualClock{now: time.Now().UTC()}
				rcv := newHeaderReceiver(t, 503)
				reg := prometheus.NewPedanticRegistry()
				// No sweep: only the check before sending can cancel it.
				e := run(t, engine.Options{Store: store, Clock: clock, IdleWait: 10 * time.Millisecond,
					SweepInterval: time.Hour, Metrics: engine.NewMetrics(reg, store)})
				ctx := context.Background()
				if _, err := e.RegisterEndpoint(ctx, endpoint(t, "shop", "billing", rcv.URL, []string{"*"}, contractPolicy())); err != nil {
					t.Fatal(err)
				}
				validUntil := clock.Now().Add(5 * time.Minute)
				res := publishContract(t, e, clock.Now(), func(p *ledger.EventInsertParams) { p.ValidUntil = &validUntil })
				id := res.Event.ID
				eventually(t, "the first attempt", func() bool { return rcv.requests(id) == 1 })
				d := res.Deliveries[0]
				eventually(t, "the retry scheduled", func() bool {
					got, err := store.DeliveryGet(ctx, d.ID)
					return err == nil && got.State == ledger.StateScheduled && got.Attempts == 1
				})

				// The receiver is back, but only after the bound: the
				// retry, due since, is cancelled instead of sent.
				rcv.status.Store(204)
				clock.advance(10 * time.Minute)
				got := wantExpired(t, store, d.ID)
				if got.Attempts != 1 || got.TerminalAt == nil || got.TerminalAt.Before(validUntil) {
					t.Fatalf("expired delivery %+v", got)
				}
				// A later event is delivered: the loop ran past the expired
				// one, which never arrived again.
				next := publishContract(t, e, clock.Now(), nil)
				eventually(t, "the next event", func() bool { return rcv.requests(next.Event.ID) == 1 })
				if n := rcv.requests(id); n != 1 {
					t.Fatalf("the expired event arrived %d times, want only its first attempt", n)
				}
				if n := counterValue(t, reg, "hookkeeper_deliveries_expired_total", ""); n != 1 {
					t.Fatalf("hookkeeper_deliveries_expired_total = %v, want 1", n)
				}
				st, err := store.EndpointStats(ctx, "shop/billing")
				if err != nil || st.Cancelled != 1 || st.Pending != 0 {
					t.Fatalf("stats %+v, %v", st, err)
				}
			})

			t.Run("the sweep cancels what a paused endpoint holds past ValidUntil", func(t *testing.T) {
				t.Parallel()
				store := sf.open(t)
				clock := &manualClock{now: time.Now().UTC()}
				rcv := newHeaderReceiver(t, 204)
				e := run(t, engine.Options{Store: store, Clock: clock, IdleWait: 10 * time.Millisecond,
					SweepInterval: 10 * time.Millisecond})
				ctx := context.Background()
				ep := endpoint(t, "shop", "billing", rcv.URL, []string{"*"}, contractPolicy())
				ep.Paused = true
				if _, err := e.RegisterEndpoint(ctx, ep); err != nil {
					t.Fatal(err)
				}
				validUntil := clock.Now().Add(time.Minute)
				expiring := publishContract(t, e, clock.Now(), func(p *ledger.EventInsertParams) { p.ValidUntil = &validUntil })
				lasting := publishContract(t, e, clock.Now(), func(p *ledger.EventInsertParams) {
					later := validUntil.Add(time.Hour)
					p.ValidUntil = &later
				})
				clock.advance(2 * time.Minute)
				wantExpired(t, store, expiring.Deliveries[0].ID)

				ep.Paused = false
				if _, err := e.RegisterEndpoint(ctx, ep); err != nil {
					t.Fatal(err)
				}
				eventually(t, "the event still valid delivered on resume", func() bool { return rcv.requests(lasting.Event.ID) == 1 })
				if n := rcv.requests(expiring.Event.ID); n != 0 {
					t.Fatalf("the expired event arrived %d times after the endpoint resumed", n)
				}
			})

			t.Run("a type's policy replaces the endpoint's", func(t *testing.T) {
				t.Parallel()
				store := sf.open(t)
				var answers sync.Map // webhook-id -> *atomic.Int32
				rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
					n, _ := answers.LoadOrStore(req.Header.Get("webhook-id"), new(atomic.Int32))
					if n.(*atomic.Int32).Add(1) < 3 {
						w.WriteHeader(http.StatusServiceUnavailable)
						return
					}
					w.WriteHeader(http.StatusNoContent)
				}))
				t.Cleanup(rcv.Close)
				e := run(t, engine.Options{Store: store})
				ctx := context.Background()
				// The endpoint gives up at the first failure; the type's
				// policy tries three times.
				if _, err := e.RegisterEndpoint(ctx, endpoint(t, "shop", "billing", rcv.URL, []string{"*"}, policy(1, time.Millisecond))); err != nil {
					t.Fatal(err)
				}
				typed := policy(3, time.Millisecond)
				typed.Name, typed.Generation = "patient", 4
				withPolicy := publishContract(t, e, time.Now(), func(p *ledger.EventInsertParams) { p.PolicyOverride = &typed })
				plain := publishContract(t, e, time.Now(), nil)
				for _, tc := range []struct {
					res      ledger.EventInsertResult
					state    ledger.DeliveryState
					attempts int
				}{{withPolicy, ledger.StateDelivered, 3}, {plain, ledger.StateExhausted, 1}} {
					id := tc.res.Deliveries[0].ID
					var d ledger.Delivery
					eventually(t, "delivery "+id+" settled", func() bool {
						var err error
						d, err = store.DeliveryGet(ctx, id)
						return err == nil && d.State.Terminal()
					})
					if d.State != tc.state || d.Attempts != tc.attempts {
						t.Fatalf("delivery %s: %s after %d attempts, want %s after %d", id, d.State, d.Attempts, tc.state, tc.attempts)
					}
				}
			})

			t.Run("every attempt carries Hookkeeper-Replay-Until", func(t *testing.T) {
				t.Parallel()
				store := sf.open(t)
				start := time.Now().UTC().Truncate(time.Second)
				clock := &manualClock{now: start}
				rcv := newHeaderReceiver(t, 204)
				e := run(t, engine.Options{Store: store, Clock: clock, IdleWait: 10 * time.Millisecond})
				ctx := context.Background()
				if _, err := e.RegisterEndpoint(ctx, endpoint(t, "shop", "billing", rcv.URL, []string{"*"}, contractPolicy())); err != nil {
					t.Fatal(err)
				}
				bound := start.Add(time.Hour + 300*time.Millisecond)
				short := contractPolicy()
				short.ReplayWindow, short.Backoff.AttemptTimeout = 2*time.Hour, 10*time.Second
				for _, tc := range []struct {
					name string
					edit func(p *ledger.EventInsertParams)
					want time.Time
				}{
					{"the endpoint's window, and the attempt timeout", nil, start.Add(72*time.Hour + 5*time.Second)},
					{"bounded by ValidUntil, rounded up to the second", func(p *ledger.EventInsertParams) { p.ValidUntil = &bound },
						start.Add(time.Hour + 6*time.Second)},
					{"the type's window and timeout", func(p *ledger.EventInsertParams) { p.PolicyOverride = &short },
						start.Add(2*time.Hour + 10*time.Second)},
				} {
					res := publishContract(t, e, clock.Now(), tc.edit)
					eventually(t, tc.name, func() bool { return rcv.requests(res.Event.ID) == 1 })
					got := rcv.replayUntil(res.Event.ID)
					if want := tc.want.Format(time.RFC3339); got != want {
						t.Errorf("%s: %s = %q, want %q", tc.name, wire.ReplayUntilHeader, got, want)
					}
				}
			})
		})
	}
}
