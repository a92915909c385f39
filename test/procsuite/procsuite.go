// Package procsuite holds what the Ginkgo suites that run the manager as
// processes against the real control plane (test/replicas, test/outage)
// share: the suite's working directory, control plane, manager binary and
// API token; kubectl against it; free loopback addresses; and a PostgreSQL
// ledger of the suite's own. Its functions fail the running node, as
// Gomega does, rather than return errors.
package procsuite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// Suite is a suite's working directory and, once Start ran, its control
// plane (testenv.Suite: etcd, kube-apiserver, kubeconfig, kubectl, the
// manager binary) and the API token of its token file.
type Suite struct {
	*testenv.Suite
	// Dir is the working directory: logs, ledgers, kubeconfig.
	Dir string
	// APIToken is the one token of TokenFile (--api-token-file).
	APIToken, TokenFile string
	// Failed keeps Dir after Stop, for the failure's logs: it is set
	// from New on, until the suite clears it once it is set up; a suite
	// sets it again when a spec fails.
	Failed bool
}

// New makes the suite's working directory, named after prefix.
func New(prefix string) *Suite {
	ginkgo.GinkgoHelper()
	dir, err := os.MkdirTemp("", prefix)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return &Suite{Dir: dir, Failed: true}
}

// Start starts the control plane while the manager builds (it fails,
// never skips, without the binaries) and writes a token file whose one
// token is known to the API as user.
func (s *Suite) Start(user string) {
	ginkgo.GinkgoHelper()
	var err error
	s.Suite, err = testenv.StartSuite(s.Dir)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var b [16]byte
	_, _ = rand.Read(b[:])
	s.APIToken = hex.EncodeToString(b[:])
	s.TokenFile = filepath.Join(s.Dir, "api-tokens")
	gomega.Expect(os.WriteFile(s.TokenFile, []byte(s.APIToken+" "+user+"\n"), 0o600)).To(gomega.Succeed())
}

// Stop stops the control plane and removes the working directory, unless
// the suite failed: then it says what it kept.
func (s *Suite) Stop(kept string) {
	ginkgo.GinkgoHelper()
	if s == nil {
		return
	}
	if s.Suite != nil {
		gomega.Expect(s.Env.Stop()).To(gomega.Succeed())
	}
	if s.Failed {
		ginkgo.GinkgoWriter.Printf("kept %s (%s) for the failure\n", s.Dir, kept)
		return
	}
	gomega.Expect(os.RemoveAll(s.Dir)).To(gomega.Succeed())
}

// RunKubectl runs the real kubectl against the suite's control plane.
func (s *Suite) RunKubectl(stdin string, args ...string) (string, error) {
	return testenv.RunKubectl(s.Kubectl, s.Kubeconfig, stdin, args...)
}

// MustKubectl runs kubectl and fails the spec when it fails.
func (s *Suite) MustKubectl(args ...string) string {
	ginkgo.GinkgoHelper()
	out, err := s.RunKubectl("", args...)
	if err != nil {
		ginkgo.Fail(err.Error())
	}
	return out
}

// KubectlOutput is kubectl's output, errors included: for reports.
func (s *Suite) KubectlOutput(args ...string) string {
	out, err := s.RunKubectl("", args...)
	if err != nil {
		return out + "\n" + err.Error()
	}
	return out
}

// Apply pipes manifests to kubectl apply -f -.
func (s *Suite) Apply(manifests string) {
	ginkgo.GinkgoHelper()
	out, err := s.RunKubectl(manifests, "apply", "-f", "-")
	if err != nil {
		ginkgo.Fail(err.Error() + "\nmanifests:\n" + manifests)
	}
	ginkgo.GinkgoWriter.Print(out)
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago.
func FreeAddr() string {
	ginkgo.GinkgoHelper()
	addr, err := testenv.FreeAddr()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return addr
}

// PostgresLedger creates a schema of the running node's own on the test
// server (dropped when the node ends, once the managers it started
// stopped) and returns the --ledger location that confines a manager to
// it: the manager has no schema flag, search_path in the DSN (a run-time
// parameter pgx passes to the server) does it, and the managers migrate
// the empty schema themselves. The schema must exist first: the
// migrations create tables, not the schema. pgtest fails, never skips,
// when no server answers.
func PostgresLedger() string {
	ginkgo.GinkgoHelper()
	t := ginkgo.GinkgoTB()
	dsn := pgtest.DSN(t)
	schema := pgtest.NewSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	defer conn.Close(ctx)
	// NewSchema's names are lower-case identifiers: no quoting needed.
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())

	u, err := url.Parse(dsn)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "%s must be a postgres:// URL", pgtest.EnvDSN)
	gomega.Expect(u.Scheme).To(gomega.Or(gomega.Equal("postgres"), gomega.Equal("postgresql")), "%s must be a postgres:// URL", pgtest.EnvDSN)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	ginkgo.GinkgoWriter.Printf("ledger: PostgreSQL schema %s\n", schema)
	return u.String()
}
