package engine_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// limitReceiver is a receiver that takes its time (hold) and records when
// each request arrived and how many it was answering at once.
type limitReceiver struct {
	*httptest.Server
	mu               sync.Mutex
	arrivals         []time.Time
	current, busiest int
}

func newLimitReceiver(t *testing.T, hold time.Duration) *limitReceiver {
	r := &limitReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		r.arrivals = append(r.arrivals, time.Now())
		r.current++
		r.busiest = max(r.busiest, r.current)
		r.mu.Unlock()
		if hold > 0 {
			// A slow receiver, not a synchronization: the engines keep
			// trying to send while it answers.
			<-time.After(hold)
		}
		r.mu.Lock()
		r.current--
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *limitReceiver) received() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.arrivals)
}

// busiestSecond is the most requests that arrived within one second.
func (r *limitReceiver) busiestSecond() int {
	r.mu.Lock()
	at := slices.SortedFunc(slices.Values(r.arrivals), func(a, b time.Time) int { return a.Compare(b) })
	r.mu.Unlock()
	worst, j := 0, 0
	for i := range at {
		for at[i].Sub(at[j]) >= time.Second {
			j++
		}
		worst = max(worst, i-j+1)
	}
	return worst
}

// twoEngines runs two engines with shared limits on one ledger (on SQLite
// both on one store, the file serving one process; on PostgreSQL each on
// its own pool, as two replicas).
func twoEngines(t *testing.T, storeName string) (*engine.Engine, *engine.Engine) {
	var a, b ledger.Store
	if storeName == "sqlite" {
		a = stores()[0].open(t)
		b = a
	} else {
		schema := pgtest.NewSchema(t)
		a, b = pgtest.OpenStore(t, schema), pgtest.OpenStore(t, schema)
	}
	return run(t, engine.Options{Store: a, SharedLimits: true}), run(t, engine.Options{Store: b, SharedLimits: true})
}

// TestSharedLimitsHoldAcrossEngines: two engines on one ledger send an
// endpoint no more at once than its maxInFlight and, in any second, no
// more than its perSecond and one: what the receiver sees is what its
// owner wrote, not twice it.
func TestSharedLimitsHoldAcrossEngines(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			g := gomega.NewWithT(t)
			a, b := twoEngines(t, s.name)
			slow := newLimitReceiver(t, 25*time.Millisecond)
			paced := newLimitReceiver(t, 0)
			inFlight := endpoint(t, "ns", "slow", slow.URL, []string{"slow.*"}, policy(3, time.Millisecond))
			inFlight.MaxInFlight = 3
			rated := endpoint(t, "ns", "paced", paced.URL, []string{"paced.*"}, policy(3, time.Millisecond))
			rated.RateLimit = ledger.RateLimit{PerSecond: 20}
			for _, e := range []*engine.Engine{a, b} {
				for _, ep := range []ledger.Endpoint{inFlight, rated} {
					if _, err := e.RegisterEndpoint(t.Context(), ep); err != nil {
						t.Fatal(err)
					}
				}
			}
			const events = 40
			for i := range events {
				e := []*engine.Engine{a, b}[i%2]
				publish(t, e, "ns", "slow.created", fmt.Sprintf(`{"n":%d}`, i))
				publish(t, e, "ns", "paced.created", fmt.Sprintf(`{"n":%d}`, i))
			}
			g.Eventually(slow.received, 30*time.Second, 10*time.Millisecond).Should(gomega.Equal(events))
			g.Eventually(paced.received, 30*time.Second, 10*time.Millisecond).Should(gomega.Equal(events))
			if slow.busiest > 3 {
				t.Errorf("the receiver answered %d requests at once; maxInFlight is 3", slow.busiest)
			}
			if n := paced.busiestSecond(); n > 21 {
				t.Errorf("%d requests arrived within one second; perSecond is 20", n)
			}
		})
	}
}

