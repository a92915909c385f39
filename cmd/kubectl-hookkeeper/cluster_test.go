package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// cluster is the real control plane (etcd and kube-apiserver with
// hookkeeper's CRDs, test/testenv) that the tests of kubectl's flags run
// the plugin against: started by the first test that needs it, stopped by
// TestMain. No manager runs: the tests act as its controllers where a
// verb waits for one.
var cluster struct {
	once       sync.Once
	err        error
	dir        string
	env        *envtest.Environment
	cfg        *rest.Config
	admin      client.WithWatch
	kubeconfig string // a cluster-admin's
	caFile     string // the API server's CA
	server     string // https://host:port
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cluster.env != nil {
		if err := cluster.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}
	if cluster.dir != "" {
		_ = os.RemoveAll(cluster.dir)
	}
	os.Exit(code)
}

// startCluster starts the control plane once; it fails, never skips, when
// the binaries are missing (testenv says how to build them).
func startCluster(t *testing.T) {
	t.Helper()
	cluster.once.Do(func() { cluster.err = start() })
	if cluster.err != nil {
		t.Fatalf("starting the control plane: %v", cluster.err)
	}
}

func start() error {
	var err error
	if cluster.dir, err = os.MkdirTemp("", "kubectl-hookkeeper-"); err != nil {
		return err
	}
	env, err := testenv.New()
	if err != nil {
		return err
	}
	if cluster.cfg, err = env.Start(); err != nil {
		return err
	}
	cluster.env = env
	if cluster.kubeconfig, err = testenv.Kubeconfig(env, cluster.dir); err != nil {
		return err
	}
	if cluster.admin, err = client.NewWithWatch(cluster.cfg, client.Options{Scheme: newScheme()}); err != nil {
		return err
	}
	cluster.caFile = filepath.Join(cluster.dir, "ca.crt")
	cluster.server = "https://" + strings.TrimPrefix(cluster.cfg.Host, "https://")
	return os.WriteFile(cluster.caFile, cluster.cfg.CAData, 0o600)
}

// runPlugin runs the plugin in this process, as `kubectl hookkeeper args`.
func runPlugin(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	err = run(ctx, args, streams)
	return out.String(), errOut.String(), err
}

