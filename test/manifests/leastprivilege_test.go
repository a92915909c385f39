package manifests

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/hookkeeper/hookkeeper/test/apicall"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// unusedGrants are the grants of the bundle's manager roles that the story
// below cannot show in the audit log, each with why it is granted anyway.
// An entry that the story does use is an error too: the list stays honest.
var unusedGrants = map[grant]string{
	{"events.k8s.io", "events", "patch"}:                        "client-go's Event recorder (tools/events) patches an Event into a series only when an Event of the same type, reason, action and regarding object, resourceVersion included, recurs within its six-minute window; every Event of this story regards a new resourceVersion of its endpoint. Without the grant a repeated Event would be refused and lost.",
	{"hookkeeper.dev", "webhookendpoints/finalizers", "update"}: "no request of its own: the OwnerReferencesPermissionEnforcement admission plugin (enabled in this test, as on OpenShift) checks it when the manager creates a signing Secret whose owner reference blocks its endpoint's deletion; the story's Secret creates would be refused (and show as 403) without it.",
}

// listFallback is why the caches' list grants stay although this API
// server never sees a list: client-go's informers open with a watch-list
// (a watch with sendInitialEvents; WatchListClient is on by default since
// Kubernetes 1.35), which RBAC authorizes as a watch, and fall back to a
// list where the API server cannot stream (kube-apiserver before 1.34, or
// its WatchList feature off) or the stream fails. Removing the grant
// would stop the controllers on such a cluster. A run that fell back uses
// it, which is no error.
const listFallback = "the caches' fallback from a watch-list to a list; see listFallback"

func init() {
	for _, resource := range []string{"webhookendpoints", "retrypolicies", "deliveryrecoveries", "webhookeventtypes", "webhookquotas"} {
		unusedGrants[grant{"hookkeeper.dev", resource, "list"}] = listFallback
	}
	unusedGrants[grant{"", "secrets", "list"}] = listFallback
	unusedGrants[grant{"", "configmaps", "list"}] = listFallback
	unusedGrants[grant{"", "namespaces", "list"}] = listFallback // the contracts' book watches namespaces' metadata (issue #44)
}

// grant is one verb on one resource (subresource after a slash) of one API
// group, as RBAC rules and audit events name them.
type grant struct{ group, resource, verb string }

func (g grant) String() string {
	if g.group == "" {
		return g.verb + " " + g.resource
	}
	return g.verb + " " + g.resource + "." + g.group
}

