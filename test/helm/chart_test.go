// Package helm tests the chart `make helm-chart` generates from config/:
// the real helm lints and renders it for a matrix of values, the rendered
// objects are checked, and the renders are applied server-side with the
// real kubectl to a real kube-apiserver (envtest), into a namespace other
// than the kustomize one.
package helm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hookkeeper/hookkeeper/test/testenv"
	"github.com/hookkeeper/hookkeeper/test/tools"
)

const helmModule = "helm.sh/helm/v3"

type obj = map[string]any

func TestChart(t *testing.T) {
	helm := tools.Require(t, "helm", helmModule)
	kubectl, err := testenv.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	chart := filepath.Join(dir, "chart")
	gen := exec.Command("go", "run", "./hack/helmchart", "-kubectl", kubectl, "-out", chart,
		"config/default", "config/prometheus", "config/grafana")
	gen.Dir = tools.Root()
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("generating the chart: %v\n%s", err, out)
	}
	runHelm := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(helm, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+dir, "HELM_CONFIG_HOME="+dir, "HELM_DATA_HOME="+dir)
		err := cmd.Run()
		if err != nil {
			return stdout.String(), &helmError{err, stderr.String()}
		}
		return stdout.String(), nil
	}
	valuesFile := func(name, content string) string {
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sqlite := valuesFile("sqlite", "{}\n")
	postgres := valuesFile("postgres", `
manager:
  replicas: 3
  image: {repository: registry.example/hookkeeper, tag: v9.9.9}
  resources: {requests: {cpu: 200m, memory: 256Mi}, limits: {memory: 1Gi}}
ledger:
  type: postgres
  postgres:
    dsnSecret: {name: hookkeeper-ledger-dsn, key: url}
safeDestinations:
  allowedCIDRs: [10.20.0.0/16, 10.30.0.0/16]
  clusterServiceCIDRs: [10.96.0.0/12]
prometheus:
  serviceMonitor: {enable: true}
  rules: {enable: true}
grafana:
  dashboard: {enable: true}
`)
	scoped := valuesFile("scoped", "watchNamespaces: [team-a, team-b]\n")
	noMetrics := valuesFile("no-metrics", "metrics: {enable: false}\nprometheus: {serviceMonitor: {enable: true}}\n")

	for _, v := range []string{sqlite, postgres} {
		if out, err := runHelm("lint", "--strict", chart, "-f", v); err != nil {
			t.Fatalf("helm lint -f %s: %v\n%s", filepath.Base(v), err, out)
		}
	}
	render := func(t *testing.T, values string) []obj {
		t.Helper()
		out, err := runHelm("template", "hookkeeper", chart, "--namespace", "hk-chart", "-f", values)
		if err != nil {
			t.Fatalf("helm template -f %s: %v", filepath.Base(values), err)
		}
		return parse(t, out)
	}

	t.Run("the default render holds every object config/default renders, in the release namespace", func(t *testing.T) {
		out, err := exec.Command(kubectl, "kustomize", filepath.Join(tools.Root(), "config", "default")).Output()
		if err != nil {
			t.Fatal(err)
		}
		rendered := render(t, sqlite)
		source := parse(t, string(out))
		installNS := ""
		for _, o := range source {
			if kind(o) == "Namespace" {
				installNS = name(o)
			}
		}
		for _, o := range source {
			if kind(o) == "Namespace" {
				continue
			}
			r := find(rendered, kind(o), name(o))
			if r == nil {
				t.Errorf("%s %s is in config/default but not in the chart", kind(o), name(o))
				continue
			}
			// The install namespace becomes the release's; another one
			// (kube-system, for the authentication reader) stays.
			want := str(o, "metadata", "namespace")
			if want == installNS {
				want = "hk-chart"
			}
			if got := str(r, "metadata", "namespace"); got != want {
				t.Errorf("%s %s: namespace %q, want %q", kind(o), name(o), got, want)
			}
		}
		if text, _ := runHelm("template", "hookkeeper", chart, "--namespace", "hk-chart", "-f", postgres); strings.Contains(text, installNS) {
			t.Errorf("the render still names %s", installNS)
		}
	})

	t.Run("SQLite, one replica", func(t *testing.T) {
		objs := render(t, sqlite)
		d := manager(t, objs)
		if got := get(d, "spec", "replicas"); got != float64(1) {
			t.Errorf("replicas %v, want 1", got)
		}
		if got := str(d, "spec", "strategy", "type"); got != "Recreate" {
			t.Errorf("strategy %q, want Recreate (two pods never open the file)", got)
		}
		args := containerArgs(d)
		wantArgs(t, args, "--leader-elect", "--ledger=sqlite:///var/lib/hookkeeper/ledger.db", "--metrics-bind-address=:8443")
		noArgPrefix(t, args, "--allowed-destination-cidrs", "--cluster-service-cidrs")
		if find(objs, "PersistentVolumeClaim", "hookkeeper-ledger") == nil {
			t.Error("no ledger PVC")
		}
		if claim := ledgerVolume(d); str(claim, "persistentVolumeClaim", "claimName") != "hookkeeper-ledger" {
			t.Errorf("ledger volume %v, want the PVC", claim)
		}
		if find(objs, "Service", "hookkeeper-controller-manager-metrics-service") == nil {
			t.Error("no metrics Service")
		}
		for _, k := range []string{"ServiceMonitor", "PrometheusRule"} {
			if hasKind(objs, k) {
				t.Errorf("%s rendered, off by default", k)
			}
		}
	})

	t.Run("PostgreSQL, three replicas with leader election, monitoring on", func(t *testing.T) {
		objs := render(t, postgres)
		d := manager(t, objs)
		if got := get(d, "spec", "replicas"); got != float64(3) {
			t.Errorf("replicas %v, want 3", got)
		}
		if got := str(d, "spec", "strategy", "type"); got != "RollingUpdate" {
			t.Errorf("strategy %q, want RollingUpdate", got)
		}
		c := container(d)
		if c["image"] != "registry.example/hookkeeper:v9.9.9" {
			t.Errorf("image %v", c["image"])
		}
		if got := str(c, "resources", "limits", "memory"); got != "1Gi" {
			t.Errorf("memory limit %q, want 1Gi", got)
		}
		args := containerArgs(d)
		wantArgs(t, args, "--leader-elect", "--ledger=$(HOOKKEEPER_LEDGER_DSN)",
			"--allowed-destination-cidrs=10.20.0.0/16,10.30.0.0/16", "--cluster-service-cidrs=10.96.0.0/12")
		var dsn obj
		for _, e := range c["env"].([]any) {
			if e.(obj)["name"] == "HOOKKEEPER_LEDGER_DSN" {
				dsn = e.(obj)
			}
		}
		if str(dsn, "valueFrom", "secretKeyRef", "name") != "hookkeeper-ledger-dsn" || str(dsn, "valueFrom", "secretKeyRef", "key") != "url" {
			t.Errorf("DSN env %v, want the Secret's key", dsn)
		}
		if find(objs, "PersistentVolumeClaim", "hookkeeper-ledger") != nil {
			t.Error("a ledger PVC with PostgreSQL")
		}
		if v := ledgerVolume(d); v["emptyDir"] == nil {
			t.Errorf("ledger volume %v, want an emptyDir", v)
		}
		// The monitoring objects, with the alerts' own templates intact.
		sm := find(objs, "ServiceMonitor", "hookkeeper-controller-manager-metrics-monitor")
		svc := find(objs, "Service", "hookkeeper-controller-manager-metrics-service")
		if sm == nil || svc == nil {
			t.Fatal("ServiceMonitor or metrics Service missing")
		}
		for k, v := range get(sm, "spec", "selector", "matchLabels").(obj) {
			if get(svc, "metadata", "labels").(obj)[k] != v {
				t.Errorf("the ServiceMonitor selects %s=%v, which the metrics Service lacks", k, v)
			}
		}
		if api := find(objs, "Service", "hookkeeper-api"); api != nil {
			matches := true
			for k, v := range get(sm, "spec", "selector", "matchLabels").(obj) {
				matches = matches && get(api, "metadata", "labels").(obj)[k] == v
			}
			if matches {
				t.Error("the ServiceMonitor also selects the API's Service")
			}
		}
		rule := find(objs, "PrometheusRule", "hookkeeper-alerts")
		source, err := os.ReadFile(filepath.Join(tools.Root(), "config", "prometheus", "prometheus_rule.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var src obj
		if err := yaml.Unmarshal(source, &src); err != nil {
			t.Fatal(err)
		}
		if rule == nil || !equalYAML(t, rule["spec"], src["spec"]) {
			t.Error("the rendered PrometheusRule's spec differs from config/prometheus (template text in annotations must survive)")
		}
		if find(objs, "ConfigMap", "hookkeeper-grafana-dashboard") == nil {
			t.Error("no Grafana dashboard ConfigMap")
		}
	})

	t.Run("metrics off: no Service, no ServiceMonitor, metrics not served", func(t *testing.T) {
		objs := render(t, noMetrics)
		wantArgs(t, containerArgs(manager(t, objs)), "--metrics-bind-address=0")
		if find(objs, "Service", "hookkeeper-controller-manager-metrics-service") != nil || hasKind(objs, "ServiceMonitor") {
			t.Error("metrics objects rendered with metrics off")
		}
	})

	t.Run("namespace-scoped: the manager watches the named namespaces, and Secrets and the CRDs are granted only there", func(t *testing.T) {
		objs := render(t, scoped)
		wantArgs(t, containerArgs(manager(t, objs)), "--watch-namespaces=team-a,team-b")
		cr := find(objs, "ClusterRole", "hookkeeper-manager-role")
		if cr == nil {
			t.Fatal("no ClusterRole hookkeeper-manager-role")
		}
		if got := ruleResources(cr); !slices.Equal(got, []string{"apiservices", "subjectaccessreviews", "tokenreviews"}) {
			t.Errorf("the manager's ClusterRole grants %v; want only the cluster-scoped apiservices, subjectaccessreviews, tokenreviews", got)
		}
		for _, ns := range []string{"team-a", "team-b"} {
			role := findIn(objs, "Role", "hookkeeper-manager-role", ns)
			if role == nil {
				t.Errorf("no Role hookkeeper-manager-role in %s", ns)
				continue
			}
			for _, want := range []string{"secrets", "webhookendpoints", "webhookendpoints/status", "retrypolicies", "deliveryrecoveries", "events"} {
				if !slices.Contains(ruleResources(role), want) {
					t.Errorf("the Role in %s does not grant %s: %v", ns, want, ruleResources(role))
				}
			}
			if b := findIn(objs, "RoleBinding", "hookkeeper-manager-role", ns); b == nil ||
				str(b, "roleRef", "kind") != "Role" || str(get(b, "subjects").([]any)[0], "namespace") != "hk-chart" ||
				str(get(b, "subjects").([]any)[0], "name") != "hookkeeper-controller-manager" {
				t.Errorf("RoleBinding in %s = %v: want the Role bound to hk-chart/hookkeeper-controller-manager", ns, b)
			}
		}
		// The serving certificate's Secret is in the release namespace.
		if r := findIn(objs, "Role", "hookkeeper-manager-role-serving-cert", "hk-chart"); r == nil || !slices.Equal(ruleResources(r), []string{"secrets"}) {
			t.Errorf("the release namespace's Role = %v, want one granting secrets", r)
		}
		// Every namespaced grant of the default render is in each Role:
		// together, the Roles and the ClusterRole grant what it grants.
		def := find(render(t, sqlite), "ClusterRole", "hookkeeper-manager-role")
		if got, want := append(ruleResources(cr), ruleResources(findIn(objs, "Role", "hookkeeper-manager-role", "team-a"))...), ruleResources(def); !equalSets(got, want) {
			t.Errorf("scoped ClusterRole and Role grant %v; the default ClusterRole %v", got, want)
		}

		objs = render(t, valuesFile("scoped-with-release", "watchNamespaces: [hk-chart, team-a]\n"))
		if findIn(objs, "Role", "hookkeeper-manager-role-serving-cert", "hk-chart") != nil {
			t.Error("a serving-certificate Role in a watched release namespace: its Role grants Secrets already")
		}
		objs = render(t, sqlite)
		if findIn(objs, "Role", "hookkeeper-manager-role", "team-a") != nil {
			t.Error("the default render has a namespaced manager Role")
		}
		noArgPrefix(t, containerArgs(manager(t, objs)), "--watch-namespaces")
	})

	t.Run("values that cannot work are refused", func(t *testing.T) {
		for _, c := range []struct{ values, want string }{
			{"manager: {replicas: 3}\n", "manager.replicas: the SQLite ledger serves one replica"},
			{"ledger: {type: postgres}\n", "ledger.postgres.dsnSecret.name"},
			{"ledger: {type: mysql}\n", `ledger.type: "mysql" is neither sqlite nor postgres`},
		} {
			_, err := runHelm("template", "hookkeeper", chart, "-f", valuesFile("bad", c.values))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("values %q: %v, want an error with %q", c.values, err, c.want)
			}
		}
	})

	t.Run("both renders apply server-side to a real API server", func(t *testing.T) {
		env, err := testenv.New()
		if err != nil {
			t.Fatal(err)
		}
		// The chart installs the CRDs itself.
		env.CRDDirectoryPaths, env.ErrorIfCRDPathMissing = nil, false
		if _, err := env.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Stop() })
		kubeconfig, err := testenv.Kubeconfig(env, dir)
		if err != nil {
			t.Fatal(err)
		}
		k := func(stdin string, args ...string) string {
			t.Helper()
			out, err := testenv.RunKubectl(kubectl, kubeconfig, stdin, args...)
			if err != nil {
				t.Fatalf("kubectl %v: %v\n%s", args, err, out)
			}
			return out
		}
		k("", "create", "namespace", "hk-chart")
		k("", "create", "namespace", "team-a")
		k("", "create", "namespace", "team-b")
		// The Prometheus Operator's CRDs are not in this control plane:
		// those objects are checked above, not applied.
		skipKinds := regexp.MustCompile(`^(ServiceMonitor|PrometheusRule)$`)
		for _, values := range []string{scoped, sqlite, postgres} {
			var docs []string
			for _, o := range render(t, values) {
				if skipKinds.MatchString(kind(o)) {
					continue
				}
				raw, err := yaml.Marshal(o)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, string(raw))
			}
			k(strings.Join(docs, "---\n"), "apply", "--server-side", "--field-manager=helm-test", "-f", "-")
			if values != scoped {
				continue
			}
			// The real RBAC authorizer: the manager may read Secrets in
			// the watched namespaces and its own, nowhere else.
			for ns, want := range map[string]string{"team-a": "yes", "team-b": "yes", "hk-chart": "yes", "default": "no"} {
				out, _ := testenv.RunKubectl(kubectl, kubeconfig, "", "auth", "can-i", "--as=system:serviceaccount:hk-chart:hookkeeper-controller-manager", "watch", "secrets", "-n", ns)
				if strings.TrimSpace(out) != want {
					t.Errorf("namespace-scoped: may the manager watch secrets in %s? %q, want %s", ns, out, want)
				}
			}
			// Whether a watched namespace is terminating: its own object,
			// authorised in it (as kube-apiserver authorises a get of
			// /api/v1/namespaces/team-a), and no other.
			for ns, want := range map[string]string{"team-a": "yes", "default": "no"} {
				out, _ := testenv.RunKubectl(kubectl, kubeconfig, "", "auth", "can-i", "--as=system:serviceaccount:hk-chart:hookkeeper-controller-manager", "get", "namespaces/"+ns, "-n", ns)
				if strings.TrimSpace(out) != want {
					t.Errorf("namespace-scoped: may the manager get namespace %s? %q, want %s", ns, out, want)
				}
			}
			if out, _ := testenv.RunKubectl(kubectl, kubeconfig, "", "auth", "can-i", "--as=system:serviceaccount:hk-chart:hookkeeper-controller-manager", "list", "webhookendpoints.hookkeeper.dev", "--all-namespaces"); strings.TrimSpace(out) != "no" {
				t.Errorf("namespace-scoped: the manager may list webhookendpoints in every namespace: %q", out)
			}
		}
		// The second (PostgreSQL) render is what the cluster holds now.
		if got := k("", "-n", "hk-chart", "get", "deployment", "hookkeeper-controller-manager", "-o", "jsonpath={.spec.replicas}/{.spec.strategy.type}"); got != "3/RollingUpdate" {
			t.Errorf("deployment %q, want 3/RollingUpdate", got)
		}
		if got := k("", "get", "crd", "webhookendpoints.hookkeeper.dev", "-o", "jsonpath={.metadata.annotations.helm\\.sh/resource-policy}"); got != "keep" {
			t.Errorf("CRD resource policy %q, want keep", got)
		}
	})
}