// TestThrottledBacklogMetrics: the deliveries due and not sent of each
// endpoint, and how long the oldest has been due, for the shipped alert;
// a paused endpoint's wait on purpose and shows none.
func TestThrottledBacklogMetrics(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			store := s.open(t)
			reg := prometheus.NewPedanticRegistry()
			// Not running: nothing is sent, so what is due waits.
			e, err := engine.New(engine.Options{Store: store, Metrics: engine.NewMetrics(reg, store)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(e.Close)
			held := endpoint(t, "m", "held", "http://127.0.0.1:1/", []string{"a.held"}, policy(2, time.Millisecond))
			held.Owner = "team-a"
			paused := endpoint(t, "m", "paused", "http://127.0.0.1:1/", []string{"a.paused"}, policy(2, time.Millisecond))
			paused.Paused = true
			for _, ep := range []ledger.Endpoint{held, paused} {
				if _, err := e.RegisterEndpoint(t.Context(), ep); err != nil {
					t.Fatal(err)
				}
			}
			due := time.Now().Add(-10 * time.Minute)
			for i, typ := range []string{"a.held", "a.held", "a.paused"} {
				now := due.Add(time.Duration(i) * time.Second)
				if _, err := e.Publish(t.Context(), &ledger.EventInsertParams{
					ID: ledger.NewID("evt", now), Namespace: "m", Type: typ, Data: json.RawMessage(`{}`), Now: now,
				}); err != nil {
					t.Fatal(err)
				}
			}
			want := `
# HELP hookkeeper_endpoint_throttled_deliveries Deliveries due and not sent yet, per endpoint not paused, with the endpoint's owner.
# TYPE hookkeeper_endpoint_throttled_deliveries gauge
hookkeeper_endpoint_throttled_deliveries{endpoint="m/held",owner="team-a"} 2
hookkeeper_endpoint_throttled_deliveries{endpoint="m/paused",owner=""} 0
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hookkeeper_endpoint_throttled_deliveries"); err != nil {
				t.Fatal(err)
			}
			ages := map[string]float64{}
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range families {
				if f.GetName() != "hookkeeper_endpoint_throttled_oldest_age_seconds" {
					continue
				}
				for _, m := range f.GetMetric() {
					ages[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
				}
			}
			if ages["m/held"] < 600 || ages["m/paused"] != 0 {
				t.Fatalf("oldest ages %v, want m/held at least 600 s (due 10 minutes ago) and m/paused 0", ages)
			}
		})
	}
}

// TestIdleEndpointLeasesAgain: an engine whose endpoint had nothing to
// send for longer than a slot lease gives its slots back, and a retry
// coming due after that is still sent: the engine leases again. (With a
// clock that moves on steadily, the renewals once kept a lease of no
// slots alive and nothing was claimed again; test/enginehost's
// TestTwoProcessesShareOneRetryBudget caught it.)
func TestIdleEndpointLeasesAgain(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			store := s.open(t)
			clock := &manualClock{now: time.Now().UTC()}
			rcv := newReceiver(t, func(n int) int {
				if n == 1 {
					return http.StatusServiceUnavailable
				}
				return http.StatusNoContent
			})
			e := run(t, engine.Options{Store: store, Clock: clock, SharedLimits: true, IdleWait: 10 * time.Millisecond, SweepInterval: 10 * time.Millisecond})
			ep := endpoint(t, "ns", "idle", rcv.URL, []string{"*"}, policy(2, 30*time.Second))
			ep.MaxInFlight = 4
			if _, err := e.RegisterEndpoint(t.Context(), ep); err != nil {
				t.Fatal(err)
			}
			now := clock.Now()
			res, err := e.Publish(t.Context(), &ledger.EventInsertParams{ID: ledger.NewID("evt", now), Namespace: "ns", Type: "a.b", Data: json.RawMessage(`{}`), Now: now})
			if err != nil || res.Err != nil {
				t.Fatalf("publish: %v / %v", err, res.Err)
			}
			id := res.Event.ID
			// The first attempt recorded, not only received: its retry's due
			// time is taken when the engine decides, which must come before
			// the clock moves (else the retry is due 11 s later than the
			// test waits for).
			eventually(t, "the first attempt recorded", func() bool {
				st, err := e.EndpointStats(t.Context(), ep.ID)
				return err == nil && rcv.count(id) == 1 && st.LastFailureAt != nil && st.Pending == 1 && st.InFlight == 0
			})

			// Past the lease's life with nothing to send: the engine's share
			// goes back, which a holder of its own can see.
			clock.advance(11 * time.Second)
			probe := func(want int) int {
				got, err := store.EndpointSlotsLease(t.Context(), &ledger.SlotsLeaseParams{Holder: "probe", Now: clock.Now(), Until: clock.Now().Add(time.Second),
					Asks: []ledger.SlotAsk{{EndpointID: ep.ID, Max: 4, Want: want}}})
				if err != nil {
					t.Fatal(err)
				}
				return got[0]
			}
			eventually(t, "the engine's slots given back", func() bool { return probe(4) == 4 })
			probe(0)

			// The retry comes due: sent.
			clock.advance(20 * time.Second)
			eventually(t, "the retry", func() bool { return rcv.count(id) == 2 })
		})
	}
}
