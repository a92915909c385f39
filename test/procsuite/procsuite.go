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
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
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

// Process is a manager process of a suite, its output in a log of its own.
type Process struct {
	Name    string
	LogPath string
	Cmd     *exec.Cmd
	Started time.Time
	// Err is how it exited (nil: status 0) and ExitedAt when: set once
	// Exited.
	Err      error
	ExitedAt time.Time

	done chan struct{}
}

// StartProcess starts binary with args, env added to the test's own, its
// stdout and stderr in logPath.
func StartProcess(name, logPath string, env []string, binary string, args ...string) *Process {
	ginkgo.GinkgoHelper()
	p := &Process{Name: name, LogPath: logPath, done: make(chan struct{})}
	logFile, err := os.Create(logPath)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	p.Cmd = exec.Command(binary, args...)
	p.Cmd.Env = append(os.Environ(), env...)
	p.Cmd.Stdout, p.Cmd.Stderr = logFile, logFile
	gomega.Expect(p.Cmd.Start()).To(gomega.Succeed())
	p.Started = time.Now()
	go func() {
		p.Err = p.Cmd.Wait()
		p.ExitedAt = time.Now()
		_ = logFile.Close()
		close(p.done)
	}()
	return p
}

// Exited says whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits for the exit (30s at most, then SIGKILL and
// a failure); it returns how the process exited: nil is status 0.
func (p *Process) Stop() error {
	ginkgo.GinkgoHelper()
	gomega.Expect(p.Cmd.Process.Signal(syscall.SIGTERM)).To(gomega.Succeed())
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.Cmd.Process.Kill()
		<-p.done
		ginkgo.Fail(p.Name + " did not stop within 30s of SIGTERM:\n" + testenv.Tail(p.LogPath, 60))
	}
	return p.Err
}

// WaitReady waits, for a minute at most, until the process's readiness
// probe at probeURL answers 200 and api (a question to its API) succeeds;
// it stops waiting when the process exits.
func (p *Process) WaitReady(probeURL string, api func(g gomega.Gomega, client *http.Client)) {
	ginkgo.GinkgoHelper()
	probe := &http.Client{Timeout: 2 * time.Second}
	gomega.Eventually(func(g gomega.Gomega) {
		if p.Exited() {
			gomega.StopTrying(fmt.Sprintf("%s exited: %v\n%s", p.Name, p.Err, testenv.Tail(p.LogPath, 60))).Now()
		}
		resp, err := probe.Get(probeURL)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(gomega.Equal(http.StatusOK))
		api(g, probe)
	}).WithTimeout(60*time.Second).Should(gomega.Succeed(), func() string { return p.Name + " not ready:\n" + testenv.Tail(p.LogPath, 60) })
}
