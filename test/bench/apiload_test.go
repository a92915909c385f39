package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseRequestTotalsSumsByResourceAndVerb(t *testing.T) {
	body := `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="GET",version="v1"} 12
apiserver_request_total{code="404",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="GET",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="hookkeeper.dev",resource="webhookendpoints",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 7
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 2
apiserver_request_duration_seconds_count{resource="secrets",verb="GET"} 99
`
	r, err := parseRequestTotals(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.of("secrets", "GET"); got != 15 {
		t.Errorf("secrets GET = %v, want 15", got)
	}
	if got := r.of("webhookendpoints/status", "PUT", "PATCH"); got != 7 {
		t.Errorf("status writes = %v, want 7", got)
	}
	if got := r.total(); got != 24 {
		t.Errorf("total = %v, want 24", got)
	}
	later := requests{{"secrets", "GET"}: 20, {"webhookendpoints/status", "PUT"}: 7}
	w := apiloadWindow{length: 5 * time.Second, delta: later.sub(r)}
	if got := w.rate("secrets", "GET"); got != 1 {
		t.Errorf("rate = %v, want 1", got)
	}
	if _, ok := w.delta[reqKey{"webhookendpoints/status", "PUT"}]; ok {
		t.Error("an unchanged count is in the delta")
	}
}

func TestStatusChangesWithinAMinute(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration, fields ...string) statusChange {
		return statusChange{at: t0.Add(d), fields: fields}
	}
	sw := &statusWatch{cancel: func() {}, changes: map[string][]statusChange{
		"a": {at(-10 * time.Second), at(time.Second, "deliveries.delivered"), at(time.Second+59500*time.Millisecond, "deliveries.delivered")},
		"b": {at(2 * time.Second)},
	}}
	c := sw.between(t0, t0.Add(3*time.Minute))
	if c.total != 3 || c.shortestGap != 59500*time.Millisecond || !c.aMinuteApart() {
		t.Errorf("changes = %+v, a minute apart %v; want 3, 59.5s, true", c, c.aMinuteApart())
	}
	sw.changes["b"] = append(sw.changes["b"], at(30*time.Second, "deliveries.pending", "deliveries.delivered"))
	c = sw.between(t0, t0.Add(3*time.Minute))
	if c.shortestGap != 28*time.Second || c.aMinuteApart() || c.soonDetail() != "1, changing `deliveries.delivered` 1, `deliveries.pending` 1" {
		t.Errorf("changes = %+v (%s); want the shortest gap 28s, one change within a minute", c, c.soonDetail())
	}
}

func TestFlattenStatus(t *testing.T) {
	got := flatten("", map[string]any{"deliveries": map[string]any{"pending": int64(1)}, "conditions": []any{"x"}}, map[string]string{})
	if len(got) != 2 || got["deliveries.pending"] != "1" || got["conditions"] != "[x]" {
		t.Errorf("flatten = %v", got)
	}
}
