package engine_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

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