// eventually retries f until it succeeds, for what the API server applies
// asynchronously (a new RoleBinding reaches its authorizer's cache).
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %v after 30s", what, err)
		}
		<-tick.C
	}
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := cluster.admin.Create(t.Context(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// namespaceWith creates namespace ns with WebhookEndpoints named eps (no
// manager reconciles them: their status is empty, so status shows them
// as NotReconciled).
func namespaceWith(t *testing.T, ns string, eps ...string) {
	t.Helper()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	for _, name := range eps {
		create(t, &hookv1.WebhookEndpoint{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       hookv1.WebhookEndpointSpec{URL: "https://" + name + ".example.com/hooks", EventTypes: []hookv1.EventTypePattern{"order.paid"}},
		})
	}
}

// grantList lets subject list webhookendpoints in ns, and nothing else.
func grantList(t *testing.T, ns string, subject rbacv1.Subject) {
	t.Helper()
	name := "list-endpoints-" + strings.ToLower(subject.Kind)
	create(t,
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{hookv1.GroupVersion.Group}, Resources: []string{"webhookendpoints"}, Verbs: []string{"list"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{subject},
		})
}

// notReconciledRow is status's line for an endpoint no manager reconciled.
func notReconciledRow(ns, name string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^` + ns + `\s+` + name + `\s+Unknown\s+Unknown\s+0\s+NotReconciled$`)
}

// TestImpersonation: --as and --as-group reach the API server, which
// authorizes the impersonated user, not the kubeconfig's admin: alone,
// alice is refused by name; as a member of a group granted list she sees
// the table; the grant does not let her create a recovery, and none is
// created.
func TestImpersonation(t *testing.T) {
	startCluster(t)
	const ns = "plugin-as"
	namespaceWith(t, ns, "billing")
	as := func(args ...string) []string {
		return append(args, "-n", ns, "--kubeconfig", cluster.kubeconfig, "--as", "alice")
	}

	stdout, _, err := runPlugin(t, as("status")...)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "alice" cannot list resource "webhookendpoints" in API group "hookkeeper.dev" in the namespace "plugin-as"`) {
		t.Fatalf("status as alice, who may not list: %v (stdout %q), want a Forbidden naming alice", err, stdout)
	}

	grantList(t, ns, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "hookkeeper-readers"})
	eventually(t, "status as alice in hookkeeper-readers", func() error {
		stdout, _, err = runPlugin(t, as("status", "--as-group", "hookkeeper-readers")...)
		return err
	})
	if !notReconciledRow(ns, "billing").MatchString(stdout) {
		t.Errorf("status as alice in hookkeeper-readers:\n%s", stdout)
	}

	_, _, err = runPlugin(t, as("recover", "billing", "--action", "Dismiss", "--as-group", "hookkeeper-readers")...)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "alice" cannot create resource "deliveryrecoveries"`) {
		t.Errorf("recover as alice, who may only list endpoints: %v, want a Forbidden naming alice", err)
	}
	var recs hookv1.DeliveryRecoveryList
	if err := cluster.admin.List(t.Context(), &recs, client.InNamespace(ns)); err != nil || len(recs.Items) != 0 {
		t.Errorf("recoveries after a refused recover: %d, %v", len(recs.Items), err)
	}
}

// TestTokenWithoutKubeconfig: with no kubeconfig at all, --server and
// --token (a ServiceAccount's, from the TokenRequest API) connect, with
// --certificate-authority or --insecure-skip-tls-verify; the token is who
// the server authorizes, and a token it does not know is Unauthorized.
func TestTokenWithoutKubeconfig(t *testing.T) {
	startCluster(t)
	const ns = "plugin-token"
	namespaceWith(t, ns, "billing")
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"}})
	grantList(t, ns, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "reader"})
	clientset, err := kubernetes.NewForConfig(cluster.cfg)
	if err != nil {
		t.Fatal(err)
	}
	expiry := int64(600)
	tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), "reader",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for the ServiceAccount: %v", err)
	}
	// No kubeconfig: KUBECONFIG names a file that does not exist (which
	// also keeps ~/.kube/config out), and no --kubeconfig.
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "absent"))
	if _, _, err := runPlugin(t, "status", "-n", ns, "--request-timeout", "5s"); err == nil {
		t.Fatal("status with no kubeconfig and no --server succeeded")
	}

	for _, tls := range [][]string{{"--certificate-authority", cluster.caFile}, {"--insecure-skip-tls-verify"}} {
		args := append([]string{"status", "-n", ns, "--server", cluster.server, "--token", tr.Status.Token}, tls...)
		var stdout string
		eventually(t, fmt.Sprintf("status with --server, --token and %s", tls[0]), func() error {
			stdout, _, err = runPlugin(t, args...)
			return err
		})
		if !notReconciledRow(ns, "billing").MatchString(stdout) {
			t.Errorf("status with --server, --token and %s:\n%s", tls[0], stdout)
		}
	}

	_, _, err = runPlugin(t, "status", "-A", "--server", cluster.server, "--token", tr.Status.Token, "--certificate-authority", cluster.caFile)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "system:serviceaccount:plugin-token:reader" cannot list resource "webhookendpoints"`) {
		t.Errorf("status -A as the ServiceAccount granted one namespace: %v, want a Forbidden naming it", err)
	}
	_, _, err = runPlugin(t, "status", "-n", ns, "--server", cluster.server, "--token", "not-a-token", "--certificate-authority", cluster.caFile)
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("status with an unknown token: %v, want Unauthorized", err)
	}
}

// endpointList is what status -o json|yaml prints: a v1 List of the
// endpoints that need attention, each with its kind, without managedFields.
type endpointList struct {
	APIVersion string                   `json:"apiVersion"`
	Kind       string                   `json:"kind"`
	Items      []hookv1.WebhookEndpoint `json:"items"`
}

