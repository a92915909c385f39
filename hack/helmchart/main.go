// Command helmchart generates hookkeeper's Helm chart from what kustomize
// renders from config/, so that the chart and the kustomize bases have one
// source (kubebuilder's helm plugin is the model). `make helm-chart` runs it:
//
//	helmchart -kubectl bin/k8s/.../kubectl -out dist/chart -version 0.1.0 config/default config/prometheus config/grafana
//
// Each argument is a kustomization, rendered with `kubectl kustomize`.
// It is generic: every object of the inputs becomes a template, whatever
// config/ holds; only what admins change is parameterised, by kind and role
// rather than by name (the manager Deployment, the ledger's PVC, the metrics
// Service, CRDs, Prometheus Operator and Grafana objects). Text that looks
// like a template in the manifests (alert annotations) is escaped.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	out := flag.String("out", "dist/chart", "directory to write the chart to (replaced)")
	version := flag.String("version", "0.1.0", "the chart's version")
	kubectl := flag.String("kubectl", "kubectl", "the kubectl that renders the kustomizations")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "helmchart: name the kustomizations to render (config/default first)")
		os.Exit(2)
	}
	var objects []object
	for _, path := range flag.Args() {
		var stderr bytes.Buffer
		cmd := exec.Command(*kubectl, "kustomize", path)
		cmd.Stderr = &stderr
		raw, err := cmd.Output()
		if err != nil {
			fail(fmt.Errorf("kubectl kustomize %s: %w: %s", path, err, stderr.String()))
		}
		objs, err := splitDocuments(raw)
		if err != nil {
			fail(fmt.Errorf("%s: %w", path, err))
		}
		objects = append(objects, objs...)
	}
	chart, err := generate(objects, *version)
	if err != nil {
		fail(err)
	}
	if err := chart.write(*out); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "helmchart:", err)
	os.Exit(1)
}

type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }
func (o object) name() string { return str(o, "metadata", "name") }
func (o object) labels() map[string]any {
	m, _ := get(o, "metadata", "labels").(map[string]any)
	return m
}

func splitDocuments(raw []byte) ([]object, error) {
	var out []object
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return nil, err
		}
		if o != nil {
			out = append(out, o)
		}
	}
	return out, nil
}

