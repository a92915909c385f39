package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
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
	for _, ep := range []struct{ name, url, owner string }{{"ok", ok.URL, ""}, {"failing", failing.URL, "team-payments"}} {
		cfg := endpoint(t, "m", ep.name, ep.url, []string{"a." + ep.name}, policy(2, time.Millisecond))
		cfg.Owner = ep.owner
		if _, err := e.RegisterEndpoint(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	publish(t, e, "m", "a.ok", `{}`)
	publish(t, e, "m", "a.failing", `{}`)
	// One endpoint matches a.ok: within a fan-out limit of 1. A second one
	// makes the next a.ok event a refusal.
	limited := func() ledger.EventInsertResult {
		now := time.Now()
		res, err := e.Publish(ctx, &ledger.EventInsertParams{
			ID: ledger.NewID("evt", now), Namespace: "m", Type: "a.ok", Data: json.RawMessage(`{}`), MaxFanOut: 1, Now: now,
		})
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		return res
	}
	if res := limited(); res.Err != nil {
		t.Fatalf("publish within the fan-out limit: %v", res.Err)
	}
	if _, err := e.RegisterEndpoint(ctx, endpoint(t, "m", "ok-too", ok.URL, []string{"a.ok"}, policy(2, time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	if res := limited(); !errors.Is(res.Err, ledger.ErrFanOutLimit) {
		t.Fatalf("publish matching 2 endpoints with MaxFanOut 1: %v, want ErrFanOutLimit", res.Err)
	}
	// The exhaustion is counted once its record committed, after the
	// counters it wrote are visible: wait for both.
	eventually(t, "both deliveries settled and the exhaustion counted", func() bool {
		s1, _ := e.EndpointStats(ctx, "m/ok")
		s2, _ := e.EndpointStats(ctx, "m/failing")
		return s1.Delivered == 2 && s2.ExhaustedUnresolved == 1 &&
			counterTotal(t, reg, "hookkeeper_deliveries_exhausted_total") == 1
	})

	want := `
# HELP hookkeeper_delivery_attempts_total Delivery attempts by what followed them: delivered, accepted (awaiting acknowledgement), retry or exhausted.
# TYPE hookkeeper_delivery_attempts_total counter
hookkeeper_delivery_attempts_total{outcome="delivered"} 2
hookkeeper_delivery_attempts_total{outcome="exhausted"} 1
hookkeeper_delivery_attempts_total{outcome="retry"} 1
# HELP hookkeeper_deliveries_exhausted_total Deliveries given up on, by reason (MaxAttempts, MaxAge, NonRetryable, Gone, AckRejected, AckTimeout) and the endpoint's owner (spec.owner; at most 64 owners per process, later ones as _other), counted once committed.
# TYPE hookkeeper_deliveries_exhausted_total counter
hookkeeper_deliveries_exhausted_total{owner="team-payments",reason="MaxAttempts"} 1
# HELP hookkeeper_events_published_total Events published, by result: created, duplicate (idempotent replay), conflict (idempotency key reused with another body), fan_out_limit (refused: matches more endpoints than --max-fan-out) or error.
# TYPE hookkeeper_events_published_total counter
hookkeeper_events_published_total{result="created"} 3
hookkeeper_events_published_total{result="fan_out_limit"} 1
# HELP hookkeeper_deliveries_exhausted_unresolved Exhausted deliveries waiting for a DeliveryRecovery, per endpoint, with the endpoint's owner (spec.owner).
# TYPE hookkeeper_deliveries_exhausted_unresolved gauge
hookkeeper_deliveries_exhausted_unresolved{endpoint="m/failing",owner="team-payments"} 1
hookkeeper_deliveries_exhausted_unresolved{endpoint="m/ok",owner=""} 0
hookkeeper_deliveries_exhausted_unresolved{endpoint="m/ok-too",owner=""} 0
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
