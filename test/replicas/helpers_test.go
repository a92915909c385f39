package replicas

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/test/apicall"
	"github.com/hookkeeper/hookkeeper/test/fixtures"
	"github.com/hookkeeper/hookkeeper/test/procsuite"
	"github.com/hookkeeper/hookkeeper/test/receivers"
)

// ---- manager processes ----

// replica is one manager process of the suite.
type replica struct {
	*procsuite.Process
	name       string
	metricsURL string
	probeURL   string
	api        *apiClient
}

// startReplica starts a manager on the suite's ledger with leader election,
// every address on loopback and its own log file.
func startReplica(name string) *replica {
	GinkgoHelper()
	metricsAddr, probeAddr, apiAddr := procsuite.FreeAddr(), procsuite.FreeAddr(), procsuite.FreeAddr()
	r := &replica{
		name:       name,
		metricsURL: "http://" + metricsAddr + "/metrics",
		probeURL:   "http://" + probeAddr + "/readyz",
		api:        &apiClient{base: "http://" + apiAddr, token: suite.APIToken, client: &http.Client{Timeout: 10 * time.Second}},
	}
	r.Process = procsuite.StartProcess(name, filepath.Join(suite.Dir, name+".log"), []string{"KUBECONFIG=" + suite.Kubeconfig}, suite.Manager,
		"--ledger="+ledgerFlag,
		"--leader-elect",
		"--leader-election-namespace="+leaseNamespace,
		"--metrics-bind-address="+metricsAddr,
		"--metrics-secure=false",
		"--health-probe-bind-address="+probeAddr,
		// Plain HTTP is allowed on loopback.
		"--api-bind-address="+apiAddr,
		"--api-auth=token-file",
		"--api-token-file="+suite.TokenFile,
		"--endpoint-status-resync=2s",
		// The receivers are on loopback, which is forbidden by default.
		"--allowed-destination-cidrs=127.0.0.0/8",
		"--zap-devel",
	)
	return r
}

// waitReady waits until the manager's probe and its API answer (an unknown
// event of an authenticated caller is a 404, not a refused connection).
func (r *replica) waitReady() {
	GinkgoHelper()
	r.WaitReady(r.probeURL, func(g Gomega, _ *http.Client) {
		status, _, err := r.api.do(http.MethodGet, "/v1/namespaces/default/events/evt_none", "", "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusNotFound))
	})
}

// metrics returns the manager's samples by series, as /metrics spells them
// (`name{label="value"}`, labels in the order the registry writes them).
func (r *replica) metrics(g Gomega) map[string]float64 {
	resp, err := http.Get(r.metricsURL)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	samples := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		g.Expect(i).To(BeNumerically(">", 0), "metrics line %q", line)
		v, err := strconv.ParseFloat(line[i+1:], 64)
		g.Expect(err).NotTo(HaveOccurred(), "metrics line %q", line)
		samples[line[:i]] = v
	}
	g.Expect(sc.Err()).NotTo(HaveOccurred())
	return samples
}

// leaderSeries is controller-runtime's gauge for the manager's Lease: 1 on
// the leader, 0 on a replica that lost it, absent on one that never led.
const leaderSeries = `leader_election_master_status{name="` + leaseName + `"}`

// leads reports whether the manager's metrics say it holds the Lease.
func (r *replica) leads(g Gomega) bool {
	v, ok := r.metrics(g)[leaderSeries]
	if ok {
		g.Expect(v).To(Or(Equal(0.0), Equal(1.0)), "%s: %s", r.name, leaderSeries)
	}
	return v == 1
}

// logSize is how many bytes a replica's log has now.
func logSize(path string) int64 {
	GinkgoHelper()
	fi, err := os.Stat(path)
	Expect(err).NotTo(HaveOccurred())
	return fi.Size()
}

// errorLines are the lines of a replica's log from offset on that are at
// error level (--zap-devel writes "<time>\tERROR\t<logger>\t<message>").
func errorLines(path string, offset int64) []string {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, line := range strings.Split(string(data[offset:]), "\n") {
		// controller-runtime's "leader election lost" is expected on a stop
		// that was asked for, but only as the manager's info line.
		lost := strings.Contains(line, "leader election lost") && !strings.Contains(line, "\tINFO\t")
		if strings.Contains(line, "\tERROR\t") || lost {
			out = append(out, line)
		}
	}
	return out
}

// leaseHolder is the Lease's spec.holderIdentity ("" when released).
func leaseHolder() (string, error) {
	return suite.RunKubectl("", "get", "lease", "-n", leaseNamespace, leaseName, "-o", "jsonpath={.spec.holderIdentity}")
}

