package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
)

// send-test and trace read and write the aggregated API through
// kube-apiserver, with the suite's kubeconfig, as a user's plugin does.
var _ = Describe("kubectl hookkeeper send-test and trace", func() {
	It("sends a test event to one endpoint only, waits for its outcome, and traces an event through its reissue", func() {
		ns := useNamespace("e2e-plugin-send")
		run := func(args ...string) (string, string, error) {
			return runPlugin(kubeconfig, append(args, "-n", ns)...)
		}
		var accept atomic.Bool
		billing := newReceiver("billing", false, answer(http.StatusNoContent))
		everything := newReceiver("everything (subscribed to *)", false, answer(http.StatusNoContent))
		flaky := newReceiver("flaky (503 until accepting)", false, func(int, *received) int {
			if accept.Load() {
				return http.StatusNoContent
			}
			return http.StatusServiceUnavailable
		})
		apply(policyYAML(ns, "twice", "100ms", 2) + "---\n" +
			endpointYAML(ns, "billing", billing.URL("/hooks"), "[order.paid]", "twice", "") + "---\n" +
			endpointYAML(ns, "everything", everything.URL("/hooks"), `["*"]`, "twice", "") + "---\n" +
			endpointYAML(ns, "flaky", flaky.URL("/hooks"), "[order.paid]", "twice", ""))
		kubectl("wait", "-n", ns, "webhookendpoint", "--all", "--for=condition=Ready", "--timeout=30s")

		By("send-test billing: delivered, to billing only, though billing subscribes to order.paid alone")
		stdout, stderr, err := run("send-test", "billing", "--timeout", "60s")
		Expect(err).NotTo(HaveOccurred(), "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		m := regexp.MustCompile(`^webhookevent/(evt_\w+) created \(hookkeeper\.test to endpoint billing\)\n`).FindStringSubmatch(stdout)
		Expect(m).NotTo(BeNil(), stdout)
		sent := m[1]
		Expect(stdout).To(MatchRegexp(`\ndelivery/dlv_\w+ to billing: Delivered, 1 attempt, last HTTP 204\n  attempt 1 at \S+ took \S+: HTTP 204\n$`))
		Expect(billing.of(sent)).To(HaveLen(1))
		Expect(billing.of(sent)[0].Type).To(Equal("hookkeeper.test"))
		Expect(everything.received()).To(BeEmpty(), "an endpoint subscribed to * received the addressed test event")
		Expect(flaky.received()).To(BeEmpty())

		By("send-test flaky: exhausted after two 503s, said so, and a failure exit")
		stdout, stderr, err = run("send-test", "flaky", "--timeout", "60s")
		Expect(err).To(HaveOccurred(), stdout)
		m = regexp.MustCompile(`^webhookevent/(evt_\w+) created \(hookkeeper\.test to endpoint flaky\)\n`).FindStringSubmatch(stdout)
		Expect(m).NotTo(BeNil(), stdout)
		failed := m[1]
		Expect(stdout).To(MatchRegexp(`\ndelivery/(dlv_\w+) to flaky: Exhausted \(MaxAttempts\), 2 attempts, last HTTP 503, resolution Unresolved\n` +
			`  attempt 1 at \S+ took \S+: HTTP 503: HTTP 503\n  attempt 2 at \S+ took \S+: HTTP 503: HTTP 503\n$`))
		Expect(stderr).To(MatchRegexp(`^error: delivery/dlv_\w+ to flaky is Exhausted\n$`))

		By("send-test of an endpoint that does not exist: the API's 422 on spec.endpoint, nothing sent")
		stdout, stderr, err = run("send-test", "nobody", "--timeout", "10s")
		Expect(err).To(HaveOccurred())
		Expect(stdout).To(BeEmpty())
		Expect(stderr).To(ContainSubstring("spec.endpoint"))
		Expect(stderr).To(ContainSubstring(`WebhookEndpoint "nobody" does not exist in namespace e2e-plugin-send`))

		By("a Reissue of the exhausted test delivery, accepted this time")
		accept.Store(true)
		stdout, stderr, err = runPlugin(kubeconfig, "recover", "flaky", "--action", "Reissue", "--timeout", "60s", "-n", ns)
		Expect(err).NotTo(HaveOccurred(), "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		var reissue string
		Eventually(func(g Gomega) {
			out, err := runKubectlAt(kubeconfig, "get", "webhookevents", "-n", ns, "--field-selector", "spec.type=hookkeeper.test",
				"-o", `jsonpath={range .items[?(@.spec.reissueOf=="`+failed+`")]}{.metadata.name}{end}`)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(HavePrefix("evt_"))
			reissue = out
			ds, err := runKubectlAt(kubeconfig, "get", "deliveries", "-n", ns, "--field-selector", "spec.event="+reissue, "-o", "jsonpath={.items[*].status.state}")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ds).To(Equal("Delivered"))
		}).WithTimeout(60 * time.Second).Should(Succeed())

		By("trace: the event, its exhausted delivery with both attempts, the reissue's event and its delivery, as a tree")
		stdout, stderr, err = run("trace", failed)
		Expect(err).NotTo(HaveOccurred(), stderr)
		// Tracing is on in the suite: the event and its reissued copy name
		// the trace they were published in (the copy continues the
		// original's, ADR 0051).
		want := `^webhookevent/` + failed + ` hookkeeper\.test, created \S+, trace [0-9a-f]{32}\n` +
			`└── delivery/dlv_\w+ to flaky: Exhausted \(MaxAttempts\), 2 attempts, last HTTP 503, resolution Reissued\n` +
			`    ├── attempt 1 at \S+ took \S+: HTTP 503: HTTP 503\n` +
			`    ├── attempt 2 at \S+ took \S+: HTTP 503: HTTP 503\n` +
			`    └── reissued as webhookevent/` + reissue + ` hookkeeper\.test, created \S+, reissues ` + failed + `, trace [0-9a-f]{32}\n` +
			`        └── delivery/dlv_\w+ to flaky: Delivered, 1 attempt, last HTTP 204\n` +
			`            └── attempt 1 at \S+ took \S+: HTTP 204\n$`
		Expect(stdout).To(MatchRegexp(want))

		By("trace of an unknown event: not found, by name")
		_, stderr, err = run("trace", "evt_00000000000000000000000000")
		Expect(err).To(HaveOccurred())
		Expect(stderr).To(ContainSubstring(`"evt_00000000000000000000000000" not found`))

		By("no secret of the run in what the plugin printed")
		for _, ep := range []string{"billing", "flaky"} {
			Expect(stdout).NotTo(ContainSubstring(string(signingSecret(ep).Reveal())))
		}
	})
})

// kubectl create -f of a webhookevent through kube-apiserver to the
// manager's aggregated API: the HTTP API's permission, validation and
// idempotency.
var _ = Describe("kubectl create webhookevent", func() {
	It("publishes with 201, replays a key, refuses a reused key (409), bad fields (422) and callers without the publish permission (403)", func() {
		ns := useNamespace("e2e-create-event")
		rcv := newReceiver("orders", false, answer(http.StatusNoContent))
		apply(policyYAML(ns, "once", "100ms", 1) + "---\n" +
			endpointYAML(ns, "orders", rcv.URL("/hooks"), "[order.created]", "once", ""))
		kubectlWait("webhookendpoint/orders", "--for=condition=Ready", 30*time.Second)
		manifest := func(key, data string, extra ...string) string {
			return fmt.Sprintf("apiVersion: delivery.hookkeeper.dev/v1alpha1\nkind: WebhookEvent\nmetadata:\n  namespace: %s\n%sspec:\n  type: order.created\n  idempotencyKey: %s\n  data: %s\n",
				ns, strings.Join(extra, ""), key, data)
		}

		By("201: created, delivered to the endpoint subscribed to its type")
		stdout, stderr, err := kubectlAt(kubeconfig, manifest("order-1", `{"order": 1}`), "create", "-f", "-", "-v=6")
		Expect(err).NotTo(HaveOccurred(), stderr)
		m := regexp.MustCompile(`^webhookevent\.delivery\.hookkeeper\.dev/(evt_\w+) created\n$`).FindStringSubmatch(stdout)
		Expect(m).NotTo(BeNil(), stdout)
		created := m[1]
		Expect(createStatus(stderr)).To(Equal("201 Created"))
		Eventually(func() int { return len(rcv.of(created)) }).Should(Equal(1))
		Expect(rcv.of(created)[0].Type).To(Equal("order.created"))

		By("the same key and event, formatted otherwise: the original, marked as a replay")
		stdout, _, err = kubectlAt(kubeconfig, manifest("order-1", "\n    order: 1"), "create", "-f", "-",
			"-o", `jsonpath={.metadata.name} {.metadata.annotations.delivery\.hookkeeper\.dev/idempotent-replayed}`)
		Expect(err).NotTo(HaveOccurred())
		Expect(stdout).To(Equal(created + " true"))
		Consistently(func() int { return len(rcv.received()) }).WithTimeout(time.Second).Should(Equal(1))

		By("the same key with another event: 409 Conflict on spec.idempotencyKey")
		_, stderr, err = kubectlAt(kubeconfig, manifest("order-1", `{"order": 2}`), "create", "-f", "-")
		Expect(err).To(HaveOccurred())
		Expect(stderr).To(ContainSubstring("spec.idempotencyKey was already used in this namespace with a different event"))
		_, stderr, _ = kubectlAt(kubeconfig, manifest("order-1", `{"order": 2}`), "create", "-f", "-", "-v=6")
		Expect(createStatus(stderr)).To(Equal("409 Conflict"))

		By("422 Invalid naming the field, for each field the HTTP API validates and each this API cannot carry")
		for _, c := range []struct{ manifest, field string }{
			{strings.Replace(manifest("bad-1", `{}`), "type: order.created", "type: order..created", 1), "spec.type"},
			{manifest("bad-2", `"not an object"`), "spec.data"},
			{manifest("bad-3", `{"a": 1}`) + "  reissueOf: dlv_01hzzzzzzzzzzzzzzzzzzzzzzz\n", "spec.reissueOf"},
			{manifest("bad-4", `{}`) + "  endpoint: Not_A_Name\n", "spec.endpoint"},
			{manifest("bad-5", `{}`) + "  endpoint: nobody\n", "spec.endpoint"},
			{manifest("bad-6", `{}`) + "  secretNames: [token]\n", "spec.secretNames"},
			{manifest("bad-7", `{}`, "  name: evt_mine\n"), "metadata.name"},
		} {
			// --validate=false: kubectl's own schema check would stop some
			// of these before the server; the server's answer is the subject.
			_, stderr, err := kubectlAt(kubeconfig, c.manifest, "create", "-f", "-", "-v=6", "--validate=false")
			Expect(err).To(HaveOccurred(), c.manifest)
			Expect(createStatus(stderr)).To(Equal("422 Unprocessable Entity"), c.manifest)
			Expect(stderr).To(ContainSubstring("is invalid: "+c.field+":"), c.manifest)
		}
		Expect(rcv.received()).To(HaveLen(1), "a refused create published something")

		By("403: without any RBAC, and with create on webhookevents but not the HTTP API's create on events.hookkeeper.dev")
		apply(fmt.Sprintf("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: half\n  namespace: %[1]s\n---\n"+
			"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: create-webhookevents\n  namespace: %[1]s\n"+
			"rules:\n- apiGroups: [delivery.hookkeeper.dev]\n  resources: [webhookevents]\n  verbs: [create]\n", ns))
		half := tokenKubeconfig("half", createToken(ns, "half"))
		// Through kube-apiserver, kubectl's client-side validation of this
		// kind lists CRDs, which these users may not: they pass
		// --validate=false, as docs/delivery-api.md tells such users to.
		_, stderr, err = kubectlAt(half, manifest("half-1", `{}`), "create", "-f", "-", "--validate=false")
		Expect(err).To(HaveOccurred())
		Expect(stderr).To(ContainSubstring(`cannot create resource "webhookevents" in API group "delivery.hookkeeper.dev"`))
		apply(fmt.Sprintf("apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: half-webhookevents\n  namespace: %[1]s\n"+
			"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: create-webhookevents}\n"+
			"subjects: [{kind: ServiceAccount, name: half, namespace: %[1]s}]\n", ns))
		Eventually(func(g Gomega) {
			_, stderr, err := kubectlAt(half, manifest("half-1", `{}`), "create", "-f", "-", "--validate=false", "-v=6")
			g.Expect(err).To(HaveOccurred())
			g.Expect(createStatus(stderr)).To(Equal("403 Forbidden"))
			g.Expect(stderr).To(ContainSubstring(`may not create events.hookkeeper.dev in namespace \"` + ns + `\"`))
		}).Should(Succeed())

		By("with the shipped event-publisher role as well: 201")
		apply(roleBindingYAML(ns, "half-publishes", "event-publisher", ns, "half"))
		Eventually(func(g Gomega) {
			stdout, stderr, err := kubectlAt(half, manifest("half-1", `{"from": "half"}`), "create", "-f", "-", "--validate=false")
			g.Expect(err).NotTo(HaveOccurred(), stderr)
			g.Expect(stdout).To(MatchRegexp(`^webhookevent\.delivery\.hookkeeper\.dev/evt_\w+ created\n$`))
		}).Should(Succeed())
	})
})

// kubectlAt runs kubectl with a kubeconfig and stdin, returning stdout and
// stderr apart.
func kubectlAt(kubeconfigPath, stdin string, args ...string) (string, string, error) {
	GinkgoHelper()
	var o, e bytes.Buffer
	cmd := exec.Command(kubectlPath, append([]string{"--kubeconfig", kubeconfigPath}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	return o.String(), e.String(), err
}

// runKubectlAt is kubectlAt without stdin, its stderr in the error.
func runKubectlAt(kubeconfigPath string, args ...string) (string, error) {
	GinkgoHelper()
	o, e, err := kubectlAt(kubeconfigPath, "", args...)
	if err != nil {
		return o, fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, e)
	}
	return o, nil
}

// tokenKubeconfig is the suite's kubeconfig with a bearer token as the user.
func tokenKubeconfig(name, token string) string {
	GinkgoHelper()
	kc, err := clientcmd.LoadFromFile(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	for _, a := range kc.AuthInfos {
		*a = *a.DeepCopy()
		a.ClientCertificate, a.ClientCertificateData, a.ClientKey, a.ClientKeyData = "", nil, "", nil
		a.Username, a.Password = "", ""
		a.Token = token
	}
	path := filepath.Join(workDir, "kubeconfig-token-"+name)
	Expect(clientcmd.WriteToFile(*kc, path)).To(Succeed())
	return path
}

// createStatusLine is kubectl -v=6's log line of a POST of a webhookevent.
var createStatusLine = regexp.MustCompile(`verb="POST" url="https://[^"]+/apis/delivery\.hookkeeper\.dev/v1alpha1/namespaces/[^/]+/webhookevents[?"][^"]*" status="([^"]+)"`)

// createStatus is the HTTP status kubectl -v=6 logged for its create.
func createStatus(stderr string) string {
	m := createStatusLine.FindAllStringSubmatch(stderr, -1)
	if len(m) != 1 {
		return fmt.Sprintf("%d creates logged in:\n%s", len(m), stderr)
	}
	return m[0][1]
}
