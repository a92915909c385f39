// Package outage makes the Kubernetes API server unresponsive under load
// and checks what issue #44 promises: deliveries and publishes go on when
// the API server does not answer. It runs the real etcd and kube-apiserver
// (test/testenv), the manager suite.Manager built from ./cmd as processes with
// --leader-elect, real publishers (the token file, and a ServiceAccount
// token reviewed with TokenReview) and real receivers on loopback. The
// outage is SIGSTOP to the suite's own kube-apiserver process (found by
// PID through /proc, never by name), and its end SIGCONT, which a cleanup
// also sends whatever happens to the spec.
//
// The scenarios:
//
//   - A: one replica with --leader-elect on SQLite, for each kind of
//     publisher (the manager authenticates one way at a time, so each kind
//     has an install of its own: a namespace, its manager, its ledger),
//     under 50 events/s in all, the API server stopped for 60s;
//   - B: two replicas on one PostgreSQL ledger (a schema of the suite's
//     own), one authenticating with the token file and one with
//     TokenReview, the same load and outage;
//   - C: a manager started while the API server is stopped, on a ledger
//     holding accepted events that were not delivered yet;
//   - D: the kill mode: two replicas on one PostgreSQL ledger, each with
//     an --instance of its own, and one token-file publisher sending to
//     them in turn that fails over to the other on a connection error, as
//     a Service routes around a dead pod; 20s into the outage the Lease
//     holder is SIGKILLed and started again on the same flags 5s later,
//     the API server still stopped: nothing lost, every publish 201, the
//     restarted replica publishing and delivering before the outage ends.
//
// Run it with
//
//	HOOKKEEPER_TEST_POSTGRES="$(./hack/postgres.sh)" go test ./test/outage/ -count=1 -timeout=25m -ginkgo.v
//
// (without the variable it tries ./hack/postgres.sh's address and fails,
// never skips, when no server answers; under CI=true the variable is
// required). Every scenario reports its figures (publish p99 before and
// during the outage, the longest time without a receipt, events lost; D
// also the failovers and how soon the restarted replica answered and
// delivered) as report entries; a failed one attaches the managers' logs,
// the hookkeeper objects and what the receivers saw.
package outage

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/test/procsuite"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

var (
	// suite is the working directory, the control plane, the manager
	// built from ./cmd and the token-file publishers' token.
	suite *procsuite.Suite

	// apiserver is the suite's kube-apiserver process.
	apiserver *apiServer

	// The managers and receivers of the running scenario, for the failure
	// report (beginScenario resets them).
	managers      []*manager
	specReceivers []*receiver
)

func TestOutage(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	// Ginkgo's own timeout ends the run before go test's does: an
	// interrupted suite still runs its cleanups, SIGCONT to the API server
	// first, where go test's timeout would leave it stopped.
	suiteConfig, reporterConfig := GinkgoConfiguration()
	if deadline, ok := t.Deadline(); ok {
		suiteConfig.Timeout = min(suiteConfig.Timeout, time.Until(deadline)-time.Minute)
	}
	RunSpecs(t, "hookkeeper while the Kubernetes API server does not answer (real control plane, manager processes, SIGSTOP)", suiteConfig, reporterConfig)
}

var _ = BeforeSuite(func() {
	// Until the control plane is up, the directory is kept. The control
	// plane starts while the manager builds; it fails, never skips,
	// without the binaries.
	suite = procsuite.New("hookkeeper-outage-")
	suite.Start("outage-suite")
	env := suite.Env

	var err error
	apiserver, err = findAPIServer(env.Config.Host)
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("kube-apiserver at %s is PID %d\n", env.Config.Host, apiserver.pid)

	// The shipped ClusterRole the TokenReview publishers are bound to.
	suite.MustKubectl("apply", "-f", filepath.Join(testenv.RepoRoot(), "config", "rbac", "event_publisher_role.yaml"))
	suite.Failed = false
})

var _ = AfterSuite(func() {
	// Whatever happened: the API server runs again before anything stops.
	apiserver.resume()
	suite.Stop("the managers' logs, the SQLite ledgers, kubeconfig")
})

// beginScenario starts a scenario's report afresh: its managers and
// receivers only.
func beginScenario() {
	managers, specReceivers = nil, nil
}

// On failure, attach what explains it: the managers' logs, the hookkeeper
// objects, the Events and what the receivers saw. The API server is
// continued first (kubectl would hang on a stopped one); the spec's own
// cleanup would continue it only after this.
var _ = AfterEach(func() {
	if !CurrentSpecReport().Failed() {
		return
	}
	suite.Failed = true
	if !apiserver.resume().IsZero() {
		apiserver.waitAnswering()
	}
	for _, m := range managers {
		if m.Exited() {
			AddReportEntry(m.name+" exited", fmt.Sprintf("%v at %s", m.Err, stamp(m.ExitedAt)))
		}
		AddReportEntry(m.name+" log (last 150 lines; full log in "+m.LogPath+")", testenv.Tail(m.LogPath, 150))
	}
	AddReportEntry("kubectl get hookkeeper -A -o yaml", suite.KubectlOutput("get", "hookkeeper", "-A", "-o", "yaml"))
	AddReportEntry("kubectl get events -A", suite.KubectlOutput("get", "events", "-A"))
	for _, r := range specReceivers {
		AddReportEntry("receiver "+r.name, r.String())
	}
})
