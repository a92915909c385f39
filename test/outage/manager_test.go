package outage

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/test/apicall"
	"github.com/hookkeeper/hookkeeper/test/procsuite"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// Values of the manager's --api-auth (cmd/api.go).
const (
	authTokenFile  = "token-file"
	authKubernetes = "kubernetes"
)

// managerConfig is what differs between the suite's manager processes.
type managerConfig struct {
	name string
	// ledger is the --ledger location (sqlite://... or postgres://...).
	ledger string
	// namespace is the only namespace the manager watches
	// (--watch-namespaces) and the one its Lease lives in
	// (--leader-election-namespace): each install of the suite is on its
	// own, as if alone on the cluster.
	namespace string
	// auth is the --api-auth mode: authTokenFile (the suite's token file)
	// or authKubernetes (TokenReview and SubjectAccessReview).
	auth string
	// instance is --instance, the replica's identity across restarts
	// (empty: none): a process started again with its predecessor's
	// returns that one's deliveries in flight to the pool at start.
	instance string
	// metricsAddr, probeAddr and apiAddr are where it listens; empty: a
	// free loopback port each. startManager fills them in, so that a
	// restart on the same flags (manager.restartConfig) listens where its
	// predecessor did.
	metricsAddr, probeAddr, apiAddr string
}

// manager is one manager process, built from ./cmd and run as the
// Deployment runs it: --leader-elect, every address on loopback.
type manager struct {
	managerConfig
	cmd        *exec.Cmd
	logPath    string
	apiBase    string // http://127.0.0.1:port of its HTTP API
	probeURL   string
	metricsURL string
	started    time.Time

	done     chan struct{}
	err      error     // how it exited; set when done is closed
	exitedAt time.Time // set when done is closed
}

// startManager starts a manager process; it is stopped (SIGTERM) by a
// cleanup of the node that started it, unless it exited before.
func startManager(c managerConfig) *manager {
	GinkgoHelper()
	for _, a := range []*string{&c.metricsAddr, &c.probeAddr, &c.apiAddr} {
		if *a == "" {
			*a = procsuite.FreeAddr()
		}
	}
	metricsAddr, probeAddr, apiAddr := c.metricsAddr, c.probeAddr, c.apiAddr
	m := &manager{
		managerConfig: c,
		logPath:       filepath.Join(suite.Dir, c.name+".log"),
		apiBase:       "http://" + apiAddr,
		probeURL:      "http://" + probeAddr + "/readyz",
		metricsURL:    "http://" + metricsAddr + "/metrics",
		done:          make(chan struct{}),
	}
	args := []string{
		"--ledger=" + c.ledger,
		"--leader-elect",
		"--leader-election-namespace=" + c.namespace,
		"--watch-namespaces=" + c.namespace,
		"--metrics-bind-address=" + metricsAddr,
		"--metrics-secure=false",
		"--health-probe-bind-address=" + probeAddr,
		// Plain HTTP is allowed on loopback.
		"--api-bind-address=" + apiAddr,
		"--api-auth=" + c.auth,
		// The receivers are on loopback, which is forbidden by default.
		"--allowed-destination-cidrs=127.0.0.0/8",
		"--zap-devel",
	}
	if c.auth == authTokenFile {
		args = append(args, "--api-token-file="+suite.TokenFile)
	}
	if c.instance != "" {
		args = append(args, "--instance="+c.instance)
	}
	logFile, err := os.Create(m.logPath)
	Expect(err).NotTo(HaveOccurred())
	m.cmd = exec.Command(suite.Manager, args...)
	// The Deployment's memory settings (config/manager/manager.yaml).
	m.cmd.Env = append(os.Environ(), "KUBECONFIG="+suite.Kubeconfig, "GOGC=400", "GOMEMLIMIT=400MiB")
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	Expect(m.cmd.Start()).To(Succeed())
	m.started = time.Now()
	GinkgoWriter.Printf("%s started %s (PID %d, --api-auth=%s, log %s)\n", stamp(m.started), c.name, m.cmd.Process.Pid, c.auth, m.logPath)
	go func() {
		m.err = m.cmd.Wait()
		m.exitedAt = time.Now()
		_ = logFile.Close()
		close(m.done)
	}()
	managers = append(managers, m)
	DeferCleanup(func() {
		if m.exited() {
			return
		}
		Expect(m.stop()).To(Succeed(), "%s's exit after SIGTERM:\n%s", m.name, testenv.Tail(m.logPath, 60))
	})
	return m
}

// waitReady waits until the manager's readiness probe and its API answer
// (a caller the API knows gets 404 for an unknown event, or 403 when it may
// publish but not read: an answer, not a refused connection).
func (m *manager) waitReady(token string) {
	GinkgoHelper()
	probe := &http.Client{Timeout: 2 * time.Second}
	Eventually(func(g Gomega) {
		if m.exited() {
			StopTrying(fmt.Sprintf("%s exited: %v\n%s", m.name, m.err, testenv.Tail(m.logPath, 60))).Now()
		}
		resp, err := probe.Get(m.probeURL)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		status, _, err := apicall.Do(probe, m.apiBase, token, http.MethodGet, "/v1/namespaces/"+m.namespace+"/events/evt_none", "", "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Or(Equal(http.StatusNotFound), Equal(http.StatusForbidden)))
	}).WithTimeout(60*time.Second).Should(Succeed(), func() string { return m.name + " not ready:\n" + testenv.Tail(m.logPath, 60) })
}

// restartConfig is the configuration of a process started again on m's
// flags (its ledger, namespace, --instance and addresses), under name.
func (m *manager) restartConfig(name string) managerConfig {
	c := m.managerConfig
	c.name = name
	return c
}

func (m *manager) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits for the exit (30s at most, then SIGKILL and
// a failure); it returns how the manager exited: nil is status 0.
func (m *manager) stop() error {
	GinkgoHelper()
	Expect(m.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
		Fail(m.name + " did not stop within 30s of SIGTERM:\n" + testenv.Tail(m.logPath, 60))
	}
	return m.err
}

// fatalLines are the lines of the manager's log that tell of it giving up:
// "problem running manager" (its Start failed: leadership lost, a cache
// that did not sync) and "unable to" (its setup failed).
func (m *manager) fatalLines() []string {
	data, err := os.ReadFile(m.logPath)
	if err != nil {
		return []string{fmt.Sprintf("(reading %s: %v)", m.logPath, err)}
	}
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.Contains(line, "problem running manager") || (strings.Contains(line, "\tERROR\t") && strings.Contains(line, "unable to")) {
			out = append(out, line)
		}
	}
	return out
}

// exitProblems says what is wrong with the manager's life so far: it
// exited, or its log says it gave up. Empty when neither.
func (m *manager) exitProblems(since time.Time) []string {
	var out []string
	if m.exited() {
		at := "before the outage"
		if !since.IsZero() && m.exitedAt.After(since) {
			at = fmt.Sprintf("%.1fs into the outage", m.exitedAt.Sub(since).Seconds())
		}
		out = append(out, fmt.Sprintf("%s exited %s: %v", m.name, at, m.err))
	}
	for _, l := range m.fatalLines() {
		out = append(out, fmt.Sprintf("%s logged: %s", m.name, l))
	}
	return out
}

// metric reads one sample of the manager's /metrics (series as /metrics
// spells it); a missing series is 0.
func (m *manager) metric(series string) (float64, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(m.metricsURL)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: status %d", m.metricsURL, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, sc.Err()
}
