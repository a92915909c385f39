package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// heldClaims is a real store whose next DeliveryClaim, once armed, waits
// inside the call until the test releases it.
type heldClaims struct {
	ledger.Store
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
	ended   atomic.Int32 // claims returned
}

func (s *heldClaims) DeliveryClaim(ctx context.Context, p *ledger.DeliveryClaimParams) ([]ledger.ClaimedDelivery, error) {
	if s.armed.CompareAndSwap(true, false) {
		s.entered <- struct{}{}
		<-s.release
	}
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
			store := &heldClaims{Store: sf.open(t), entered: make(chan struct{}), release: make(chan struct{})}
			var released atomic.Bool
			releaseClaim := func() {
				if released.CompareAndSwap(false, true) {
					close(store.release)
				}
			}
			reg := prometheus.NewPedanticRegistry()
			rcv := newReceiver(t, func(int) int { return 204 })
			e := run(t, engine.Options{Store: store, Metrics: engine.NewMetrics(reg, store), IdleWait: 5 * time.Millisecond})
			t.Cleanup(releaseClaim) // runs before the engine's cleanup: a failure must not leave Run inside the claim
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
			store.armed.Store(true)
			select {
			case <-store.entered:
			case <-time.After(2 * time.Minute):
				t.Fatal("the claim loop never claimed")
			}
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

			releaseClaim()
			eventually(t, "the scheduled delivery claimed and sent", func() bool { return rcv.count(queued.Event.ID) == 1 })
			for _, reason := range []string{"max_in_flight", "workers_busy"} {
				if got := counterValue(t, reg, "hookkeeper_deliveries_released_total", reason); got != 0 {
					t.Fatalf("%v deliveries released (%s); want 0", got, reason)
				}
			}
		})
	}
}

// heldRecords is a real store whose next write with attempt records, once
// armed, waits until the test releases it. Being a plain wrapper it is not
// a ledger.SerialWriter, so records have their own group commit and a held
// record does not hold up inserts.
type heldRecords struct {
	ledger.Store
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (s *heldRecords) WriteMany(ctx context.Context, w *ledger.WriteBatch) (ledger.WriteResult, error) {
	if len(w.Attempts) > 0 && s.armed.CompareAndSwap(true, false) {
		s.entered <- struct{}{}
		<-s.release
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
			store := &heldRecords{Store: sf.open(t), entered: make(chan struct{}), release: make(chan struct{})}
			var released atomic.Bool
			releaseRecord := func() {
				if released.CompareAndSwap(false, true) {
					close(store.release)
				}
			}
			rcv := newReceiver(t, func(int) int { return 204 })
			e := run(t, engine.Options{Store: store, Workers: 1})
			t.Cleanup(releaseRecord) // runs before the engine's cleanup: a failure must not leave a record held
			ep := endpoint(t, "records", "orders", rcv.URL, []string{"order.created"}, policy(3, time.Second))
			if _, err := e.RegisterEndpoint(context.Background(), ep); err != nil {
				t.Fatal(err)
			}

			store.armed.Store(true)
			first := publish(t, e, "records", "order.created", `{"n":1}`)
			select {
			case <-store.entered:
			case <-time.After(2 * time.Minute):
				t.Fatal("the first attempt was never recorded")
			}
			second := publish(t, e, "records", "order.created", `{"n":2}`)
			eventually(t, "the second event sent while the first's record is held", func() bool {
				return rcv.count(second.Event.ID) == 1
			})
			if got := rcv.count(first.Event.ID); got != 1 {
				t.Fatalf("the first event was sent %d times; want 1", got)
			}

			releaseRecord()
			eventually(t, "both deliveries recorded", func() bool {
				s, _ := e.EndpointStats(context.Background(), ep.ID)
				return s.Delivered == 2
			})
		})
	}
}

// orderedStore is a real store that logs, in order, the claims it ends
// and the inserts it begins; its nth claim (when hold is set) waits in the
// call until the test releases it.
type orderedStore struct {
	ledger.Store
	hold     int
	claims   atomic.Int32
	entered  chan struct{}
	release  chan struct{}
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
		s.entered <- struct{}{}
		<-s.release
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
// that claim ended.
func TestPublishYieldsWhileClaimsAreBehind(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			store := &orderedStore{Store: sf.open(t), hold: 2, entered: make(chan struct{}),
				release: make(chan struct{}), inserted: make(chan struct{}, 1)}
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

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				if err := e.Run(ctx); err != nil {
					t.Errorf("Run: %v", err)
				}
				e.Close()
			}()
			var released atomic.Bool
			releaseClaim := func() {
				if released.CompareAndSwap(false, true) {
					close(store.release)
				}
			}
			t.Cleanup(func() { releaseClaim(); cancel(); <-done })
			select {
			case <-store.entered:
			case <-time.After(2 * time.Minute):
				t.Fatal("the second claim never came")
			}

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
			releaseClaim()
			res := <-third
			store.mu.Lock()
			log := slices.Clone(store.log)
			store.mu.Unlock()
			// The claim loop may start its next claim before the publish
			// commits: the third insert need only follow the held claim.
			held := slices.Index(log, "claim 2 took 1")
			insert3 := slices.Index(log[2:], "insert") + 2
			if !slices.Equal(log[:3], []string{"insert", "insert", "claim 1 took 1"}) || held < 0 || insert3 < held {
				t.Fatalf("store calls %q; want two inserts, the full first claim, the held claim, then the third insert", log)
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