// ---- kubectl ----

// The manifests the specs apply.
var (
	namespaceYAML = fixtures.Namespace
	policyYAML    = fixtures.RetryPolicy
)

// endpointYAML is a WebhookEndpoint for eventTypes (a YAML list) on policy.
func endpointYAML(ns, name, url, eventTypes, policy string) string {
	return fixtures.WebhookEndpoint(ns, name, url, eventTypes, policy, "")
}

// endpointStatus reads fields of an endpoint's status with a jsonpath.
func endpointStatus(ns, name, path string) (string, error) {
	return suite.RunKubectl("", "get", "-n", ns, "webhookendpoint", name, "-o", "jsonpath="+path)
}

// ---- the HTTP API ----

type apiClient struct {
	base, token string
	client      *http.Client
}

// do sends one request and returns the status and body.
func (c *apiClient) do(method, path, body, idempotencyKey string) (int, []byte, error) {
	return apicall.Do(c.client, c.base, c.token, method, path, body, idempotencyKey)
}

// published is the API's answer to a publish, as the wire shows it.
type published struct {
	ID         string `json:"id"`
	Deliveries []struct {
		ID       string `json:"id"`
		Endpoint string `json:"endpoint"`
	} `json:"deliveries"`
}

// publish posts an event to namespace ns; anything but 201 Created with
// exactly one delivery, to endpoint, is an error. It does not assert, so
// that goroutines may call it.
func (c *apiClient) publish(ns, key, body, endpoint string) (published, error) {
	status, data, err := c.do(http.MethodPost, "/v1/namespaces/"+ns+"/events", body, key)
	if err != nil {
		return published{}, fmt.Errorf("publishing %s: %w", key, err)
	}
	if status != http.StatusCreated {
		return published{}, fmt.Errorf("publishing %s: status %d: %s", key, status, data)
	}
	var p published
	if err := json.Unmarshal(data, &p); err != nil {
		return published{}, fmt.Errorf("publishing %s: %w: %s", key, err, data)
	}
	if len(p.Deliveries) != 1 || p.Deliveries[0].Endpoint != endpoint {
		return published{}, fmt.Errorf("publishing %s: want one delivery to %s: %s", key, endpoint, data)
	}
	return p, nil
}

// delivery is what the API says of one delivery.
type delivery struct {
	ID            string `json:"id"`
	State         string `json:"state"`
	Attempts      int    `json:"attempts"`
	ExhaustReason string `json:"exhaustReason"`
}

// deliveryOf is the only delivery of an event.
func (c *apiClient) deliveryOf(g Gomega, ns, eventID string) delivery {
	status, data, err := c.do(http.MethodGet, "/v1/namespaces/"+ns+"/deliveries?event="+eventID, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusOK), "deliveries of %s: %s", eventID, data)
	var list struct {
		Items []delivery `json:"items"`
	}
	g.Expect(json.Unmarshal(data, &list)).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1), "deliveries of %s", eventID)
	return list.Items[0]
}

// ---- receivers ----

// receiver is a real HTTP receiver on loopback (test/receivers) that
// answers every request with status, after delay when it is set (a slow
// receiver). It counts the requests by webhook-id (the event identity,
// stable across retries), and records a request whose sender hangs up
// before the answer as cut.
type receiver struct {
	*receivers.Receiver
	name   string
	status int
	delay  time.Duration
}

func newReceiver(name string, status int) *receiver {
	return newSlowReceiver(name, status, 0)
}

func newSlowReceiver(name string, status int, delay time.Duration) *receiver {
	r := &receiver{name: name, status: status, delay: delay, Receiver: receivers.New(receivers.Options{
		Respond: func(*http.Request, *receivers.Request) int { return status },
		Delay:   delay,
	})}
	DeferCleanup(r.Close)
	specReceivers = append(specReceivers, r)
	return r
}

func (r *receiver) URL() string { return r.Receiver.URL() + "/hooks" }

// cutIDs returns the webhook-ids of the requests whose sender hung up
// before the answer.
func (r *receiver) cutIDs() []string {
	var out []string
	for _, rc := range r.Requests() {
		if rc.Cut && !slices.Contains(out, rc.WebhookID) {
			out = append(out, rc.WebhookID)
		}
	}
	sort.Strings(out)
	return out
}

func (r *receiver) String() string {
	byID, total := r.Counts()
	return fmt.Sprintf("answers %d after %v; %d requests for %d webhook-ids; more than once: %v; cut by the sender: %v",
		r.status, r.delay, total, len(byID), r.Repeated(), r.cutIDs())
}
