package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// gate holds one store call, once armed, until the test opens it.
type gate struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate() *gate { return &gate{entered: make(chan struct{}), release: make(chan struct{})} }

// pass holds the caller if the gate is armed (disarming it), until open.
func (g *gate) pass() {
	if g.armed.CompareAndSwap(true, false) {
		g.entered <- struct{}{}
		<-g.release
	}
}

// held waits until a call is held.
func (g *gate) held(t *testing.T, what string) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s never came", what)
	}
}

// open lets the held call (and any later one) through; calling it again is
// harmless. Register it as a cleanup after the engine's, so that it runs
// first: a failure must not leave Run inside a held call.
func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// heldClaims is a real store whose next DeliveryClaim, once its gate is
// armed, waits inside the call until the test opens the gate.
type heldClaims struct {
	ledger.Store
	gate  *gate
	ended atomic.Int32 // claims returned
}

func (s *heldClaims) DeliveryClaim(ctx context.Context, p *ledger.DeliveryClaimParams) ([]ledger.ClaimedDelivery, error) {
	s.gate.pass()
	defer s.ended.Add(1)
	return s.Store.DeliveryClaim(ctx, p)
}

// TestPublishHandsOffDuringAClaim: a claim in progress does not send new
// events through the claims. A publish to an endpoint with slots beyond
// what the claim may take of it is leased to the engine and sent while the
// claim still runs; a publish to an endpoint whose free slots the claim may
// take stays scheduled for the claims, so the two never count on the same
// slot, and nothing is leased only to be released again.
func TestPublishHandsOffDuringAClaim(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			store := &heldClaims{Store: sf.open(t), gate: newGate()}
			reg := prometheus.NewPedanticRegistry()
			rcv := newReceiver(t, func(int) int { return 204 })
			e := run(t, engine.Options{Store: store, Metrics: engine.NewMetrics(reg, store), IdleWait: 5 * time.Millisecond})
			t.Cleanup(store.gate.open)
			// A claim without a backlog may take up to half the free workers
			// (64 of the default 128), so 100 slots leave room for hand-offs
			// and 2 do not.
			roomy := endpoint(t, "handoff", "roomy", rcv.URL, []string{"roomy.created"}, policy(3, time.Second))
			roomy.MaxInFlight = 100
			tight := endpoint(t, "handoff", "tight", rcv.URL, []string{"tight.created"}, policy(3, time.Second))
			tight.MaxInFlight = 2
			for _, ep := range []ledger.Endpoint{roomy, tight} {
				if _, err := e.RegisterEndpoint(context.Background(), ep); err != nil {
					t.Fatal(err)
				}
			}

			// An engine starts with a backlog until its first claim finds
			// the queue drained: hold a later one.
			eventually(t, "a first claim", func() bool { return store.ended.Load() > 0 })
			store.gate.armed.Store(true)
			store.gate.held(t, "the claim")
			handed := publish(t, e, "handoff", "roomy.created", `{}`)
			if len(handed.Leased) != 1 {
				t.Fatalf("a publish during a claim leased %d deliveries to the engine; want 1", len(handed.Leased))
			}
			select {
			case id := <-rcv.received:
				if id != handed.Event.ID {
					t.Fatalf("the receiver got %s; want the handed-off event %s", id, handed.Event.ID)
				}
			case <-time.After(2 * time.Minute):
				t.Fatal("the handed-off event was not sent while the claim ran")
			}
			queued := publish(t, e, "handoff", "tight.created", `{}`)
			if len(queued.Leased) != 0 || queued.Deliveries[0].State != ledger.StateScheduled {
				t.Fatalf("a publish to an endpoint whose slots the claim holds: leased %d, state %s; want 0, scheduled",
					len(queued.Leased), queued.Deliveries[0].State)
			}

			store.gate.open()
			eventually(t, "the scheduled delivery claimed and sent", func() bool { return rcv.count(queued.Event.ID) == 1 })
			for _, reason := range []string{"max_in_flight", "workers_busy"} {
				if got := counterValue(t, reg, "hookkeeper_deliveries_released_total", reason); got != 0 {
					t.Fatalf("%v deliveries released (%s); want 0", got, reason)
				}
			}
		})
	}
}

