// Package monitoring tests the shipped Prometheus Operator objects
// (config/prometheus) with the real promtool; test/e2e checks that every
// metric they and the Grafana dashboard read is one the manager exports.
package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hookkeeper/hookkeeper/test/tools"
)

const promtoolModule = "github.com/prometheus/prometheus"

type prometheusRule struct {
	Kind string `json:"kind"`
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

type ruleTests struct {
	Tests []struct {
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// The PrometheusRule's groups pass `promtool check rules` and the unit
// tests in testdata/alerts_test.yaml, and every alert is tested both
// firing and not firing.
func TestPrometheusRule(t *testing.T) {
	promtool := tools.Require(t, "promtool", promtoolModule)
	raw, err := os.ReadFile(filepath.Join(tools.Root(), "config", "prometheus", "prometheus_rule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule prometheusRule
	if err := yaml.Unmarshal(raw, &rule); err != nil {
		t.Fatalf("prometheus_rule.yaml: %v", err)
	}
	if rule.Kind != "PrometheusRule" || len(rule.Spec.Groups) == 0 {
		t.Fatalf("prometheus_rule.yaml: kind %q with %d groups, want a PrometheusRule with groups", rule.Kind, len(rule.Spec.Groups))
	}

	// promtool reads plain rule files: the spec, every field of it, is one.
	var whole struct {
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &whole); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	groups, err := yaml.Marshal(whole.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), groups, 0o600); err != nil {
		t.Fatal(err)
	}
	testsYAML, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), testsYAML, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %v: %v\n%s", args, err, out)
		}
	}
	run("check", "rules", "rules.yaml")
	run("test", "rules", "alerts_test.yaml")

	// Fire and must-not-fire, for every alert.
	var tests ruleTests
	if err := yaml.Unmarshal(testsYAML, &tests); err != nil {
		t.Fatalf("alerts_test.yaml: %v", err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !fires[r.Alert] || !silent[r.Alert] {
				t.Errorf("alert %s: tested firing %v, not firing %v; alerts_test.yaml needs both", r.Alert, fires[r.Alert], silent[r.Alert])
			}
		}
	}
}
