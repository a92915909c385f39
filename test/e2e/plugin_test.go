package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// The kubectl plugin, built from cmd/kubectl-hookkeeper and run with the
// suite's kubeconfig, as an admin would run `kubectl hookkeeper ...`.
var _ = Describe("kubectl hookkeeper", func() {
	It("shows the endpoints that need attention, recovers one, rotates a signing secret, and refuses bad flags by name", func() {
		ns := useNamespace("e2e-plugin")
		run := func(args ...string) (string, string, error) {
			return runPlugin(kubeconfig, append(args, "-n", ns)...)
		}

		fine := newReceiver("fine", false, answer(204))
		down := newReceiver("down", false, answer(500))
		apply(policyYAML(ns, "once", "100ms", 1) + "---\n" +
			endpointYAML(ns, "fine", fine.URL("/hooks"), "[plugin.fine]", "once", "") + "---\n" +
			endpointYAML(ns, "down", down.URL("/hooks"), "[plugin.down]", "once", ""))
		kubectl("wait", "-n", ns, "webhookendpoint", "--all", "--for=condition=Ready", "--timeout=30s")

		By("status: nothing needs attention yet")
		stdout, stderr, err := run("status")
		Expect(err).NotTo(HaveOccurred(), stderr)
		Expect(stdout).To(Equal("every endpoint is Ready and Healthy, with no exhausted deliveries\n"))

		By("status: the endpoint whose delivery was exhausted, and only it")
		api.publish(ns, "plugin-fine", `{"type":"plugin.fine","data":{}}`)
		api.publish(ns, "plugin-down", `{"type":"plugin.down","data":{}}`)
		Eventually(func() string { return jsonpath("webhookendpoint/down", "{.status.deliveries.exhaustedUnresolved}") }).Should(Equal("1"))
		Eventually(func() int { return len(fine.received()) }).Should(Equal(1))
		stdout, stderr, err = run("status")
		Expect(err).NotTo(HaveOccurred(), stderr)
		Expect(stdout).To(MatchRegexp(`^NAMESPACE\s+NAME\s+READY\s+HEALTHY\s+EXHAUSTED\s+REASON\n`))
		Expect(stdout).To(MatchRegexp(`\ne2e-plugin\s+down\s+True\s+False\s+1\s+\w+\n$`))
		Expect(stdout).NotTo(ContainSubstring(" fine "))

		By("recover: a Dismiss followed to Complete")
		stdout, stderr, err = run("recover", "down", "--action", "Dismiss", "--timeout", "60s")
		Expect(err).NotTo(HaveOccurred(), "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		Expect(stdout).To(MatchRegexp(`^deliveryrecovery/down-\w+ created \(endpoint down, action Dismiss\)\n`))
		Expect(stdout).To(MatchRegexp(`\nComplete matched=1 retried=0 reissued=0 refused=0 dismissed=1 delivered=0 failedAgain=0: .+\n$`))
		Expect(kubectl("get", "deliveryrecoveries", "-n", ns, "-o", "name")).To(MatchRegexp(`^deliveryrecovery.hookkeeper.dev/down-\w+\n$`))

		By("recover: flags the API would refuse, refused by name, nothing created")
		_, stderr, err = run("recover", "down", "--action", "Nope")
		Expect(err).To(HaveOccurred())
		Expect(stderr).To(Equal("error: --action \"Nope\": must be Auto, Retry, Reissue or Dismiss\n"))
		_, stderr, err = run("recover")
		Expect(err).To(HaveOccurred())
		Expect(stderr).To(Equal("error: recover needs exactly one ENDPOINT\n"))
		Expect(kubectl("get", "deliveryrecoveries", "-n", ns, "-o", "name")).To(MatchRegexp(`^deliveryrecovery.hookkeeper.dev/down-\w+\n$`))

		By("rotate-secret: the generated Secret's key removed, a new secret written by the operator, never printed")
		before := signingSecret("fine")
		stdout, stderr, err = run("rotate-secret", "fine")
		Expect(err).NotTo(HaveOccurred(), stderr)
		Expect(stdout).To(Equal("removed the signing secret from Secret fine-signing: the operator writes a new one; the previous one stays valid for the grace period\n"))
		Eventually(func() string {
			return kubectlOutput("get", "secret", "fine-signing", "-n", ns, "-o", "jsonpath={.data.signingSecret}")
		}).WithTimeout(30 * time.Second).ShouldNot(BeEmpty())
		after := signingSecret("fine")
		Expect(after).NotTo(Equal(before))
		Expect(stdout).NotTo(ContainSubstring(string(after)))
	})

	It("probe: asks the operator for a probe of an open circuit breaker now, which closes it when the receiver is back", func() {
		ns := useNamespace("e2e-probe")
		run := func(args ...string) (string, string, error) {
			return runPlugin(kubeconfig, append(args, "-n", ns)...)
		}
		var up atomic.Bool
		rcv := newReceiver("flaky", false, func(int, *received) int {
			if up.Load() {
				return 204
			}
			return 503
		})
		// One failure opens the breaker; the next automatic probe is an hour
		// away, so only the requested one can close it within the test.
		apply(fmt.Sprintf(`apiVersion: hookkeeper.dev/v1alpha1
kind: RetryPolicy
metadata:
  name: breaker
  namespace: %s
spec:
  backoff: {strategy: Fixed, initialDelay: 100ms, jitterPercent: 0}
  horizon: {maxAttempts: 100}
  attemptTimeout: 5s
  replayWindow: 2h
  circuitBreaker: {failures: 1, minDuration: 0s, probeInterval: 1h, maxProbeInterval: 1h}
`, ns) + "---\n" + endpointYAML(ns, "flaky", rcv.URL("/hooks"), "[probe.test]", "breaker", "  owner: team-payments\n"))
		kubectlWait("webhookendpoint/flaky", "--for=condition=Ready", 30*time.Second)

		By("one 503 opens the breaker: the BREAKER column, status and the Warning Event naming the owner")
		api.publish(ns, "probe-1", `{"type":"probe.test","data":{}}`)
		kubectlWait("webhookendpoint/flaky", "--for=condition=CircuitOpen", 30*time.Second)
		Expect(kubectl("get", "whep", "flaky", "-n", ns)).To(MatchRegexp(`(?m)^flaky\s+\S+\s+True\s+Open\s+`))
		stdout, stderr, err := run("status")
		Expect(err).NotTo(HaveOccurred(), stderr)
		Expect(stdout).To(MatchRegexp(`\ne2e-probe\s+flaky\s+True\s+\w+\s+0\s+CircuitOpen\n$`))
		Eventually(func() string {
			return kubectlOutput("get", "events", "-n", ns, "--field-selector", "reason=CircuitOpened", "-o", "jsonpath={.items[*].message}")
		}).Should(ContainSubstring("Owner: team-payments"))

		By("the receiver is back; probe --wait: the operator acts at once, the probe closes the breaker")
		up.Store(true)
		stdout, stderr, err = run("probe", "flaky", "--wait", "--timeout", "30s")
		Expect(err).NotTo(HaveOccurred(), "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		Expect(stdout).To(HavePrefix("webhookendpoint/flaky: the operator acted on the probe request; CircuitOpen="))
		kubectlWait("webhookendpoint/flaky", "--for=condition=CircuitOpen=false", 30*time.Second)
		Expect(jsonpath("webhookendpoint/flaky", `{.status.conditions[?(@.type=="CircuitOpen")].reason}`)).To(Equal("ProbeSucceeded"))
		Expect(jsonpath("webhookendpoint/flaky", "{.status.breaker.probeRequest}")).To(Equal(
			jsonpath("webhookendpoint/flaky", `{.metadata.annotations.hookkeeper\.dev/probe-requested-at}`)))
		// The failure that opened it, then the probe, which delivered.
		Eventually(func() int { return len(rcv.received()) }).Should(Equal(2))
		Eventually(func() string { return jsonpath("webhookendpoint/flaky", "{.status.deliveries.delivered}") }).Should(Equal("1"))
		Expect(strings.Count(kubectl("get", "events", "-n", ns, "--field-selector", "reason=CircuitOpened", "-o", "name"), "\n")).To(Equal(1))
		Eventually(func() int {
			return strings.Count(kubectlOutput("get", "events", "-n", ns, "--field-selector", "reason=CircuitClosed", "-o", "name"), "\n")
		}).Should(Equal(1))
	})
})

// buildPlugin builds cmd/kubectl-hookkeeper once per suite run.
var buildPlugin = sync.OnceValue(func() string {
	plugin := filepath.Join(workDir, "kubectl-hookkeeper")
	build := exec.Command("go", "build", "-o", plugin, "./cmd/kubectl-hookkeeper")
	build.Dir = testenv.RepoRoot()
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building the plugin: %s", out)
	return plugin
})

// runPlugin runs the plugin with a kubeconfig, as `kubectl hookkeeper`.
func runPlugin(kubeconfig string, args ...string) (stdout, stderr string, err error) {
	GinkgoHelper()
	var o, e bytes.Buffer
	cmd := exec.Command(buildPlugin(), append(args, "--kubeconfig", kubeconfig)...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}