func get(v any, path ...string) any {
	if o, ok := v.(object); ok {
		v = map[string]any(o)
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func str(v any, path ...string) string { s, _ := get(v, path...).(string); return s }

// chart is the generated chart: files by path, and the values' defaults.
type chart struct {
	files map[string]string
}

func (c *chart) write(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	paths := make([]string, 0, len(c.files))
	for p := range c.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(c.files[p]), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// templater replaces values in an object with placeholders, and the
// placeholders in the marshalled YAML with template text: a scalar's
// placeholder is replaced in place; a block's whole line (a list item, or
// the value of a key) by the lines the block returns for its indentation.
type templater struct {
	n       int
	scalars map[string]string                  // placeholder → template text in place of the scalar
	blocks  map[string]func(indent int) string // placeholder → lines replacing the whole line
}

func newTemplater() *templater {
	return &templater{scalars: map[string]string{}, blocks: map[string]func(int) string{}}
}

func (t *templater) scalar(text string) string {
	t.n++
	p := fmt.Sprintf("HELMTPLSCALAR%04d", t.n)
	t.scalars[p] = text
	return p
}

func (t *templater) block(f func(indent int) string) string {
	t.n++
	p := fmt.Sprintf("HELMTPLBLOCK%04d", t.n)
	t.blocks[p] = f
	return p
}

var braces = regexp.MustCompile(`\{\{|\}\}`)

// render marshals o, escapes template delimiters already in it and puts the
// templates in place of the placeholders.
func (t *templater) render(o object) (string, error) {
	raw, err := yaml.Marshal(o)
	if err != nil {
		return "", err
	}
	text := braces.ReplaceAllStringFunc(string(raw), func(s string) string { return `{{ "` + s + `" }}` })
	var out []string
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		replaced := false
		for p, f := range t.blocks {
			if !strings.Contains(line, p) {
				continue
			}
			indent := len(line) - len(strings.TrimLeft(line, " "))
			rest := strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(rest, "- "): // a list item
				out = append(out, f(indent))
			default: // key: placeholder
				key := strings.TrimSuffix(strings.TrimSpace(strings.SplitN(rest, p, 2)[0]), ":")
				out = append(out, strings.Repeat(" ", indent)+key+":"+f(indent+2))
			}
			replaced = true
			break
		}
		if !replaced {
			out = append(out, line)
		}
	}
	text = strings.Join(out, "\n") + "\n"
	for p, s := range t.scalars {
		text = strings.ReplaceAll(text, p, s)
	}
	if strings.Contains(text, "HELMTPL") {
		return "", errors.New("a placeholder was left in " + o.kind() + " " + o.name())
	}
	return text, nil
}

func lines(indent int, ls ...string) string {
	pad := strings.Repeat(" ", indent)
	var b strings.Builder
	for i, l := range ls {
		if i > 0 {
			b.WriteString("\n")
		}
		if strings.HasPrefix(l, "{{") {
			b.WriteString(l)
		} else {
			b.WriteString(pad + l)
		}
	}
	return b.String()
}

// generate turns the rendered objects into the chart.
func generate(objects []object, version string) (*chart, error) {
	c := &chart{files: map[string]string{}}
	v := defaultValues()
	namespace := ""
	for _, o := range objects {
		if o.kind() == "Namespace" {
			namespace = o.name()
		}
	}
	if namespace == "" {
		return nil, errors.New("the manifests hold no Namespace: render config/default")
	}
	var managerFound bool
	serviceAccount := ""
	for _, o := range objects {
		if o.kind() == "Deployment" && managerContainer(o) != nil {
			serviceAccount = str(o, "spec", "template", "spec", "serviceAccountName")
		}
	}
	for _, o := range objects {
		if o.kind() == "Namespace" {
			continue // Helm installs into --namespace (--create-namespace)
		}
		t := newTemplater()
		replaceNamespace(o, namespace, t)
		condition := ""
		dir := "templates"
		switch {
		case o.kind() == "CustomResourceDefinition":
			dir = "templates/crds"
			condition = ".Values.crd.enable"
			setAnnotation(o, "helm.sh/resource-policy", t.scalar(`{{ if .Values.crd.keep }}keep{{ else }}delete{{ end }}`))
		case o.kind() == "Deployment" && managerContainer(o) != nil:
			if err := templateManager(o, t, v); err != nil {
				return nil, err
			}
			managerFound = true
		case o.kind() == "ClusterRole" && strings.HasSuffix(o.name(), "manager-role"):
			roles, err := scopeManagerRole(o, t, namespacedResources(objects), serviceAccount)
			if err != nil {
				return nil, err
			}
			c.files["templates/role-"+o.name()+"-watched-namespaces.yaml"] = roles
		case o.kind() == "PersistentVolumeClaim":
			condition = `eq .Values.ledger.type "sqlite"`
			if s := str(o, "spec", "resources", "requests", "storage"); s != "" {
				v.sqliteStorage = s
				get(o, "spec", "resources", "requests").(map[string]any)["storage"] = t.scalar(`{{ .Values.ledger.sqlite.storage | quote }}`)
			}
		case o.kind() == "Service" && o.labels()["app.kubernetes.io/component"] == "metrics":
			condition = ".Values.metrics.enable"
		case o.kind() == "ServiceMonitor":
			condition = "and .Values.metrics.enable .Values.prometheus.serviceMonitor.enable"
		case o.kind() == "PrometheusRule":
			condition = ".Values.prometheus.rules.enable"
		case o.kind() == "ConfigMap" && o.labels()["grafana_dashboard"] != nil:
			condition = ".Values.grafana.dashboard.enable"
		}
		text, err := t.render(o)
		if err != nil {
			return nil, err
		}
		if condition != "" {
			text = "{{- if " + condition + " }}\n" + text + "{{- end }}\n"
		}
		file := fmt.Sprintf("%s/%s-%s.yaml", dir, strings.ToLower(o.kind()), o.name())
		if _, dup := c.files[file]; dup {
			return nil, fmt.Errorf("two objects would be written to %s", file)
		}
		c.files[file] = "# Generated by `make helm-chart` from config/: edit config/, not this file.\n" + text
	}
	if !managerFound {
		return nil, errors.New("no Deployment with a container named manager")
	}
	c.files["templates/validate.yaml"] = validateTemplate
	c.files["Chart.yaml"] = fmt.Sprintf(chartYAML, version, v.imageTag)
	c.files["values.yaml"] = v.yaml()
	c.files[".helmignore"] = "*.orig\n*.tmp\n"
	return c, nil
}

// replaceNamespace puts the release's namespace wherever the rendered one
// appears: metadata, subjects, service references, and DNS names in it.
func replaceNamespace(v any, namespace string, t *templater) {
	if o, ok := v.(object); ok {
		v = map[string]any(o)
	}
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok {
				switch {
				case k == "namespace" && s == namespace:
					v[k] = t.scalar("{{ .Release.Namespace }}")
				case strings.Contains(s, "."+namespace+".svc"):
					v[k] = t.scalar(strings.ReplaceAll(s, "."+namespace+".svc", ".{{ .Release.Namespace }}.svc"))
				}
				continue
			}
			replaceNamespace(e, namespace, t)
		}
	case []any:
		for i, e := range v {
			if s, ok := e.(string); ok && strings.Contains(s, "."+namespace+".svc") {
				v[i] = t.scalar(strings.ReplaceAll(s, "."+namespace+".svc", ".{{ .Release.Namespace }}.svc"))
				continue
			}
			replaceNamespace(e, namespace, t)
		}
	}
}

