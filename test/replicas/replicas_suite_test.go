// Package replicas runs several hookkeeper managers side by side on one
// PostgreSQL ledger, the way replicas of the Deployment run: the real etcd
// and kube-apiserver (test/testenv), the manager suite.Manager built from ./cmd
// and started as processes with --leader-elect, a PostgreSQL schema of the
// suite's own (internal/ledger/postgres/pgtest), the real kubectl, and real
// receivers on loopback. It checks the claim of --ledger=postgres: every
// replica delivers and serves the API, the controllers run on the elected
// leader only, a stopping leader hands over at once, and a replica stopped
// in the middle of deliveries leaves nothing behind.
//
// Run it with
//
//	HOOKKEEPER_TEST_POSTGRES="$(./hack/postgres.sh)" go test ./test/replicas/ -count=1 -ginkgo.v
//
// (without the variable it tries ./hack/postgres.sh's address, and fails,
// never skips, when no server answers; under CI=true the variable is
// required). A failed spec attaches the managers' logs, every hookkeeper
// object, the Lease and what the receivers saw.
package replicas

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/test/procsuite"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

const (
	// leaseName is the manager's LeaderElectionID.
	leaseName = "controller-leader.hookkeeper.dev"
	// leaseNamespace is given to both managers with
	// --leader-election-namespace (they run outside the cluster).
	leaseNamespace = "hookkeeper-system"
)

var (
	// suite is the working directory, the control plane, the manager
	// built from ./cmd and the API's token.
	suite *procsuite.Suite

	// ledgerFlag is both managers' --ledger: the test server with
	// search_path set to the suite's own schema.
	ledgerFlag string

	// replicas are the managers, in start order (two from the start, a
	// third joins later).
	replicas []*replica
)

func TestReplicas(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	RunSpecs(t, "hookkeeper with several replicas on one PostgreSQL ledger (real control plane, manager processes, kubectl)")
}

var _ = BeforeSuite(func() {
	// Until both managers are ready, their logs are kept.
	suite = procsuite.New("hookkeeper-replicas-")

	// The ledger first: without PostgreSQL, fail before starting anything.
	// A schema of the suite's own on the test server, dropped after the
	// suite (a Cleanup registered in BeforeSuite runs after AfterSuite, once
	// the managers are gone).
	ledgerFlag = procsuite.PostgresLedger()

	// The control plane starts while the manager builds.
	suite.Start("replicas-suite")

	suite.Apply(namespaceYAML(leaseNamespace))

	// Both at once, as a Deployment's pods start: they migrate the fresh
	// schema together (under the ledger's advisory lock) and race for the
	// Lease.
	for _, name := range []string{"manager-a", "manager-b"} {
		replicas = append(replicas, startReplica(name))
	}
	for _, r := range replicas {
		r.waitReady()
	}
	suite.Failed = false
})

var _ = AfterSuite(func() {
	for _, r := range replicas {
		if r.Exited() {
			continue
		}
		Expect(r.Stop()).To(Succeed(), "%s's exit after SIGTERM:\n%s", r.name, testenv.Tail(r.LogPath, 60))
	}
	suite.Stop("manager-a.log, manager-b.log, kubeconfig")
})

// The receivers of the running spec, for the failure report.
var specReceivers []*receiver

var _ = BeforeEach(func() { specReceivers = nil })

// On failure, attach what explains it: the managers' logs, the hookkeeper
// objects, the Lease, the Events and what the receivers saw.
var _ = AfterEach(func() {
	if !CurrentSpecReport().Failed() {
		return
	}
	suite.Failed = true
	for _, r := range replicas {
		if r.Exited() {
			AddReportEntry(r.name+" exited", fmt.Sprint(r.Err))
		}
		AddReportEntry(r.name+" log (last 200 lines; full log in "+r.LogPath+")", testenv.Tail(r.LogPath, 200))
	}
	AddReportEntry("kubectl get hookkeeper -A -o yaml", suite.KubectlOutput("get", "hookkeeper", "-A", "-o", "yaml"))
	AddReportEntry("kubectl get lease "+leaseName, suite.KubectlOutput("get", "lease", "-n", leaseNamespace, leaseName, "-o", "yaml"))
	AddReportEntry("kubectl get events -A", suite.KubectlOutput("get", "events", "-A"))
	for _, r := range specReceivers {
		AddReportEntry("receiver "+r.name, r.String())
	}
})
