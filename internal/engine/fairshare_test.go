package engine_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/engine"
)

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
			release := make(chan struct{})
			var hanging atomic.Int64
			hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hanging.Add(1)
				select {
				case <-release:
				case <-r.Context().Done():
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			t.Cleanup(hang.Close)
			t.Cleanup(func() { close(release) }) // before the server closes
			healthy := newReceiver(t, func(int) int { return http.StatusNoContent })

			const workers = 8
			e := run(t, engine.Options{Store: sf.open(t), Workers: workers, ShutdownGrace: time.Millisecond})
			ctx := context.Background()
			slow := policy(3, time.Millisecond)
			slow.Backoff.AttemptTimeout = 10 * time.Minute // they hang for the whole test
			for _, name := range []string{"h1", "h2", "h3", "h4"} {
				if _, err := e.RegisterEndpoint(ctx, endpoint(t, "na", name, hang.URL, []string{"*"}, slow)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := e.RegisterEndpoint(ctx, endpoint(t, "nb", "ok", healthy.URL, []string{"*"}, policy(3, time.Millisecond))); err != nil {
				t.Fatal(err)
			}
			for range 10 * workers {
				publish(t, e, "na", "load.hang", `{}`)
			}
			// na holds what it may: at most half the workers while it is
			// alone.
			eventually(t, "na's attempts hang", func() bool { return hanging.Load() >= workers/2 })
			var ids []string
			for range 20 {
				ids = append(ids, publish(t, e, "nb", "order.created", `{}`).Event.ID)
			}
			for _, id := range ids {
				eventually(t, "nb's event "+id+" delivered while na's attempts hang", func() bool { return healthy.count(id) == 1 })
			}
			if n := hanging.Load(); n > workers-1 {
				t.Errorf("na's hanging attempts reached %d of %d workers", n, workers)
			}
		})
	}
}
