package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

func endpointWith(name string, ready, healthy metav1.ConditionStatus, reason string, exhausted int64) hookv1.WebhookEndpoint {
	ep := hookv1.WebhookEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}}
	ep.Status.Conditions = []metav1.Condition{
		{Type: hookv1.ConditionReady, Status: ready, Reason: reason},
		{Type: hookv1.ConditionHealthy, Status: healthy, Reason: "ConsecutiveFailures"},
	}
	ep.Status.Deliveries.ExhaustedUnresolved = exhausted
	return ep
}

func statusText(t *testing.T, eps []hookv1.WebhookEndpoint, opts printers.PrintOptions) string {
	t.Helper()
	var b bytes.Buffer
	if err := printStatus(&b, needAttention(eps), opts); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestStatusTable: the table (cli-runtime's table printer) as it was
// before the printer, the wide columns only with -o wide, and a sentence
// when nothing needs attention.
func TestStatusTable(t *testing.T) {
	eps := []hookv1.WebhookEndpoint{
		endpointWith("fine", metav1.ConditionTrue, metav1.ConditionTrue, "Reconciled", 0),
		endpointWith("forbidden", metav1.ConditionFalse, metav1.ConditionTrue, "DestinationForbidden", 0),
		endpointWith("failing", metav1.ConditionTrue, metav1.ConditionFalse, "Reconciled", 0),
		endpointWith("exhausted", metav1.ConditionTrue, metav1.ConditionTrue, "Reconciled", 3),
	}
	eps[1].Status.Conditions[0].Message = "10.0.0.1 is a private address"
	eps[2].Status.Deliveries.Pending, eps[2].Status.LastFailureReason = 7, "HTTP 503"
	want := "" +
		"NAMESPACE   NAME        READY   HEALTHY   EXHAUSTED   REASON\n" +
		"shop        forbidden   False   True      0           DestinationForbidden\n" +
		"shop        failing     True    False     0           ConsecutiveFailures\n" +
		"shop        exhausted   True    True      3           UnresolvedDeliveries\n"
	if got := statusText(t, eps, printers.PrintOptions{}); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	wantWide := "" +
		"NAMESPACE   NAME        READY   HEALTHY   EXHAUSTED   REASON                 PENDING   LAST FAILURE   MESSAGE\n" +
		"shop        forbidden   False   True      0           DestinationForbidden   0         -              10.0.0.1 is a private address\n" +
		"shop        failing     True    False     0           ConsecutiveFailures    7         HTTP 503       -\n" +
		"shop        exhausted   True    True      3           UnresolvedDeliveries   0         -              -\n"
	if got := statusText(t, eps, printers.PrintOptions{Wide: true}); got != wantWide {
		t.Errorf("wide: got\n%s\nwant\n%s", got, wantWide)
	}
	if got := statusText(t, eps[:2], printers.PrintOptions{NoHeaders: true}); got != "shop   forbidden   False   True   0     DestinationForbidden\n" {
		t.Errorf("no headers: %q", got)
	}
	if got := statusText(t, eps[:1], printers.PrintOptions{}); got != "every endpoint is Ready and Healthy, with no exhausted deliveries\n" {
		t.Errorf("all fine: %q", got)
	}
}

func TestRecoverySpec(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	spec, err := recoverySpec("billing", "Auto", 2*time.Hour, "payment.*", 50, now)
	if err != nil {
		t.Fatal(err)
	}
	if spec.EndpointRef.Name != "billing" || spec.Action != "Auto" || *spec.Limit != 50 ||
		!spec.Selector.ExhaustedAfter.Time.Equal(now.Add(-2*time.Hour)) || spec.Selector.EventTypes[0] != "payment.*" {
		t.Errorf("spec %+v", spec)
	}
	if spec, _ := recoverySpec("billing", "Dismiss", 0, "", 0, now); spec.Selector != nil || spec.Limit != nil {
		t.Errorf("no filters: %+v", spec)
	}
	for _, c := range []struct {
		action string
		since  time.Duration
		limit  int
		want   string
	}{
		{"", 0, 0, "--action is required"},
		{"Retry!", 0, 0, `--action "Retry!": must be`},
		{"Auto", -time.Hour, 0, "--since -1h0m0s: must be positive"},
		{"Auto", 0, -1, "--limit -1: must be positive"},
	} {
		if _, err := recoverySpec("billing", c.action, c.since, "", c.limit, now); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c, err, c.want)
		}
	}
}

// withFlags is a plugin whose kubectl connection flags were given args.
func withFlags(t *testing.T, args ...string) *plugin {
	t.Helper()
	p := newPlugin(genericiooptions.NewTestIOStreamsDiscard())
	cmd := &cobra.Command{}
	p.config.AddFlags(cmd.PersistentFlags())
	if err := cmd.PersistentFlags().Parse(args); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return p
}

// TestConnectionFlags: kubectl's flags reach the client configuration as
// kubectl's own: --context picks the server and the default namespace, -n
// wins over the context's, --as, --as-group, --token, --server and
// --request-timeout override the kubeconfig's. That the API server
// honours them is TestImpersonation's and TestTokenWithoutKubeconfig's.
func TestConnectionFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: prod
  cluster: {server: "https://prod.example:6443"}
- name: staging
  cluster: {server: "https://staging.example:6443"}
users:
- name: me
  user: {token: not-a-real-token}
contexts:
- name: prod
  context: {cluster: prod, user: me, namespace: shop}
- name: staging
  context: {cluster: staging, user: me, namespace: billing}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args                      []string
		wantServer, wantNamespace string
	}{
		{nil, "https://prod.example:6443", "shop"},
		{[]string{"--context", "staging"}, "https://staging.example:6443", "billing"},
		{[]string{"--context", "staging", "-n", "other"}, "https://staging.example:6443", "other"},
		{[]string{"--server", "https://elsewhere.example:6443"}, "https://elsewhere.example:6443", "shop"},
	} {
		cfg, ns, err := withFlags(t, append([]string{"--kubeconfig", path}, c.args...)...).restConfig()
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if cfg.Host != c.wantServer || ns != c.wantNamespace {
			t.Errorf("%q: server %s namespace %s, want %s %s", c.args, cfg.Host, ns, c.wantServer, c.wantNamespace)
		}
	}

	cfg, _, err := withFlags(t, "--kubeconfig", path, "--as", "alice", "--as-group", "ops", "--as-group", "audit", "--token", "other-token", "--request-timeout", "7s").restConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Impersonate.UserName != "alice" || !slices.Equal(cfg.Impersonate.Groups, []string{"ops", "audit"}) || cfg.BearerToken != "other-token" || cfg.Timeout != 7*time.Second {
		t.Errorf("impersonate %+v token %q timeout %s", cfg.Impersonate, cfg.BearerToken, cfg.Timeout)
	}

	if _, _, err := withFlags(t, "--kubeconfig", path, "--context", "nowhere").restConfig(); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("an unknown context: %v", err)
	}
}