func setAnnotation(o object, key, value string) {
	md := o["metadata"].(map[string]any)
	a, _ := md["annotations"].(map[string]any)
	if a == nil {
		a = map[string]any{}
		md["annotations"] = a
	}
	a[key] = value
}

func managerContainer(o object) map[string]any {
	cs, _ := get(o, "spec", "template", "spec", "containers").([]any)
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok && m["name"] == "manager" {
			return m
		}
	}
	return nil
}

// templateManager parameterises the manager's Deployment: image, replicas,
// strategy, resources, the ledger (SQLite on the PVC, or PostgreSQL with its
// DSN from a Secret), metrics and safe destinations.
func templateManager(o object, t *templater, v *values) error {
	spec := o["spec"].(map[string]any)
	spec["replicas"] = t.scalar("{{ .Values.manager.replicas }}")
	spec["strategy"] = map[string]any{"type": t.scalar(`{{ if eq .Values.ledger.type "sqlite" }}Recreate{{ else }}RollingUpdate{{ end }}`)}
	c := managerContainer(o)
	image, _ := c["image"].(string)
	if i := strings.LastIndex(image, ":"); i > 0 && !strings.Contains(image[i:], "/") {
		v.imageRepository, v.imageTag = image[:i], image[i+1:]
	} else {
		v.imageRepository, v.imageTag = image, "latest"
	}
	c["image"] = t.scalar(`"{{ .Values.manager.image.repository }}:{{ .Values.manager.image.tag | default .Chart.AppVersion }}"`)
	c["imagePullPolicy"] = t.scalar("{{ .Values.manager.image.pullPolicy }}")
	if r, ok := c["resources"]; ok {
		raw, err := yaml.Marshal(r)
		if err != nil {
			return err
		}
		v.resources = string(raw)
	}
	c["resources"] = t.block(func(indent int) string {
		return "\n" + fmt.Sprintf("{{- toYaml .Values.manager.resources | nindent %d }}", indent)
	})
	args, _ := c["args"].([]any)
	sawLedger := false
	for i, a := range args {
		s, _ := a.(string)
		switch {
		case strings.HasPrefix(s, "--ledger="):
			sawLedger = true
			v.sqliteLedger = strings.TrimPrefix(s, "--ledger=")
			args[i] = t.scalar(`{{ if eq .Values.ledger.type "postgres" }}--ledger=$(HOOKKEEPER_LEDGER_DSN){{ else }}--ledger={{ .Values.ledger.sqlite.url }}{{ end }}`)
		case strings.HasPrefix(s, "--metrics-bind-address="):
			v.metricsAddress = strings.TrimPrefix(s, "--metrics-bind-address=")
			args[i] = t.scalar(`{{ if .Values.metrics.enable }}` + s + `{{ else }}--metrics-bind-address=0{{ end }}`)
		}
	}
	if !sawLedger {
		return errors.New("the manager has no --ledger argument to parameterise")
	}
	args = append(args, t.block(func(indent int) string {
		return lines(indent,
			`{{- with .Values.safeDestinations.allowedCIDRs }}`,
			`- --allowed-destination-cidrs={{ join "," . }}`,
			`{{- end }}`,
			`{{- with .Values.safeDestinations.clusterServiceCIDRs }}`,
			`- --cluster-service-cidrs={{ join "," . }}`,
			`{{- end }}`,
			`{{- with .Values.safeDestinations.clusterPodCIDRs }}`,
			`- --cluster-pod-cidrs={{ join "," . }}`,
			`{{- end }}`,
			`{{- with .Values.watchNamespaces }}`,
			`- --watch-namespaces={{ join "," . }}`,
			`{{- end }}`,
			`{{- range .Values.manager.extraArgs }}`,
			`- {{ . | quote }}`,
			`{{- end }}`)
	}))
	c["args"] = args
	env, _ := c["env"].([]any)
	c["env"] = append(env, t.block(func(indent int) string {
		return lines(indent,
			`{{- if eq .Values.ledger.type "postgres" }}`,
			`- name: HOOKKEEPER_LEDGER_DSN`,
			`  valueFrom:`,
			`    secretKeyRef:`,
			`      name: {{ required "ledger.postgres.dsnSecret.name: name the Secret holding the PostgreSQL DSN" .Values.ledger.postgres.dsnSecret.name }}`,
			`      key: {{ .Values.ledger.postgres.dsnSecret.key }}`,
			`{{- end }}`)
	}))
	// The ledger's PVC volume: only with SQLite (an emptyDir keeps the
	// mount, unused, with PostgreSQL).
	vols, _ := get(o, "spec", "template", "spec", "volumes").([]any)
	for i, vol := range vols {
		m, _ := vol.(map[string]any)
		claim := str(m, "persistentVolumeClaim", "claimName")
		if claim == "" {
			continue
		}
		name, _ := m["name"].(string)
		vols[i] = t.block(func(indent int) string {
			return lines(indent,
				`- name: `+name,
				`{{- if eq .Values.ledger.type "sqlite" }}`,
				`  persistentVolumeClaim:`,
				`    claimName: `+claim,
				`{{- else }}`,
				`  emptyDir: {}`,
				`{{- end }}`)
		})
	}
	return nil
}

