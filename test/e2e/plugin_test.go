package e2e

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"sync"
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
