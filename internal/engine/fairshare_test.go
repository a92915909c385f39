package engine_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookkeeper/hookkeeper/internal/engine"
)

// twoTeams is the fair-share tests' cluster: namespace "na" with four
// endpoints whose receiver hangs until the test ends, and namespace "nb"
// with one healthy endpoint.
type twoTeams struct {
	hanging atomic.Int64 // requests na's receiver has taken
	healthy *receiver
	hangURL string
}

func newTwoTeams(t *testing.T) *twoTeams {
	t.Helper()
	tt := &twoTeams{healthy: newReceiver(t, func(int) int { return http.StatusNoContent })}
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tt.hanging.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) }) // before the server closes
	tt.hangURL = hang.URL
	return tt
}

// register registers both teams' endpoints with e; na's have the in-flight
// limit maxInFlight (0: none, the shares bound them alone).
func (tt *twoTeams) register(t *testing.T, e *engine.Engine, maxInFlight int) {
	t.Helper()
	ctx := context.Background()
	slow := policy(3, time.Millisecond)
	slow.Backoff.AttemptTimeout = 10 * time.Minute // they hang for the whole test
	for _, name := range []string{"h1", "h2", "h3", "h4"} {
		ep := endpoint(t, "na", name, tt.hangURL, []string{"*"}, slow)
		ep.MaxInFlight = maxInFlight
		if _, err := e.RegisterEndpoint(ctx, ep); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.RegisterEndpoint(ctx, endpoint(t, "nb", "ok", tt.healthy.URL, []string{"*"}, policy(3, time.Millisecond))); err != nil {
		t.Fatal(err)
	}
}

// nbServed publishes n events of nb and waits for each to be delivered
// while na's attempts hang, which must hold no more than na's share.
func (tt *twoTeams) nbServed(t *testing.T, e *engine.Engine, n, workers int) {
	t.Helper()
	var ids []string
	for range n {
		ids = append(ids, publish(t, e, "nb", "order.created", `{}`).Event.ID)
	}
	for _, id := range ids {
		eventually(t, "nb's event "+id+" delivered while na's attempts hang", func() bool { return tt.healthy.count(id) == 1 })
	}
	if n := tt.hanging.Load(); n > int64(workers/2) {
		t.Errorf("na's hanging attempts reached %d of %d workers; its share is %d", n, workers, workers/2)
	}
}

// TestHangingNamespaceLeavesOthersTheirShare: namespace "na"'s receivers
// hang (until the test ends) and it publishes far more than the engine
// has workers; namespace "nb", publishing after it, still gets every event
// delivered while na's attempts hang, on both stores. Without fair shares
// na's attempts hold every worker and its backlog, due earlier, is
// claimed first: nb would get nothing until na's attempts time out.
func TestHangingNamespaceLeavesOthersTheirShare(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			tt := newTwoTeams(t)
			const workers = 8
			e := run(t, engine.Options{Store: sf.open(t), Workers: workers, ShutdownGrace: time.Millisecond})
			tt.register(t, e, 16)
			for range 10 * workers {
				publish(t, e, "na", "load.hang", `{}`)
			}
			// na holds what it may: at most half the workers while it is
			// alone.
			eventually(t, "na's attempts hang", func() bool { return tt.hanging.Load() >= workers/2 })
			tt.nbServed(t, e, 20, workers)
		})
	}
}

// TestClaimRacingHandOffsKeepsTheShare: a claim reads the shares before it
// runs, and publishes hand their deliveries off meanwhile. A namespace whose
// hand-offs reach its share while a claim is in progress gets no more from
// that claim: what it claimed is released (fair_share), and another
// namespace still finds workers. Without the check where claimed attempts
// start, na held every worker with attempts that hang, and nb waited until
// they timed out.
func TestClaimRacingHandOffsKeepsTheShare(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			tt := newTwoTeams(t)
			const workers = 8
			store := &heldClaims{Store: sf.open(t), gate: newGate()}
			reg := prometheus.NewPedanticRegistry()
			// The engine's clock stands an hour ahead: what is published
			// while the claim is held is due by the time the claim reads by.
			clock := &manualClock{now: time.Now().UTC().Add(time.Hour)}
			e := run(t, engine.Options{Store: store, Metrics: engine.NewMetrics(reg, store), Workers: workers, Clock: clock,
				IdleWait: 5 * time.Millisecond, ShutdownGrace: time.Millisecond})
			t.Cleanup(store.gate.open)
			// Without an in-flight limit of their own, na's endpoints are
			// bounded by the shares only, which the claim does not hold
			// from hand-offs.
			tt.register(t, e, 0)

			// Hold a claim that has read the shares while na held nothing.
			eventually(t, "a first claim", func() bool { return store.ended.Load() > 0 })
			store.gate.armed.Store(true)
			store.gate.held(t, "the claim")
			// na's first event is handed off to its four endpoints, which
			// is its share (8/2); the next ones wait in the ledger.
			for range 3 {
				publish(t, e, "na", "load.hang", `{}`)
			}
			eventually(t, "na's hand-offs hang", func() bool { return tt.hanging.Load() == workers/2 })
			ended := store.ended.Load()
			store.gate.open()
			eventually(t, "the held claim returned", func() bool { return store.ended.Load() > ended })

			tt.nbServed(t, e, 1, workers)
			eventually(t, "what na claimed beyond its share released", func() bool {
				return counterValue(t, reg, "hookkeeper_deliveries_released_total", "fair_share") > 0
			})
		})
	}
}

// TestBacklogAtStartLeavesOthersTheirShare: an engine that starts with a
// namespace's backlog in the ledger (accepted before Run, or left by a
// process that stopped) claims of it only that namespace's share, not
// every free worker: the first claim, with nothing held yet, counts the
// namespace as the holder it becomes. Before, it took all 8 workers for
// na's hanging endpoints and nb got none until they timed out (a flake of
// TestHangingNamespaceLeavesOthersTheirShare under load, when its
// publishes came before the engine's first claim).
func TestBacklogAtStartLeavesOthersTheirShare(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			tt := newTwoTeams(t)
			const workers = 8
			e, err := engine.New(engine.Options{Store: sf.open(t), Workers: workers, ShutdownGrace: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			tt.register(t, e, 16)
			for range 2 * workers {
				publish(t, e, "na", "load.hang", `{}`)
			}
			startEngine(t, e)
			eventually(t, "na's attempts hang", func() bool { return tt.hanging.Load() >= workers/2 })
			tt.nbServed(t, e, 1, workers)
		})
	}
}
