package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// Metrics the shipped alerts read that another exporter provides (kubelet's
// volume stats, for the SQLite ledger's PVC); nothing of hookkeeper's may
// hide here.
var externalMetrics = map[string]string{
	"kubelet_volume_stats_used_bytes":     "kubelet",
	"kubelet_volume_stats_capacity_bytes": "kubelet",
}

var _ = Describe("Monitoring", func() {
	It("exports every metric the shipped PrometheusRule and Grafana dashboard query", func() {
		ns := useNamespace("e2e-monitoring")
		ok := newReceiver("ok", false, answer(204))
		failing := newReceiver("failing", false, answer(500))
		By("deliveries that succeed and one that is exhausted, so that every per-endpoint and labelled family has series")
		apply(policyYAML(ns, "once", "100ms", 1) + "---\n" +
			endpointYAML(ns, "ok", ok.URL("/hooks"), "[mon.ok]", "once", "") + "---\n" +
			endpointYAML(ns, "failing", failing.URL("/hooks"), "[mon.failing]", "once", ""))
		kubectl("wait", "-n", ns, "webhookendpoint", "--all", "--for=condition=Ready", "--timeout=30s")
		api.publish(ns, "mon-ok", `{"type":"mon.ok","data":{}}`)
		api.publish(ns, "mon-failing", `{"type":"mon.failing","data":{}}`)
		Eventually(func() int { return len(ok.received()) }).Should(Equal(1))
		Eventually(func() string { return jsonpath("webhookendpoint/failing", "{.status.deliveries.exhaustedUnresolved}") }).Should(Equal("1"))

		By("the names the manager's /metrics exports (histograms as their _bucket, _sum and _count series)")
		var exported map[string]bool
		Eventually(func(g Gomega) {
			exported = exportedNames(g, metricsText())
			g.Expect(exported).To(HaveKey("hookkeeper_endpoint_last_failure_timestamp_seconds"))
		}).Should(Succeed())

		By("the metric names of every rule and panel, from Prometheus' own PromQL parser")
		exprs := append(ruleExpressions(), dashboardExpressions()...)
		Expect(len(exprs)).To(BeNumerically(">=", 20))
		names := promqlNames(exprs)
		var missing []string
		used := map[string]bool{}
		for _, expr := range exprs {
			Expect(names[expr]).NotTo(BeEmpty(), "no metric in %q", expr)
			for _, name := range names[expr] {
				used[name] = true
				if _, external := externalMetrics[name]; external {
					Expect(name).NotTo(HavePrefix("hookkeeper_"))
					continue
				}
				if !exported[name] {
					missing = append(missing, name+" (in "+expr+")")
				}
			}
		}
		Expect(missing).To(BeEmpty(), "queried but not exported by the manager:\n%s", strings.Join(missing, "\n"))
		for name := range externalMetrics {
			Expect(used).To(HaveKey(name), "externalMetrics lists %s, which no rule or panel queries", name)
		}
	})
})

// exportedNames parses the text exposition into the series names it holds.
func exportedNames(g Gomega, text string) map[string]bool {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	g.Expect(err).NotTo(HaveOccurred())
	names := map[string]bool{}
	for name, f := range families {
		if len(f.GetMetric()) == 0 {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[name], names[name+"_sum"], names[name+"_count"] = true, true, true
		default:
			names[name] = true
		}
	}
	return names
}

func ruleExpressions() []string {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "prometheus", "prometheus_rule.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Expr string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	Expect(yaml.Unmarshal(raw, &rule)).To(Succeed())
	var exprs []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			Expect(r.Expr).NotTo(BeEmpty())
			exprs = append(exprs, r.Expr)
		}
	}
	Expect(exprs).NotTo(BeEmpty())
	return exprs
}

// dashboardExpressions returns every "expr" anywhere in the dashboard (panels,
// rows' nested panels, targets).
func dashboardExpressions() []string {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "grafana", "hookkeeper-dashboard.json"))
	Expect(err).NotTo(HaveOccurred())
	var doc any
	Expect(json.Unmarshal(raw, &doc)).To(Succeed())
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if e, ok := v["expr"].(string); ok {
				exprs = append(exprs, e)
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(v[k])
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	Expect(exprs).NotTo(BeEmpty())
	return exprs
}

// promqlNames runs hack/tools/promtool's promqlnames (Prometheus' parser,
// kept out of the project's go.mod) over exprs.
func promqlNames(exprs []string) map[string][]string {
	GinkgoHelper()
	bin := filepath.Join(workDir, "promqlnames")
	build := exec.Command("go", "build", "-o", bin, "./promqlnames")
	build.Dir = filepath.Join(testenv.RepoRoot(), "hack", "tools", "promtool")
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building promqlnames: %s", out)
	input, err := json.Marshal(exprs)
	Expect(err).NotTo(HaveOccurred())
	var stdout, stderr bytes.Buffer
	run := exec.Command(bin)
	run.Stdin, run.Stdout, run.Stderr = bytes.NewReader(input), &stdout, &stderr
	Expect(run.Run()).To(Succeed(), "promqlnames: %s", stderr.String())
	names := map[string][]string{}
	Expect(json.Unmarshal(stdout.Bytes(), &names)).To(Succeed())
	return names
}
