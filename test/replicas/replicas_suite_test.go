// Package replicas runs several hookkeeper managers side by side on one
// PostgreSQL ledger, the way replicas of the Deployment run: the real etcd
// and kube-apiserver (test/testenv), the manager binary built from ./cmd
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
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
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
	env         *envtest.Environment
	workDir     string
	kubeconfig  string
	kubectlPath string
	binary      string // the manager built from ./cmd

	// ledgerFlag is both managers' --ledger: the test server with
	// search_path set to the suite's own schema.
	ledgerFlag string
	apiToken   string
	tokenFile  string

	// replicas are the managers, in start order (two from the start, a
	// third joins later).
	replicas []*replica

	suiteFailed bool
)

func TestReplicas(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	RunSpecs(t, "hookkeeper with several replicas on one PostgreSQL ledger (real control plane, manager processes, kubectl)")
}

var _ = BeforeSuite(func() {
	suiteFailed = true // until both managers are ready: keep their logs
	var err error
	workDir, err = os.MkdirTemp("", "hookkeeper-replicas-")
	Expect(err).NotTo(HaveOccurred())

	// The ledger first: without PostgreSQL, fail before starting anything.
	// A schema of the suite's own on the test server, dropped after the
	// suite (a Cleanup registered in BeforeSuite runs after AfterSuite, once
	// the managers are gone). pgtest fails, never skips, when no server
	// answers.
	ledgerFlag = suiteLedger()

	// The control plane starts while the manager builds.
	suite, err := testenv.StartSuite(workDir)
	Expect(err).NotTo(HaveOccurred())
	env, kubeconfig, kubectlPath = suite.Env, suite.Kubeconfig, suite.Kubectl
	binary = suite.Manager

	var b [16]byte
	_, _ = rand.Read(b[:])
	apiToken = hex.EncodeToString(b[:])
	tokenFile = filepath.Join(workDir, "api-tokens")
	Expect(os.WriteFile(tokenFile, []byte(apiToken+" replicas-suite\n"), 0o600)).To(Succeed())

	apply(namespaceYAML(leaseNamespace))

	// Both at once, as a Deployment's pods start: they migrate the fresh
	// schema together (under the ledger's advisory lock) and race for the
	// Lease.
	for _, name := range []string{"manager-a", "manager-b"} {
		replicas = append(replicas, startReplica(name))
	}
	for _, r := range replicas {
		r.waitReady()
	}
	suiteFailed = false
})

var _ = AfterSuite(func() {
	for _, r := range replicas {
		if r.exited() {
			continue
		}
		Expect(r.stop()).To(Succeed(), "%s's exit after SIGTERM:\n%s", r.name, testenv.Tail(r.logPath, 60))
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
	if workDir != "" {
		if suiteFailed {
			GinkgoWriter.Printf("kept %s (manager-a.log, manager-b.log, kubeconfig) for the failure\n", workDir)
		} else {
			Expect(os.RemoveAll(workDir)).To(Succeed())
		}
	}
})

// suiteLedger creates a fresh schema on the test server and returns the
// --ledger location that confines a manager to it. The manager has no
// schema flag: search_path in the DSN (a run-time parameter pgx passes to
// the server) does it, and the managers migrate the empty schema
// themselves. The schema must exist first: the migrations create tables,
// not the schema.
func suiteLedger() string {
	GinkgoHelper()
	t := GinkgoTB()
	dsn := pgtest.DSN(t)
	schema := pgtest.NewSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	Expect(err).NotTo(HaveOccurred())
	defer conn.Close(ctx)
	// NewSchema's names are lower-case identifiers: no quoting needed.
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	Expect(err).NotTo(HaveOccurred())

	u, err := url.Parse(dsn)
	Expect(err).NotTo(HaveOccurred(), "%s must be a postgres:// URL", pgtest.EnvDSN)
	Expect(u.Scheme).To(Or(Equal("postgres"), Equal("postgresql")), "%s must be a postgres:// URL", pgtest.EnvDSN)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	GinkgoWriter.Printf("ledger: PostgreSQL schema %s\n", schema)
	return u.String()
}

// The receivers of the running spec, for the failure report.
var specReceivers []*receiver

var _ = BeforeEach(func() { specReceivers = nil })

// On failure, attach what explains it: the managers' logs, the hookkeeper
// objects, the Lease, the Events and what the receivers saw.
var _ = AfterEach(func() {
	if !CurrentSpecReport().Failed() {
		return
	}
	suiteFailed = true
	for _, r := range replicas {
		if r.exited() {
			AddReportEntry(r.name+" exited", fmt.Sprint(r.err))
		}
		AddReportEntry(r.name+" log (last 200 lines; full log in "+r.logPath+")", testenv.Tail(r.logPath, 200))
	}
	AddReportEntry("kubectl get hookkeeper -A -o yaml", kubectlOutput("get", "hookkeeper", "-A", "-o", "yaml"))
	AddReportEntry("kubectl get lease "+leaseName, kubectlOutput("get", "lease", "-n", leaseNamespace, leaseName, "-o", "yaml"))
	AddReportEntry("kubectl get events -A", kubectlOutput("get", "events", "-A"))
	for _, r := range specReceivers {
		AddReportEntry("receiver "+r.name, r.String())
	}
})
