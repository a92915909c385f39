package outage

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	*procsuite.Process
	apiBase    string // http://127.0.0.1:port of its HTTP API
	probeURL   string
	metricsURL string
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
		apiBase:       "http://" + apiAddr,
		probeURL:      "http://" + probeAddr + "/readyz",
		metricsURL:    "http://" + metricsAddr + "/metrics",
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
	// The Deployment's memory settings (config/manager/manager.yaml).
	m.Process = procsuite.StartProcess(c.name, filepath.Join(suite.Dir, c.name+".log"),
		[]string{"KUBECONFIG=" + suite.Kubeconfig, "GOGC=400", "GOMEMLIMIT=400MiB"}, suite.Manager, args...)
	GinkgoWriter.Printf("%s started %s (PID %d, --api-auth=%s, log %s)\n", stamp(m.Started), c.name, m.Cmd.Process.Pid, c.auth, m.LogPath)
	managers = append(managers, m)
	DeferCleanup(func() {
		if m.Exited() {
			return
		}
		Expect(m.Stop()).To(Succeed(), "%s's exit after SIGTERM:\n%s", m.name, testenv.Tail(m.LogPath, 60))
	})
	return m
}

// waitReady waits until the manager's readiness probe and its API answer
// (a caller the API knows gets 404 for an unknown event, or 403 when it may
// publish but not read: an answer, not a refused connection).
func (m *manager) waitReady(token string) {
	GinkgoHelper()
	m.WaitReady(m.probeURL, func(g Gomega, client *http.Client) {
		status, _, err := apicall.Do(client, m.apiBase, token, http.MethodGet, "/v1/namespaces/"+m.namespace+"/events/evt_none", "", "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Or(Equal(http.StatusNotFound), Equal(http.StatusForbidden)))
	})
}

// restartConfig is the configuration of a process started again on m's
// flags (its ledger, namespace, --instance and addresses), under name.
func (m *manager) restartConfig(name string) managerConfig {
	c := m.managerConfig
	c.name = name
	return c
}

// fatalLines are the lines of the manager's log that tell of it giving up:
// "problem running manager" (its Start failed: leadership lost, a cache
// that did not sync) and "unable to" (its setup failed).
func (m *manager) fatalLines() []string {
	data, err := os.ReadFile(m.LogPath)
	if err != nil {
		return []string{fmt.Sprintf("(reading %s: %v)", m.LogPath, err)}
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
	if m.Exited() {
		at := "before the outage"
		if !since.IsZero() && m.ExitedAt.After(since) {
			at = fmt.Sprintf("%.1fs into the outage", m.ExitedAt.Sub(since).Seconds())
		}
		out = append(out, fmt.Sprintf("%s exited %s: %v", m.name, at, m.Err))
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