type helmError struct {
	err    error
	stderr string
}

func (e *helmError) Error() string { return e.err.Error() + ": " + e.stderr }

func parse(t *testing.T, text string) []obj {
	t.Helper()
	var out []obj
	for _, doc := range regexp.MustCompile(`(?m)^---.*$`).Split(text, -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o obj
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

func get(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(obj)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func str(v any, path ...string) string { s, _ := get(v, path...).(string); return s }
func kind(o obj) string                { return str(o, "kind") }
func name(o obj) string                { return str(o, "metadata", "name") }

func find(objs []obj, k, n string) obj {
	for _, o := range objs {
		if kind(o) == k && name(o) == n {
			return o
		}
	}
	return nil
}

func hasKind(objs []obj, k string) bool {
	return slices.ContainsFunc(objs, func(o obj) bool { return kind(o) == k })
}

func manager(t *testing.T, objs []obj) obj {
	t.Helper()
	d := find(objs, "Deployment", "hookkeeper-controller-manager")
	if d == nil {
		t.Fatal("no manager Deployment")
	}
	return d
}

func container(d obj) obj {
	for _, c := range get(d, "spec", "template", "spec", "containers").([]any) {
		if c.(obj)["name"] == "manager" {
			return c.(obj)
		}
	}
	return nil
}

func containerArgs(d obj) []string {
	var out []string
	for _, a := range container(d)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

func ledgerVolume(d obj) obj {
	for _, v := range get(d, "spec", "template", "spec", "volumes").([]any) {
		if v.(obj)["name"] == "ledger" {
			return v.(obj)
		}
	}
	return nil
}

func wantArgs(t *testing.T, args []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("args %q lack %q", args, w)
		}
	}
}

func noArgPrefix(t *testing.T, args []string, prefixes ...string) {
	t.Helper()
	for _, a := range args {
		for _, p := range prefixes {
			if strings.HasPrefix(a, p) {
				t.Errorf("unexpected arg %q", a)
			}
		}
	}
}

func equalYAML(t *testing.T, a, b any) bool {
	t.Helper()
	ra, err := yaml.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ra, rb) {
		t.Logf("rendered:\n%s\nsource:\n%s", ra, rb)
	}
	return bytes.Equal(ra, rb)
}

func findIn(objs []obj, k, n, ns string) obj {
	for _, o := range objs {
		if kind(o) == k && name(o) == n && str(o, "metadata", "namespace") == ns {
			return o
		}
	}
	return nil
}

// ruleResources returns the resources a role's rules name, sorted, once
// each.
func ruleResources(role obj) []string {
	var out []string
	rules, _ := get(role, "rules").([]any)
	for _, r := range rules {
		res, _ := get(r, "resources").([]any)
		for _, x := range res {
			if s, _ := x.(string); !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out
}

func equalSets(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
