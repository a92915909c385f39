package monitoring

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// TestDashboardShowsAttemptExemplars: the dashboard's p99 of the attempt
// duration asks Grafana for exemplars, the way from a slow attempt to its
// trace (issue #46; the manager serves them in OpenMetrics, the e2e spec
// "Traces" checks that).
func TestDashboardShowsAttemptExemplars(t *testing.T) {
	raw, err := os.ReadFile(testenv.RepoRoot() + "/config/grafana/hookkeeper-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr     string `json:"expr"`
				Exemplar bool   `json:"exemplar"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range doc.Panels {
		for _, tg := range p.Targets {
			if strings.Contains(tg.Expr, "histogram_quantile(0.99") && strings.Contains(tg.Expr, "hookkeeper_attempt_duration_seconds_bucket") {
				found = true
				if !tg.Exemplar {
					t.Errorf("panel %q: the attempt duration p99 does not ask for exemplars", p.Title)
				}
			}
		}
	}
	if !found {
		t.Fatal("no panel shows the attempt duration p99")
	}
}
