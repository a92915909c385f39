package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

func TestStatusTable(t *testing.T) {
	got := statusTable([]hookv1.WebhookEndpoint{
		endpointWith("fine", metav1.ConditionTrue, metav1.ConditionTrue, "Reconciled", 0),
		endpointWith("forbidden", metav1.ConditionFalse, metav1.ConditionTrue, "DestinationForbidden", 0),
		endpointWith("failing", metav1.ConditionTrue, metav1.ConditionFalse, "Reconciled", 0),
		endpointWith("exhausted", metav1.ConditionTrue, metav1.ConditionTrue, "Reconciled", 3),
	})
	want := "" +
		"NAMESPACE   NAME        READY   HEALTHY   EXHAUSTED   REASON\n" +
		"shop        forbidden   False   True      0           DestinationForbidden\n" +
		"shop        failing     True    False     0           ConsecutiveFailures\n" +
		"shop        exhausted   True    True      3           UnresolvedDeliveries\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := statusTable([]hookv1.WebhookEndpoint{endpointWith("fine", metav1.ConditionTrue, metav1.ConditionTrue, "Reconciled", 0)}); !strings.HasPrefix(got, "every endpoint") {
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

// TestLoadKubeconfig: --context picks the server and the default namespace
// as kubectl's does, and -n wins over the context's namespace.
func TestLoadKubeconfig(t *testing.T) {
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
		context, namespace        string
		wantServer, wantNamespace string
	}{
		{"", "", "https://prod.example:6443", "shop"},
		{"staging", "", "https://staging.example:6443", "billing"},
		{"staging", "other", "https://staging.example:6443", "other"},
	} {
		cfg, ns, err := loadKubeconfig(path, c.context, c.namespace)
		if err != nil {
			t.Fatalf("context %q: %v", c.context, err)
		}
		if cfg.Host != c.wantServer || ns != c.wantNamespace {
			t.Errorf("context %q, -n %q: server %s namespace %s, want %s %s", c.context, c.namespace, cfg.Host, ns, c.wantServer, c.wantNamespace)
		}
	}
	if _, _, err := loadKubeconfig(path, "nowhere", ""); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("an unknown context: %v", err)
	}
}
