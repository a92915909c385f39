package engine_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
)

// The last success and failure gauges report the ledger's times per
// endpoint, 0 for never: an endpoint that only succeeds, one that only
// fails and one never attempted.
func TestEndpointHealthMetrics(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	reg := prometheus.NewPedanticRegistry()
	e := run(t, engine.Options{Store: store, Metrics: engine.NewMetrics(reg, store)})
	ok := newReceiver(t, func(int) int { return 204 })
	failing := newReceiver(t, func(int) int { return 500 })
	for _, ep := range []struct{ name, url string }{{"ok", ok.URL}, {"failing", failing.URL}, {"idle", ok.URL}} {
		if _, err := e.RegisterEndpoint(ctx, endpoint(t, "h", ep.name, ep.url, []string{"a." + ep.name}, policy(1, time.Millisecond))); err != nil {
			t.Fatal(err)
		}
	}
	publish(t, e, "h", "a.ok", `{}`)
	publish(t, e, "h", "a.failing", `{}`)
	eventually(t, "both deliveries settled", func() bool {
		s1, _ := e.EndpointStats(ctx, "h/ok")
		s2, _ := e.EndpointStats(ctx, "h/failing")
		return s1.Delivered == 1 && s2.ExhaustedUnresolved == 1
	})

	success := gaugesByEndpoint(t, reg, "hookkeeper_endpoint_last_success_timestamp_seconds")
	failure := gaugesByEndpoint(t, reg, "hookkeeper_endpoint_last_failure_timestamp_seconds")
	for _, id := range []string{"h/ok", "h/failing", "h/idle"} {
		s, err := e.EndpointStats(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := success[id], seconds(s.LastSuccessAt); got != want {
			t.Errorf("%s last success: %v, want %v (ledger)", id, got, want)
		}
		if got, want := failure[id], seconds(s.LastFailureAt); got != want {
			t.Errorf("%s last failure: %v, want %v (ledger)", id, got, want)
		}
	}
	if success["h/ok"] == 0 || failure["h/ok"] != 0 || success["h/failing"] != 0 || failure["h/failing"] == 0 ||
		success["h/idle"] != 0 || failure["h/idle"] != 0 {
		t.Errorf("success %v, failure %v: want ok to have succeeded only, failing to have failed only, idle neither", success, failure)
	}
}

func seconds(t *time.Time) float64 {
	if t == nil {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

func gaugesByEndpoint(t *testing.T, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "endpoint" {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s series", name)
	}
	return out
}