// TestBusyEndpointWithoutLimitHandsOffDuringAClaim: a claim holds from
// hand-offs only the slots of endpoints with a limit of their own. An
// endpoint bounded by its fair share alone, busy with an attempt, still
// takes a publish's hand-off while a claim runs: holding it sent a share of
// a quiet namespace's events through the claims whenever a neighbour's
// retries kept the claims busy (issue #43's failing neighbour).
func TestBusyEndpointWithoutLimitHandsOffDuringAClaim(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			unblock := make(chan struct{})
			rcv := newReceiver(t, func(n int) int { return http.StatusNoContent })
			first := make(chan struct{}, 1)
			var held atomic.Bool
			blocking := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if held.CompareAndSwap(false, true) {
					first <- struct{}{}
					select {
					case <-unblock:
					case <-r.Context().Done():
					}
					w.WriteHeader(http.StatusNoContent)
					return
				}
				rcv.Config.Handler.ServeHTTP(w, r)
			}))
			t.Cleanup(blocking.Close)
			t.Cleanup(func() { close(unblock) })
			store := &heldClaims{Store: sf.open(t), gate: newGate()}
			e := run(t, engine.Options{Store: store, IdleWait: 5 * time.Millisecond, ShutdownGrace: time.Millisecond})
			t.Cleanup(store.gate.open)
			plain := endpoint(t, "handoff", "plain", blocking.URL, []string{"*"}, policy(3, time.Second))
			plain.MaxInFlight = 0
			if _, err := e.RegisterEndpoint(context.Background(), plain); err != nil {
				t.Fatal(err)
			}
			eventually(t, "a first claim", func() bool { return store.ended.Load() > 0 })

			// The endpoint is busy: its first attempt is held by the receiver.
			publish(t, e, "handoff", "order.created", `{}`)
			select {
			case <-first:
			case <-time.After(2 * time.Minute):
				t.Fatal("the first attempt never came")
			}
			store.gate.armed.Store(true)
			store.gate.held(t, "a claim that counts the busy endpoint")
			handed := publish(t, e, "handoff", "order.created", `{}`)
			if len(handed.Leased) != 1 {
				t.Fatalf("a publish to a busy endpoint without a limit of its own, during a claim: leased %d; want 1", len(handed.Leased))
			}
			eventually(t, "the handed-off event sent while the claim runs", func() bool { return rcv.count(handed.Event.ID) == 1 })
		})
	}
}

// heldRecords is a real store whose next write with attempt records, once
// its gate is armed, waits until the test opens the gate. Being a plain
// wrapper it is not a ledger.SerialWriter, so records have their own group
// commit and a held record does not hold up inserts.
type heldRecords struct {
	ledger.Store
	gate *gate
}

func (s *heldRecords) WriteMany(ctx context.Context, w *ledger.WriteBatch) (ledger.WriteResult, error) {
	if len(w.Attempts) > 0 {
		s.gate.pass()
	}
	return s.Store.WriteMany(ctx, w)
}

// TestSlowRecordHoldsNoWorker: once the receiver has answered, an attempt
// frees its worker and endpoint slot while its record commits, so a slow
// commit does not stop the next delivery from being sent. With one worker,
// the second event is sent while the first's record is still held.
func TestSlowRecordHoldsNoWorker(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			store := &heldRecords{Store: sf.open(t), gate: newGate()}
			rcv := newReceiver(t, func(int) int { return 204 })
			e := run(t, engine.Options{Store: store, Workers: 1})
			t.Cleanup(store.gate.open)
			ep := endpoint(t, "records", "orders", rcv.URL, []string{"order.created"}, policy(3, time.Second))
			if _, err := e.RegisterEndpoint(context.Background(), ep); err != nil {
				t.Fatal(err)
			}

			store.gate.armed.Store(true)
			first := publish(t, e, "records", "order.created", `{"n":1}`)
			store.gate.held(t, "the first attempt's record")
			second := publish(t, e, "records", "order.created", `{"n":2}`)
			eventually(t, "the second event sent while the first's record is held", func() bool {
				return rcv.count(second.Event.ID) == 1
			})
			if got := rcv.count(first.Event.ID); got != 1 {
				t.Fatalf("the first event was sent %d times; want 1", got)
			}

			store.gate.open()
			eventually(t, "both deliveries recorded", func() bool {
				s, _ := e.EndpointStats(context.Background(), ep.ID)
				return s.Delivered == 2
			})
		})
	}
}