// TestOutputFormats: against the real API server, status -o json and -o
// yaml parse as a List of the endpoints, -o name and -o jsonpath print as
// kubectl's do, -o wide adds columns; recover -o json prints the recovery
// as it ended (the test completes it, as the manager would), and nothing
// else, so that it parses.
func TestOutputFormats(t *testing.T) {
	startCluster(t)
	const ns = "plugin-output"
	namespaceWith(t, ns, "audit", "billing")
	plugin := func(args ...string) string {
		t.Helper()
		stdout, stderr, err := runPlugin(t, append(args, "-n", ns, "--kubeconfig", cluster.kubeconfig)...)
		if err != nil {
			t.Fatalf("%q: %v\n%s", args, err, stderr)
		}
		return stdout
	}

	for _, format := range []string{"json", "yaml"} {
		out := plugin("status", "-o", format)
		var list endpointList
		if err := parseAs(format, []byte(out), &list); err != nil {
			t.Fatalf("status -o %s does not parse: %v\n%s", format, err, out)
		}
		if list.APIVersion != "v1" || list.Kind != "List" || len(list.Items) != 2 {
			t.Fatalf("status -o %s: %s %s with %d items, want a v1 List of 2:\n%s", format, list.APIVersion, list.Kind, len(list.Items), out)
		}
		for i, name := range []string{"audit", "billing"} {
			ep := list.Items[i]
			if ep.Kind != "WebhookEndpoint" || ep.APIVersion != "hookkeeper.dev/v1alpha1" || ep.Name != name || ep.Namespace != ns ||
				ep.Spec.URL != "https://"+name+".example.com/hooks" || ep.UID == "" || len(ep.ManagedFields) != 0 {
				t.Errorf("status -o %s: item %d: %+v", format, i, ep)
			}
		}
	}
	if out := plugin("status", "-o", "name"); out != "webhookendpoint.hookkeeper.dev/audit\nwebhookendpoint.hookkeeper.dev/billing\n" {
		t.Errorf("status -o name: %q", out)
	}
	if out := plugin("status", "-o", "jsonpath={.items[*].metadata.name}"); out != "audit billing" {
		t.Errorf("status -o jsonpath: %q", out)
	}
	if out := plugin("status", "-o", "wide"); !regexp.MustCompile(`^NAMESPACE\s+NAME\s+READY\s+HEALTHY\s+EXHAUSTED\s+REASON\s+PENDING\s+LAST FAILURE\s+MESSAGE\n`).MatchString(out) {
		t.Errorf("status -o wide:\n%s", out)
	}

	// recover -o json: the test plays the recovery controller.
	w, err := cluster.admin.Watch(t.Context(), &hookv1.DeliveryRecoveryList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	type result struct {
		stdout, stderr string
		err            error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.stdout, r.stderr, r.err = runPlugin(t, "recover", "billing", "--action", "Dismiss", "--timeout", "50s", "-o", "json", "-n", ns, "--kubeconfig", cluster.kubeconfig)
		done <- r
	}()
	var created *hookv1.DeliveryRecovery
	select {
	case ev := <-w.ResultChan():
		created = ev.Object.(*hookv1.DeliveryRecovery)
	case r := <-done:
		t.Fatalf("recover ended before creating a recovery: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	created.Status.State = hookv1.RecoveryComplete
	created.Status.Conditions = []metav1.Condition{{Type: hookv1.ConditionComplete, Status: metav1.ConditionTrue, Reason: "Completed", Message: "nothing to recover", LastTransitionTime: metav1.Now()}}
	if err := cluster.admin.Status().Update(t.Context(), created); err != nil {
		t.Fatalf("completing the recovery: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("recover -o json: %v\n%s", r.err, r.stderr)
	}
	var rec hookv1.DeliveryRecovery
	dec := json.NewDecoder(bytes.NewReader([]byte(r.stdout)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil || dec.More() {
		t.Fatalf("recover -o json is not one DeliveryRecovery: %v\n%s", err, r.stdout)
	}
	if rec.Kind != "DeliveryRecovery" || rec.Name != created.Name || rec.Spec.Action != "Dismiss" || rec.Status.State != hookv1.RecoveryComplete {
		t.Errorf("recover -o json: %+v", rec)
	}
	// -o yaml of the same object parses too (through the object printer).
	var back hookv1.DeliveryRecovery
	pr, err := outputAs(t, "yaml").printer()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := newPlugin(genericiooptions.NewTestIOStreamsDiscard()).printObject(pr, &rec, &b); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b.Bytes(), &back); err != nil || back.Name != rec.Name || back.Kind != "DeliveryRecovery" {
		t.Errorf("a recovery -o yaml: %v\n%s", err, b.String())
	}
}
