package engine_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
)

func TestMetrics(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	reg := prometheus.NewPedanticRegistry()
	metrics := engine.NewMetrics(reg, store)
	ok := newReceiver(t, func(int) int { return 204 })
	failing := newReceiver(t, func(int) int { return 500 })
	e := run(t, engine.Options{Store: store, Metrics: metrics})
	for _, ep := range []struct{ name, url string }{{"ok", ok.URL}, {"failing", failing.URL}} {
		if _, err := e.RegisterEndpoint(ctx, endpoint(t, "m", ep.name, ep.url, []string{"a." + ep.name}, policy(2, time.Millisecond))); err != nil {
			t.Fatal(err)
		}
	}
	publish(t, e, "m", "a.ok", `{}`)
	publish(t, e, "m", "a.failing", `{}`)
	eventually(t, "both deliveries settled", func() bool {
		s1, _ := e.EndpointStats(ctx, "m/ok")
		s2, _ := e.EndpointStats(ctx, "m/failing")
		return s1.Delivered == 1 && s2.ExhaustedUnresolved == 1
	})

	want := `
# HELP hookkeeper_delivery_attempts_total Delivery attempts by what followed them: delivered, accepted (awaiting acknowledgement), retry or exhausted.
# TYPE hookkeeper_delivery_attempts_total counter
hookkeeper_delivery_attempts_total{outcome="delivered"} 1
hookkeeper_delivery_attempts_total{outcome="exhausted"} 1
hookkeeper_delivery_attempts_total{outcome="retry"} 1
# HELP hookkeeper_deliveries_exhausted_total Deliveries given up on, by reason.
# TYPE hookkeeper_deliveries_exhausted_total counter
hookkeeper_deliveries_exhausted_total{reason="MaxAttempts"} 1
# HELP hookkeeper_events_published_total Events published, by result: created, duplicate (idempotent replay), conflict or error.
# TYPE hookkeeper_events_published_total counter
hookkeeper_events_published_total{result="created"} 2
# HELP hookkeeper_deliveries_exhausted_unresolved Exhausted deliveries waiting for a DeliveryRecovery, per endpoint.
# TYPE hookkeeper_deliveries_exhausted_unresolved gauge
hookkeeper_deliveries_exhausted_unresolved{endpoint="m/failing"} 1
hookkeeper_deliveries_exhausted_unresolved{endpoint="m/ok"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"hookkeeper_delivery_attempts_total", "hookkeeper_deliveries_exhausted_total",
		"hookkeeper_events_published_total", "hookkeeper_deliveries_exhausted_unresolved"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "hookkeeper_scheduling_lag_seconds", "hookkeeper_attempt_duration_seconds"); n != 2 {
		t.Fatalf("lag and duration histograms: %d series, want 2", n)
	}
}