// orderedStore is a real store that logs, in order, the claims it ends
// and the inserts it begins; its claim number hold passes through gate.
type orderedStore struct {
	ledger.Store
	hold     int
	gate     *gate
	claims   atomic.Int32
	mu       sync.Mutex
	log      []string
	inserted chan struct{}
}

func (s *orderedStore) note(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, what)
}

func (s *orderedStore) DeliveryClaim(ctx context.Context, p *ledger.DeliveryClaimParams) ([]ledger.ClaimedDelivery, error) {
	n := int(s.claims.Add(1))
	if n == s.hold {
		s.gate.pass()
	}
	got, err := s.Store.DeliveryClaim(ctx, p)
	s.note(fmt.Sprintf("claim %d took %d", n, len(got)))
	return got, err
}

func (s *orderedStore) WriteMany(ctx context.Context, w *ledger.WriteBatch) (ledger.WriteResult, error) {
	if len(w.Events) > 0 {
		s.note("insert")
		select {
		case s.inserted <- struct{}{}:
		default:
		}
	}
	return s.Store.WriteMany(ctx, w)
}

// TestPublishYieldsWhileClaimsAreBehind: after a claim takes a full batch
// (due work probably left behind), a publish waits for the claim loop's
// next round before it commits, so that ingest cannot outrun delivery; it
// is counted in hookkeeper_publish_yields_total. Two deliveries are due
// when Run starts and a claim takes one at a time: the first claim is
// full, and a publish made while the second is held commits only after
// that claim ended. A publish to another namespace, which the claim left
// nothing behind in, commits meanwhile (issue #43: one namespace's backlog
// does not hold another's publishes).
func TestPublishYieldsWhileClaimsAreBehind(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			store := &orderedStore{Store: sf.open(t), hold: 2, gate: newGate(), inserted: make(chan struct{}, 1)}
			store.gate.armed.Store(true)
			reg := prometheus.NewPedanticRegistry()
			rcv := newReceiver(t, func(int) int { return 204 })
			e, err := engine.New(engine.Options{Store: store, Metrics: engine.NewMetrics(reg, store),
				ClaimBatch: 1, IdleWait: 2 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			ep := endpoint(t, "yield", "orders", rcv.URL, []string{"order.created"}, policy(3, time.Second))
			if _, err := e.RegisterEndpoint(context.Background(), ep); err != nil {
				t.Fatal(err)
			}
			// Before Run, publishes cannot hand off: both wait for the claims.
			first := publish(t, e, "yield", "order.created", `{"n":1}`)
			second := publish(t, e, "yield", "order.created", `{"n":2}`)
			<-store.inserted // drained: the next signal is the third publish's

			startEngine(t, e)
			t.Cleanup(store.gate.open)
			store.gate.held(t, "the second claim")

			third := make(chan ledger.EventInsertResult, 1)
			go func() { third <- publish(t, e, "yield", "order.created", `{"n":3}`) }()
			eventually(t, "the publish yielding, or committing", func() bool {
				select {
				case <-store.inserted:
					t.Fatal("a publish committed while the claims were behind, before the claim in progress ended")
				default:
				}
				return counterTotal(t, reg, "hookkeeper_publish_yields_total") == 1
			})
			// A namespace the claim left nothing behind in does not wait
			// for its round: it commits while the claim is still held.
			quiet := publish(t, e, "quiet", "order.created", `{"n":4}`)
			if quiet.Err != nil || counterTotal(t, reg, "hookkeeper_publish_yields_total") != 1 {
				t.Fatalf("a publish to another namespace: %v, %v yields; want it committed without yielding", quiet.Err, counterTotal(t, reg, "hookkeeper_publish_yields_total"))
			}
			<-store.inserted // the quiet publish's insert
			store.gate.open()
			res := <-third
			store.mu.Lock()
			log := slices.Clone(store.log)
			store.mu.Unlock()
			// The claim loop may start its next claim before the publish
			// commits: the third insert need only follow the held claim.
			held := slices.Index(log, "claim 2 took 1")
			quietInsert := slices.Index(log[3:], "insert") + 3
			insert3 := slices.Index(log[quietInsert+1:], "insert") + quietInsert + 1
			if !slices.Equal(log[:3], []string{"insert", "insert", "claim 1 took 1"}) || held < 0 || quietInsert > held || insert3 < held {
				t.Fatalf("store calls %q; want two inserts, the full first claim, the quiet namespace's insert before the held claim ends, then the third insert", log)
			}
			eventually(t, "all three events delivered", func() bool {
				return rcv.count(first.Event.ID) == 1 && rcv.count(second.Event.ID) == 1 && rcv.count(res.Event.ID) == 1
			})
		})
	}
}