const validateTemplate = `# Generated by ` + "`make helm-chart`" + `: refuses values that cannot work.
{{- if not (has .Values.ledger.type (list "sqlite" "postgres")) }}
{{- fail (printf "ledger.type: %q is neither sqlite nor postgres" .Values.ledger.type) }}
{{- end }}
{{- if and (eq .Values.ledger.type "sqlite") (gt (int .Values.manager.replicas) 1) }}
{{- fail "manager.replicas: the SQLite ledger serves one replica; use ledger.type=postgres for more" }}
{{- end }}
`

const chartYAML = `# Generated by ` + "`make helm-chart`" + ` from config/.
apiVersion: v2
name: hookkeeper
description: Reliable webhook delivery for Kubernetes, with a durable ledger and recovery as resources.
type: application
version: %s
appVersion: %q
`

type values struct {
	imageRepository, imageTag string
	resources                 string
	sqliteLedger              string
	sqliteStorage             string
	metricsAddress            string
}

func defaultValues() *values { return &values{sqliteStorage: "10Gi"} }

func (v *values) yaml() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, `# Generated by `+"`make helm-chart`"+` from config/ (defaults are config/default's).
manager:
  image:
    repository: %s
    # Empty: the chart's appVersion.
    tag: %q
    pullPolicy: IfNotPresent
  # More than one needs ledger.type=postgres.
  replicas: 1
  resources:
%s  # More manager flags (docs/configuration.md), e.g. --workers=16.
  extraArgs: []

ledger:
  # sqlite: embedded, one replica, on a PersistentVolumeClaim.
  # postgres: several replicas; the DSN is read from a Secret.
  type: sqlite
  sqlite:
    url: %s
    storage: %s
  postgres:
    dsnSecret:
      name: ""
      key: dsn

# Destinations endpoints may deliver to (docs/operations/safe-destinations.md).
safeDestinations:
  allowedCIDRs: []
  clusterServiceCIDRs: []
  clusterPodCIDRs: []

# The metrics endpoint (HTTPS on %s, authorized: bind hookkeeper-metrics-reader).
metrics:
  enable: true

# Prometheus Operator objects (need its CRDs).
prometheus:
  serviceMonitor:
    enable: false
  rules:
    enable: false

# The Grafana dashboard as a ConfigMap for Grafana's dashboard sidecar.
grafana:
  dashboard:
    enable: false

# A namespace-scoped install (docs/install.md, "Namespace-scoped install"):
# the manager watches only these namespaces (--watch-namespaces), and its
# Secret and hookkeeper grants are a Role in each of them (and one for its
# serving certificate's Secret in the release namespace) instead of
# ClusterRole rules. Empty: every namespace.
watchNamespaces: []

crd:
  enable: true
  # Keep the CRDs (and so every hookkeeper object) on helm uninstall.
  keep: true
`, v.imageRepository, v.imageTag, indent(v.resources, 4), v.sqliteLedger, v.sqliteStorage, v.metricsAddress)
	return b.String()
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		b.WriteString(pad + l + "\n")
	}
	return b.String()
}

