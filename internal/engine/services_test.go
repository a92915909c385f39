package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// manualClock is a clock the test moves.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestRetentionDrainsABacklog: more expired events than one retention
// round removes are all gone without waiting for further PruneIntervals,
// so that retention keeps up with a sustained ingest rate.
func TestRetentionDrainsABacklog(t *testing.T) {
	const events = 7_000 // one round removes at most 10 batches of 500
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := sf.open(t)
			start := time.Now()
			for i := 0; i < events; i += 1000 {
				batch := make([]*ledger.EventInsertParams, 1000)
				for j := range batch {
					batch[j] = &ledger.EventInsertParams{ID: ledger.NewID("evt", start), Namespace: "quiet",
						Type: "order.created", Data: json.RawMessage(`{}`), Now: start}
				}
				if _, err := store.EventInsertMany(ctx, batch); err != nil {
					t.Fatal(err)
				}
			}

			clock := &manualClock{now: start}
			swept := make(chan struct{}, 1)
			reg := prometheus.NewPedanticRegistry()
			run(t, engine.Options{Store: &sweepSignal{Store: store, swept: swept}, Clock: clock, Metrics: engine.NewMetrics(reg, store),
				SweepInterval: 5 * time.Millisecond, PruneInterval: time.Hour, CompactInterval: time.Hour,
				DefaultPayloadRetention: time.Minute, DefaultEvidenceRetention: time.Minute})

			// Once the background work runs, one PruneInterval passes and
			// every event is past its retention. The clock stands still
			// from here: only backlog rounds can remove more than the
			// first round's 5,000.
			<-swept
			clock.advance(time.Hour)
			eventually(t, "every expired event pruned", func() bool { return prunedEvents(t, reg) == events })
		})
	}
}

// sweepSignal reports the engine's first background sweep, after which
// the engine has read the clock its retention rounds are paced from.
type sweepSignal struct {
	ledger.Store
	swept chan struct{}
}

func (s *sweepSignal) SecretsScrubDue(ctx context.Context, now time.Time, limit int) (int, error) {
	select {
	case s.swept <- struct{}{}:
	default:
	}
	return s.Store.SecretsScrubDue(ctx, now, limit)
}

// prunedEvents reads hookkeeper_retention_pruned_total{kind="event"}.
func prunedEvents(t *testing.T, reg *prometheus.Registry) int {
	return int(counterValue(t, reg, "hookkeeper_retention_pruned_total", "event"))
}

// TestFullEndpointsDoNotKeepTheClaimLoopPolling: while an endpoint is at
// its in-flight limit, the claim loop asks for the next due delivery
// without it, so that its backlog (due now) does not make the loop claim
// every few milliseconds; the attempt that frees a slot wakes the loop.
func TestFullEndpointsDoNotKeepTheClaimLoopPolling(t *testing.T) {
	store := stores()[0].open(t)
	rec := &nextDueRecorder{Store: store, excluded: make(chan []string, 100)}
	rcv := newHeldReceiver(t)
	e := run(t, engine.Options{Store: rec})
	ep := endpoint(t, "full", "orders", rcv.URL, []string{"order.created"}, policy(3, time.Second))
	ep.MaxInFlight = 1
	if _, err := e.RegisterEndpoint(context.Background(), ep); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		publish(t, e, "full", "order.created", `{}`)
	}
	<-rcv.arrived // the endpoint is full now; two deliveries wait, due
	deadline := time.After(30 * time.Second)
	for asked := false; !asked; {
		select {
		case excluded := <-rec.excluded:
			asked = slices.Contains(excluded, "full/orders")
		case <-deadline:
			t.Fatal("the claim loop never asked for the next due delivery without the full endpoint")
		}
	}
	close(rcv.release)
	eventually(t, "the backlog delivered once slots free up", func() bool { return rcv.requests.Load() == 3 })
}

// nextDueRecorder reports the endpoints each NextDueAt call excludes.
type nextDueRecorder struct {
	ledger.Store
	excluded chan []string
}

func (r *nextDueRecorder) NextDueAt(ctx context.Context, exclude []string) (time.Time, bool, error) {
	select {
	case r.excluded <- slices.Clone(exclude):
	default: // the test stopped listening
	}
	return r.Store.NextDueAt(ctx, exclude)
}

// TestClaimsTakeNoMoreThanFreeSlots: an endpoint with a backlog and two
// free slots yields two deliveries per claim, not a batch of which all but
// two would be released again, one transaction each.
func TestClaimsTakeNoMoreThanFreeSlots(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			store := sf.open(t)
			reg := prometheus.NewPedanticRegistry()
			rcv := newHeldReceiver(t)
			e := run(t, engine.Options{Store: store, Metrics: engine.NewMetrics(reg, store)})
			ep := endpoint(t, "slots", "orders", rcv.URL, []string{"order.created"}, policy(3, time.Second))
			ep.MaxInFlight = 2
			if _, err := e.RegisterEndpoint(context.Background(), ep); err != nil {
				t.Fatal(err)
			}
			const n = 20
			for range n {
				publish(t, e, "slots", "order.created", `{}`)
			}
			<-rcv.arrived
			<-rcv.arrived
			close(rcv.release)
			eventually(t, "the backlog delivered", func() bool {
				s, _ := e.EndpointStats(context.Background(), "slots/orders")
				return s.Delivered == n
			})
			if got := counterValue(t, reg, "hookkeeper_deliveries_released_total", "max_in_flight"); got != 0 {
				t.Fatalf("%v deliveries claimed beyond the endpoint's free slots and released again; want 0", got)
			}
		})
	}
}

// counterValue reads the series of a counter family whose one label has
// value label (0 when absent).
func counterValue(t *testing.T, reg *prometheus.Registry, family, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