// TestManagerRunsOnTheBundlesRBACAndUsesEveryGrant runs the manager binary
// as the installer's ServiceAccount, with a token of it and nothing else
// (no impersonation, no admin credentials), through the whole story: the
// serving certificate provisioned and the APIService's caBundle kept, leader
// election, an endpoint with a generated signing secret and its event
// type's contract, a publish through
// the HTTP API authenticated with TokenReview and SubjectAccessReview, an
// exhaustion and its Event, a Retry recovery deleted after its TTL, a
// rotation, a read through the aggregated API, the endpoint's deletion and
// the Lease handed back at shutdown. kube-apiserver's audit log then shows
// that no request of the manager was refused, and that every verb the
// installer grants the manager was used (or is in unusedGrants with why).
func TestManagerRunsOnTheBundlesRBACAndUsesEveryGrant(t *testing.T) {
	installerYAML := buildInstaller(t)
	dir := t.TempDir()
	builtManager := make(chan error, 1)
	var binary string
	go func() {
		var err error
		binary, err = testenv.BuildManager(dir)
		builtManager <- err
	}()

	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	env.CRDDirectoryPaths = nil // the installer brings its own CRDs
	env.ErrorIfCRDPathMissing = false
	if _, err := testenv.FrontProxy(env, dir); err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(dir, "audit.log")
	auditPolicy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(auditPolicy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["`+serviceAccount+`"]
- level: None
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", auditPolicy).
		Set("audit-log-path", auditLog).
		Set("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	c := install(t, env, dir, installerYAML)
	kubeconfig, kubectl, run := c.kubeconfig, c.kubectl, c.run

	// The aggregated API as a local control plane reaches it
	// (testenv.RegisterDeliveryAPI): the installer's Service becomes an
	// ExternalName for 127.0.0.1 on the manager's port; the APIService
	// keeps the installer's spec, caBundle left to the manager.
	aggAddr, apiAddr, probeAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	_, aggPort, _ := net.SplitHostPort(aggAddr)
	run("", "delete", "service", "-n", namespace, testenv.DeliveryAPIService)
	run(fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  type: ExternalName\n  externalName: 127.0.0.1\n  ports:\n  - port: %s\n",
		testenv.DeliveryAPIService, namespace, aggPort), "apply", "-f", "-")
	run("", "patch", "apiservice", apiServiceName, "--type=merge", "-p", `{"spec":{"service":{"port":`+aggPort+`}}}`)

	// The manager's credentials: a token of the installer's ServiceAccount.
	managerKubeconfig := tokenKubeconfig(t, kubeconfig, strings.TrimSpace(run("", "create", "token", "hookkeeper-controller-manager", "-n", namespace, "--duration=1h")), dir)

	// A producer bound to the installer's publishing role in its namespace.
	const shop = "shop"
	run(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: producer, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: producer-publishes, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: hookkeeper-event-publisher}
subjects: [{kind: ServiceAccount, name: producer, namespace: %[1]s}]
`, shop), "apply", "-f", "-")
	producerToken := strings.TrimSpace(run("", "create", "token", "producer", "-n", shop, "--duration=1h"))

	var receiverDown atomic.Bool
	var delivered atomic.Int32
	receiverDown.Store(true)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if receiverDown.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		delivered.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)

	if err := <-builtManager; err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	manager := exec.Command(binary,
		"--ledger=sqlite://"+filepath.Join(dir, "ledger.db"),
		"--leader-elect",
		"--leader-election-namespace="+namespace,
		"--health-probe-bind-address="+probeAddr,
		"--metrics-bind-address=0",
		"--api-bind-address="+apiAddr,
		"--api-auth=kubernetes",
		"--serving-cert-secret=hookkeeper-serving-cert",
		"--serving-cert-namespace="+namespace,
		"--serving-cert-apiservice="+apiServiceName,
		"--aggregated-api-bind-address="+aggAddr,
		"--endpoint-status-resync=2s",
		"--allowed-destination-cidrs=127.0.0.0/8",
		"--zap-devel",
	)
	manager.Env = append(os.Environ(), "KUBECONFIG="+managerKubeconfig)
	manager.Stdout, manager.Stderr = logFile, logFile
	if err := manager.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- manager.Wait(); _ = logFile.Close() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = manager.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("the manager's exit after SIGTERM: %v\n%s", err, testenv.Tail(logPath, 40))
			}
		case <-time.After(30 * time.Second):
			_ = manager.Process.Kill()
			t.Logf("the manager, killed: %v", <-exited)
			t.Errorf("the manager did not stop within 30s of SIGTERM")
		}
	}
	t.Cleanup(stop)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\nmanager log:\n%s", append(args, testenv.Tail(logPath, 60))...)
	}
	eventually := func(what string, timeout time.Duration, check func() error) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			err := check()
			if err == nil {
				return
			}
			select {
			case e := <-exited:
				fail("%s: the manager exited: %v", what, e)
			default:
			}
			if time.Now().After(deadline) {
				fail("%s: %v", what, err)
			}
			time.Sleep(100 * time.Millisecond) // polling, not synchronization
		}
	}
	kwait := func(args ...string) {
		t.Helper()
		if out, err := testenv.RunKubectl(kubectl, kubeconfig, "", append([]string{"wait", "--timeout=60s"}, args...)...); err != nil {
			fail("kubectl wait %s: %v %s", strings.Join(args, " "), err, out)
		}
	}

	step := func(what string) { t.Log(what) }
	step("ready: a provisioned certificate (the readiness check waits for it)")
	probe := &http.Client{Timeout: 2 * time.Second}
	eventually("the manager's readiness", 90*time.Second, func() error {
		resp, err := probe.Get("http://" + probeAddr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
	caBundle := run("", "get", "secret", "-n", namespace, "hookkeeper-serving-cert", "-o", `jsonpath={.data.ca\.crt}`)
	roots := x509.NewCertPool()
	if pemBytes, err := base64.StdEncoding.DecodeString(caBundle); err != nil || !roots.AppendCertsFromPEM(pemBytes) {
		t.Fatalf("the serving Secret's ca.crt: %v", err)
	}
	api := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: "hookkeeper-api." + namespace + ".svc", MinVersion: tls.VersionTLS12,
	}}}

	step("an endpoint with a generated signing secret, on a fast policy")
	run(fmt.Sprintf(`apiVersion: hookkeeper.dev/v1alpha1
kind: RetryPolicy
metadata: {name: fast, namespace: %[1]s}
spec:
  backoff: {strategy: Fixed, initialDelay: 100ms, jitterPercent: 0}
  horizon: {maxAttempts: 2}
  attemptTimeout: 5s
  replayWindow: 1h
---
apiVersion: hookkeeper.dev/v1alpha1
kind: WebhookEndpoint
metadata: {name: orders, namespace: %[1]s}
spec:
  url: %[2]s/orders
  eventTypes: [order.created]
  retryPolicyRef: {name: fast}
---
apiVersion: hookkeeper.dev/v1alpha1
kind: WebhookEventType
metadata: {name: order-created, namespace: %[1]s}
spec:
  type: order.created
  schema: {type: object, required: [order], properties: {order: {type: integer}}}
---
apiVersion: hookkeeper.dev/v1alpha1
kind: WebhookQuota
metadata: {name: default, namespace: %[1]s}
spec:
  hard: {publishesPerSecond: 1000, eventsPerDay: 1000000}
`, shop, receiver.URL), "apply", "-f", "-")
	kwait("-n", shop, "webhookquota/default", "--for=condition=Ready")
	kwait("-n", shop, "webhookendpoint/orders", "--for=condition=Ready")
	kwait("-n", shop, "webhookeventtype/order-created", "--for=condition=Ready")
	kwait("-n", shop, "retrypolicy/fast", "--for=condition=Ready")

	step("a publish through the HTTP API, exhausted while the receiver is down")
	status, body, err := apicall.Do(api, "https://"+apiAddr, producerToken, http.MethodPost, "/v1/namespaces/"+shop+"/events",
		`{"type":"order.created","data":{"order":1}}`, "order-1")
	if err != nil || status != http.StatusCreated {
		fail("publishing as the producer: %d %s %v", status, body, err)
	}
	kwait("-n", shop, "webhookendpoint/orders", "--for=condition=DeliveriesExhausted")
	eventually("the DeliveriesExhausted Event", 30*time.Second, func() error {
		out, err := testenv.RunKubectl(kubectl, kubeconfig, "", "get", "events.events.k8s.io", "-n", shop, "-o", "jsonpath={.items[*].reason}")
		if err == nil && !strings.Contains(out, "DeliveriesExhausted") {
			err = fmt.Errorf("Events: %q", out)
		}
		return err
	})

	step("a Retry recovery, delivered, then deleted after its TTL")
	receiverDown.Store(false)
	run(fmt.Sprintf(`apiVersion: hookkeeper.dev/v1alpha1
kind: DeliveryRecovery
metadata: {name: retry-orders, namespace: %s}
spec:
  endpointRef: {name: orders}
  action: Retry
  ttlSecondsAfterFinished: 1
`, shop), "apply", "-f", "-")
	kwait("-n", shop, "deliveryrecovery/retry-orders", "--for=delete")
	if delivered.Load() == 0 {
		fail("the recovery finished and the receiver got nothing")
	}

	step("a rotation: removing the generated secret's key asks for a new one")
	run("", "patch", "secret", "-n", shop, "orders-signing", "--type=json", "-p", `[{"op":"remove","path":"/data/signingSecret"}]`)
	eventually("the new signing secret", 30*time.Second, func() error {
		out, err := testenv.RunKubectl(kubectl, kubeconfig, "", "get", "secret", "-n", shop, "orders-signing", "-o", "jsonpath={.data.signingSecret}")
		if err == nil && out == "" {
			err = fmt.Errorf("no key signingSecret yet")
		}
		return err
	})

	step("a read through kube-apiserver and the aggregated API, trusted through the caBundle the manager wrote")
	if err := testenv.WaitDeliveryAPI(kubectl, kubeconfig, 60*time.Second); err != nil {
		fail("%v", err)
	}
	if out := run("", "get", "deliveries", "-n", shop, "-o", "name"); strings.TrimSpace(out) == "" {
		fail("kubectl get deliveries -n %s listed nothing", shop)
	}

	step("the endpoint deleted: the manager removes its finalizer")
	run("", "delete", "-n", shop, "webhookendpoint/orders", "--wait", "--timeout=60s")

	step("shutdown: the Lease handed over")
	// The aggregated API goes with the manager: unregister it first so
	// that discovery does not wait on it.
	if err := testenv.UnregisterDeliveryAPI(kubectl, kubeconfig); err != nil {
		t.Error(err)
	}
	stop()
	holder := run("", "get", "lease", "-n", namespace, "controller-leader.hookkeeper.dev", "-o", "jsonpath={.spec.holderIdentity}")
	if holder != "" {
		t.Errorf("the Lease is still held by %q after the manager stopped", holder)
	}

	used, refused := readAudit(t, auditLog)
	if len(refused) > 0 {
		t.Errorf("the API server refused %d requests of the manager (the bundle's RBAC lacks them):\n%s", len(refused), strings.Join(refused, "\n"))
	}
	granted := managerGrants(t, installerYAML)
	if len(granted) < 20 {
		t.Fatalf("found only %d grants of the manager in the installer: %v", len(granted), granted)
	}
	var unused, stale []string
	for _, g := range granted {
		_, allowed := unusedGrants[g.grant]
		switch usedBy := g.usedIn(used); {
		case !usedBy && !allowed:
			unused = append(unused, fmt.Sprintf("%s (%s)", g.grant, g.role))
		case usedBy && allowed && unusedGrants[g.grant] != listFallback:
			stale = append(stale, g.String())
		}
	}
	for g := range unusedGrants {
		if !slices.ContainsFunc(granted, func(r ruleGrant) bool { return r.grant == g }) {
			stale = append(stale, g.String()+" (not granted at all)")
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		t.Errorf("the installer grants the manager what it never used in the story; remove the grant, or drive it, or say in unusedGrants why it stays:\n%s", strings.Join(unused, "\n"))
	}
	if len(stale) > 0 {
		t.Errorf("unusedGrants names grants the story did use (or that are not granted): %v", stale)
	}
	if t.Failed() {
		t.Logf("manager log:\n%s", testenv.Tail(logPath, 80))
	}
}

// cluster is a control plane the installer was applied to.
type cluster struct {
	cfg                 *rest.Config // its admin
	kubeconfig, kubectl string
	applied             string // what applying the installer printed
	// run runs kubectl with stdin (none when empty) as the admin, failing
	// the test on an error.
	run func(stdin string, args ...string) string
}

// install starts env, configured by the caller, with an admin kubeconfig
// in dir, and applies installerYAML to it in one server-side apply, as an
// admin would. The control plane stops with the test.
func install(t *testing.T, env *envtest.Environment, dir string, installerYAML []byte) *cluster {
	t.Helper()
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c := &cluster{cfg: cfg}
	if c.kubeconfig, err = testenv.Kubeconfig(env, dir); err != nil {
		t.Fatal(err)
	}
	if c.kubectl, err = testenv.Kubectl(); err != nil {
		t.Fatal(err)
	}
	c.run = func(stdin string, args ...string) string {
		t.Helper()
		out, err := testenv.RunKubectl(c.kubectl, c.kubeconfig, stdin, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	installer := filepath.Join(dir, "install.yaml")
	if err := os.WriteFile(installer, installerYAML, 0o600); err != nil {
		t.Fatal(err)
	}
	c.applied = c.run("", "apply", "--server-side", "-f", installer)
	return c
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// tokenKubeconfig writes a kubeconfig for the control plane of kubeconfig
// that authenticates with token alone, and returns its path.
func tokenKubeconfig(t *testing.T, kubeconfig, token, dir string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		t.Fatalf("%s has no current context", kubeconfig)
	}
	auth := cfg.AuthInfos[ctx.AuthInfo]
	auth.ClientCertificate, auth.ClientCertificateData, auth.ClientKey, auth.ClientKeyData = "", nil, "", nil
	auth.Username, auth.Password = "", ""
	auth.Token = token
	path := filepath.Join(dir, "manager.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// auditRequest is one request of the manager as the audit log names it.
type auditRequest struct {
	grant
	namespace, name string
}

// readAudit returns the manager's requests from kube-apiserver's audit log
// (the policy logs only the manager's ServiceAccount), and those refused
// with 403.
func readAudit(t *testing.T, path string) (used []auditRequest, refused []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the audit log: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for sc.Scan() {
		var ev struct {
			Verb       string `json:"verb"`
			RequestURI string `json:"requestURI"`
			User       struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef *struct {
				APIGroup    string `json:"apiGroup"`
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
				Namespace   string `json:"namespace"`
				Name        string `json:"name"`
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("an audit event: %v", err)
		}
		if ev.User.Username != serviceAccount {
			t.Fatalf("the audit log holds a request of %s: the policy logs only the manager", ev.User.Username)
		}
		if ev.ResponseStatus != nil && ev.ResponseStatus.Code == http.StatusForbidden {
			refused = append(refused, ev.Verb+" "+ev.RequestURI)
			continue
		}
		if ev.ObjectRef == nil {
			continue // discovery and other non-resource requests
		}
		r := auditRequest{grant: grant{ev.ObjectRef.APIGroup, ev.ObjectRef.Resource, ev.Verb}, namespace: ev.ObjectRef.Namespace, name: ev.ObjectRef.Name}
		if ev.ObjectRef.Subresource != "" {
			r.resource += "/" + ev.ObjectRef.Subresource
		}
		used = append(used, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(used) == 0 {
		t.Fatal("the audit log holds no request of the manager")
	}
	return used, refused
}

// ruleGrant is one grant of a role bound to the manager by the installer,
// with the rule's scope.
type ruleGrant struct {
	grant
	role          string
	namespace     string // a Role's; "" for a ClusterRole bound cluster-wide
	resourceNames []string
}

// usedIn reports whether a request in used falls under g.
func (g ruleGrant) usedIn(used []auditRequest) bool {
	return slices.ContainsFunc(used, func(r auditRequest) bool {
		return r.grant == g.grant &&
			(g.namespace == "" || r.namespace == g.namespace) &&
			(len(g.resourceNames) == 0 || slices.Contains(g.resourceNames, r.name))
	})
}

// managerGrants returns every grant of the roles the installer defines and
// binds to the manager's ServiceAccount. Roles it binds but does not define
// (system:auth-delegator, extension-apiserver-authentication-reader) are
// the cluster's, not the bundle's.
func managerGrants(t *testing.T, installer []byte) []ruleGrant {
	t.Helper()
	type roleKey struct{ kind, namespace, name string }
	roles := map[roleKey][]any{}
	var bindings []*unstructured.Unstructured
	for doc := range strings.SplitSeq(string(installer), "\n---\n") {
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("parsing the installer: %v", err)
		}
		switch obj.GetKind() {
		case "Role", "ClusterRole":
			rules, _, _ := unstructured.NestedSlice(obj.Object, "rules")
			roles[roleKey{obj.GetKind(), obj.GetNamespace(), obj.GetName()}] = rules
		case "RoleBinding", "ClusterRoleBinding":
			bindings = append(bindings, obj.DeepCopy())
		}
	}
	sa := strings.Split(serviceAccount, ":") // system:serviceaccount:<ns>:<name>
	var out []ruleGrant
	for _, b := range bindings {
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		if !slices.ContainsFunc(subjects, func(s any) bool {
			m, _ := s.(map[string]any)
			return m["kind"] == "ServiceAccount" && m["namespace"] == sa[2] && m["name"] == sa[3]
		}) {
			continue
		}
		kind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
		key := roleKey{kind, "", name}
		if kind == "Role" {
			key.namespace = b.GetNamespace()
		}
		rules, ok := roles[key]
		if !ok {
			continue
		}
		for _, r := range rules {
			m, _ := r.(map[string]any)
			strs := func(field string) []string {
				s, _, _ := unstructured.NestedStringSlice(m, field)
				return s
			}
			for _, group := range strs("apiGroups") {
				for _, resource := range strs("resources") {
					for _, verb := range strs("verbs") {
						out = append(out, ruleGrant{grant: grant{group, resource, verb}, role: kind + " " + name,
							namespace: b.GetNamespace(), resourceNames: strs("resourceNames")})
					}
				}
			}
		}
	}
	return out
}