// namespacedResources returns the resources ("group/resource") a manager
// rule may grant through a Role in a watched namespace: the CRDs of the
// inputs whose scope is Namespaced, the built-in kinds the manager is
// granted, and namespaces, whose get of a namespace's own object RBAC
// authorises in that namespace (the endpoint reconciler reads whether its
// namespace is terminating).
func namespacedResources(objects []object) map[string]bool {
	ns := map[string]bool{"/secrets": true, "/configmaps": true, "/events": true, "events.k8s.io/events": true,
		"coordination.k8s.io/leases": true, "/namespaces": true}
	for _, o := range objects {
		if o.kind() == "CustomResourceDefinition" && str(o, "spec", "scope") == "Namespaced" {
			ns[str(o, "spec", "group")+"/"+str(o, "spec", "names", "plural")] = true
		}
	}
	return ns
}

// scopeManagerRole makes the manager's ClusterRole follow
// .Values.watchNamespaces: with namespaces named, the ClusterRole keeps
// only its rules on cluster-scoped resources (TokenReviews,
// SubjectAccessReviews, the APIService) and the template it returns grants
// the namespaced rules (Secrets, the CRDs, Events) through a Role and
// RoleBinding in each watched namespace, plus the Secret rules in the
// release namespace for the serving certificate when that namespace is not
// watched.
func scopeManagerRole(o object, t *templater, namespaced map[string]bool, serviceAccount string) (string, error) {
	if serviceAccount == "" {
		return "", errors.New("the manager's Deployment names no serviceAccountName")
	}
	rules, _ := o["rules"].([]any)
	var cluster, local, secrets []any
	for _, r := range rules {
		groups, _ := get(r, "apiGroups").([]any)
		resources, _ := get(r, "resources").([]any)
		n, secret := 0, false
		for _, g := range groups {
			for _, res := range resources {
				base, _, _ := strings.Cut(fmt.Sprint(res), "/")
				if namespaced[fmt.Sprint(g)+"/"+base] {
					n++
				}
				secret = secret || (g == "" && base == "secrets")
			}
		}
		switch {
		case n == 0:
			cluster = append(cluster, r)
		case n == len(groups)*len(resources):
			local = append(local, r)
			if secret {
				secrets = append(secrets, r)
			}
		default:
			return "", fmt.Errorf("ClusterRole %s: a rule mixes namespaced and cluster-scoped resources: %v %v", o.name(), groups, resources)
		}
	}
	if len(cluster) == 0 || len(local) == 0 || len(secrets) == 0 {
		return "", fmt.Errorf("ClusterRole %s: want cluster-scoped rules, namespaced rules and a Secret rule; found %d, %d, %d", o.name(), len(cluster), len(local), len(secrets))
	}
	all, err := yamlBlock(rules, 0)
	if err != nil {
		return "", err
	}
	clusterOnly, err := yamlBlock(cluster, 0)
	if err != nil {
		return "", err
	}
	o["rules"] = t.block(func(int) string {
		return "\n{{- if .Values.watchNamespaces }}\n" + clusterOnly + "{{- else }}\n" + all + "{{- end }}"
	})
	localRules, err := yamlBlock(local, 0)
	if err != nil {
		return "", err
	}
	secretRules, err := yamlBlock(secrets, 0)
	if err != nil {
		return "", err
	}
	labels, err := yamlBlock(o.labels(), 4)
	if err != nil {
		return "", err
	}
	role := func(name, namespace, rules string) string {
		return fmt.Sprintf(`---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: %[1]s
  namespace: %[2]s
  labels:
%[4]srules:
%[3]s---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: %[1]s
  namespace: %[2]s
  labels:
%[4]sroleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: %[1]s
subjects:
- kind: ServiceAccount
  name: %[5]s
  namespace: {{ $.Release.Namespace }}
`, name, namespace, rules, labels, serviceAccount)
	}
	return "# Generated by `make helm-chart` from config/ (the ClusterRole " + o.name() + "): edit config/, not this file.\n" +
		"# The manager's namespaced grants as a Role in each of .Values.watchNamespaces.\n" +
		"{{- range .Values.watchNamespaces }}\n" + role(o.name(), "{{ . }}", localRules) + "{{- end }}\n" +
		"{{- if and .Values.watchNamespaces (not (has .Release.Namespace .Values.watchNamespaces)) }}\n" +
		"# The serving certificate's Secret lives in the release namespace.\n" +
		role(o.name()+"-serving-cert", "{{ .Release.Namespace }}", secretRules) + "{{- end }}\n", nil
}

// yamlBlock marshals v as YAML indented by n spaces.
func yamlBlock(v any, n int) (string, error) {
	raw, err := yaml.Marshal(v)
	if err != nil {
		return "", err
	}
	return indent(string(raw), n), nil
}