// counterTotal sums every series of a counter family (0 when absent).
func counterTotal(t *testing.T, reg *prometheus.Registry, family string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == family {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestPublishLeasesWithinEachEndpointsLimit: once Started, a publish hands
// its delivery to the engine while its endpoint has a free slot; at the
// limit it stays scheduled (never leased only to be released again), and
// another endpoint's publishes are handed off meanwhile.
func TestPublishLeasesWithinEachEndpointsLimit(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			store := &heldClaims{Store: sf.open(t), gate: newGate()} // counts claims
			reg := prometheus.NewPedanticRegistry()
			entered, release := make(chan struct{}, 100), make(chan struct{})
			var once sync.Once
			open := func() { once.Do(func() { close(release) }) }
			held := newReceiver(t, func(int) int {
				entered <- struct{}{}
				<-release
				return 204
			})
			quick := newReceiver(t, func(int) int { return 204 })
			e, err := engine.New(engine.Options{Store: store, Metrics: engine.NewMetrics(reg, store)})
			if err != nil {
				t.Fatal(err)
			}
			for name, url := range map[string]string{"one": held.URL, "other": quick.URL} {
				ep := endpoint(t, "limits", name, url, []string{name + ".created"}, policy(3, time.Second))
				ep.MaxInFlight = 1
				// The held attempt never times out while the test runs.
				ep.Policy.Backoff.AttemptTimeout = 10 * time.Minute
				if _, err := e.RegisterEndpoint(context.Background(), ep); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-e.Started():
				t.Fatal("Started before Run")
			default:
			}
			startEngine(t, e)
			t.Cleanup(open) // before Run's end waits for the held attempt
			select {
			case <-e.Started():
			case <-time.After(2 * time.Minute):
				t.Fatal("Run never started")
			}
			// The first event's attempt (handed off, or claimed if a claim
			// ran) holds the endpoint's only slot until the receiver
			// answers.
			publish(t, e, "limits", "one.created", `{}`)
			select {
			case <-entered:
			case <-time.After(2 * time.Minute):
				t.Fatal("the first event was never sent")
			}
			claims := store.ended.Load()
			atLimit := publish(t, e, "limits", "one.created", `{}`)
			if len(atLimit.Leased) != 0 || atLimit.Deliveries[0].State != ledger.StateScheduled {
				t.Fatalf("a publish to an endpoint at its limit: leased %d, state %s; want 0, scheduled",
					len(atLimit.Leased), atLimit.Deliveries[0].State)
			}
			// A claim round that found the endpoint full ends: the full
			// endpoint holds up no one else's hand-offs. (A claim in
			// progress holds the other endpoint's slot: a publish then
			// waits for the claims, and is sent at once.)
			eventually(t, "a claim round after the publish", func() bool { return store.ended.Load() > claims })
			eventually(t, "a publish to the other endpoint handed off", func() bool {
				return len(publish(t, e, "limits", "other.created", `{}`).Leased) == 1
			})
			open()
			eventually(t, "the scheduled delivery claimed and sent", func() bool { return held.count(atLimit.Event.ID) == 1 })
			for _, reason := range []string{"max_in_flight", "workers_busy"} {
				if got := counterValue(t, reg, "hookkeeper_deliveries_released_total", reason); got != 0 {
					t.Fatalf("%v deliveries released (%s); want 0", got, reason)
				}
			}
		})
	}
}
