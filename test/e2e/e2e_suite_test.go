// Package e2e runs hookkeeper end to end: the real etcd and kube-apiserver,
// the manager binary built from ./cmd and started as a process, the real
// kubectl for everything done to Kubernetes objects, the upstream namespace,
// garbage-collector and clusterrole-aggregation controllers
// (testenv.StartKubeControllers), the manager's HTTP API
// for publishing and reading deliveries, and real receivers on loopback.
//
// Run it alone with
//
//	go test ./test/e2e/ -count=1
//
// (add -ginkgo.v to follow the specs). A failed spec attaches the manager's
// log, every hookkeeper object, the Events, kubectl describe of its
// namespace and what its receivers saw.
package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

var (
	// apiToken is the bearer token the suite publishes and reads with: a
	// ServiceAccount token (see suiteProducer).
	apiToken string

	env         *envtest.Environment
	workDir     string // the suite's temporary directory
	kubeconfig  string
	kubectlPath string

	manager     *exec.Cmd
	managerLog  string // path of the manager's stdout and stderr
	managerDone chan struct{}
	managerErr  error // set when managerDone is closed

	api *apiClient
	// traces is the OTLP receiver the manager exports its spans to.
	traces *collector

	// kubeControllers runs the upstream namespace controller, garbage
	// collector and clusterrole aggregation controller, which the bare
	// control plane lacks: deleting a namespace completes, owned objects go.
	kubeControllers *testenv.KubeControllers

	// metricsURL is the manager's Prometheus endpoint (plain HTTP on
	// loopback, for the secrets-hygiene search).
	metricsURL string

	suiteFailed bool
)

// maxFanOut is the manager's --max-fan-out: low, so that one spec can go
// past it with a few endpoints.
const maxFanOut = 3

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	RunSpecs(t, "hookkeeper end to end (real control plane, manager process, kubectl)")
}

var _ = BeforeSuite(func() {
	suiteFailed = true // until the manager is ready: keep its log
	var err error
	workDir, err = os.MkdirTemp("", "hookkeeper-e2e-")
	Expect(err).NotTo(HaveOccurred())

	// The control plane starts while the manager builds.
	suite, err := testenv.StartSuite(workDir)
	Expect(err).NotTo(HaveOccurred())
	env, kubeconfig, kubectlPath = suite.Env, suite.Kubeconfig, suite.Kubectl
	binary := suite.Manager
	kubeControllers, err = testenv.StartKubeControllers(kubeconfig, workDir)
	Expect(err).NotTo(HaveOccurred())

	apiToken = suiteProducer()
	certFile, keyFile, roots := servingCertificate(workDir)
	probeAddr, apiAddr, metricsAddr := freeAddr(), freeAddr(), freeAddr()
	// kubectl get deliveries: kube-apiserver proxies delivery.hookkeeper.dev
	// to the manager's aggregated API through the APIService, registered
	// here with an ExternalName Service for 127.0.0.1 and the CA of the
	// certificate the manager serves (testenv.RegisterDeliveryAPI). The
	// manager serves it for the whole suite and it is unregistered before
	// the manager stops: an unavailable APIService would hold up namespace
	// deletion, which waits for complete discovery.
	deliveryAPIAddr := freeAddr()
	deliveryCert, deliveryKey, deliveryCA, err := testenv.DeliveryAPICert(workDir)
	Expect(err).NotTo(HaveOccurred())
	metricsURL = "http://" + metricsAddr + "/metrics"
	// The manager exports its spans to a real OTLP receiver (tracing_test.go).
	traces, err = startCollector(freeAddr())
	Expect(err).NotTo(HaveOccurred())
	managerLog = filepath.Join(workDir, "manager.log")
	logFile, err := os.Create(managerLog)
	Expect(err).NotTo(HaveOccurred())

	manager = exec.Command(binary,
		"--ledger=sqlite://"+filepath.Join(workDir, "ledger.db"),
		"--metrics-bind-address="+metricsAddr,
		"--metrics-secure=false",
		"--health-probe-bind-address="+probeAddr,
		"--api-bind-address="+apiAddr,
		"--api-auth=kubernetes",
		"--api-tls-cert-file="+certFile,
		"--api-tls-key-file="+keyFile,
		"--aggregated-api-bind-address="+deliveryAPIAddr,
		"--aggregated-api-tls-cert-file="+deliveryCert,
		"--aggregated-api-tls-key-file="+deliveryKey,
		"--endpoint-activity-interval=1s",
		"--policy-evidence-resync=2s",
		"--quota-refresh=1s",
		"--max-fan-out="+fmt.Sprint(maxFanOut),
		// Every evaluation of the hostile filter spec's loop (a million
		// iterations) takes far longer than this; simple filters never
		// reach a clock check (filter_test.go).
		"--filter-eval-timeout=5ms",
		// The receivers are on loopback, which is forbidden by default.
		"--allowed-destination-cidrs=127.0.0.0/8",
		"--zap-devel",
	)
	// The Deployment's memory settings (config/manager/manager.yaml).
	manager.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "GOGC=400", "GOMEMLIMIT=400MiB",
		// Tracing on, every publish sampled, spans exported within 200ms.
		"OTEL_EXPORTER_OTLP_ENDPOINT="+traces.endpoint, "OTEL_BSP_SCHEDULE_DELAY=200")
	manager.Stdout, manager.Stderr = logFile, logFile
	Expect(manager.Start()).To(Succeed())
	managerDone = make(chan struct{})
	go func() {
		managerErr = manager.Wait()
		_ = logFile.Close()
		close(managerDone)
	}()

	api = &apiClient{base: "https://" + apiAddr, token: apiToken, client: tlsClient(roots)}
	probe := &http.Client{Timeout: 2 * time.Second}
	// Ready: the probe answers, and so does the API (an unknown event of an
	// authenticated caller is a 404, not a refused connection).
	Eventually(func(g Gomega) {
		select {
		case <-managerDone:
			StopTrying("the manager exited: " + fmt.Sprint(managerErr) + "\n" + testenv.Tail(managerLog, 60)).Now()
		default:
		}
		resp, err := probe.Get("http://" + probeAddr + "/readyz")
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		status, _, err := api.do(http.MethodGet, "/v1/namespaces/e2e/events/evt_none", "", "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusNotFound))
	}).WithTimeout(60*time.Second).Should(Succeed(), func() string { return "manager not ready:\n" + testenv.Tail(managerLog, 60) })
	Expect(testenv.RegisterDeliveryAPI(kubectlPath, kubeconfig, deliveryAPIAddr, deliveryCA)).To(Succeed())
	Expect(testenv.WaitDeliveryAPI(kubectlPath, kubeconfig, 60*time.Second)).To(Succeed(), func() string { return testenv.Tail(managerLog, 60) })
	suiteFailed = false
})

var _ = AfterSuite(func() {
	// Unregistered while the manager still serves it; checked at the end,
	// so that a failure still stops every process.
	var unregisterErr error
	if env != nil && kubeconfig != "" {
		unregisterErr = testenv.UnregisterDeliveryAPI(kubectlPath, kubeconfig)
	}
	if manager != nil && manager.Process != nil {
		_ = manager.Process.Signal(syscall.SIGTERM)
		select {
		case <-managerDone:
		case <-time.After(30 * time.Second):
			_ = manager.Process.Kill()
			<-managerDone
			Fail("the manager did not stop within 30s of SIGTERM:\n" + testenv.Tail(managerLog, 60))
		}
		// SIGTERM is a clean shutdown: exit status 0.
		Expect(managerErr).NotTo(HaveOccurred(), "the manager's exit after SIGTERM:\n"+testenv.Tail(managerLog, 60))
	}
	Expect(kubeControllers.Stop()).To(Succeed())
	if traces != nil {
		Expect(traces.stop()).To(Succeed())
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
	Expect(unregisterErr).NotTo(HaveOccurred())
	if workDir != "" {
		if suiteFailed {
			GinkgoWriter.Printf("kept %s (manager.log, ledger.db, kubeconfig) for the failure\n", workDir)
		} else {
			Expect(os.RemoveAll(workDir)).To(Succeed())
		}
	}
})

// The namespace and receivers of the running spec, for the failure report.
var (
	specNamespace string
	specReceivers []*receiver
)

var _ = BeforeEach(func() {
	specNamespace, specReceivers = "", nil
})

// On failure, attach what explains it: the manager's log, the hookkeeper
// objects and Events, kubectl describe of the spec's namespace, and what
// the receivers saw.
var _ = AfterEach(func() {
	if !CurrentSpecReport().Failed() {
		return
	}
	suiteFailed = true
	select {
	case <-managerDone:
		AddReportEntry("manager exited", fmt.Sprint(managerErr))
	default:
	}
	AddReportEntry("manager log (last 200 lines; full log in "+managerLog+")", testenv.Tail(managerLog, 200))
	AddReportEntry("kubectl get hookkeeper -A -o yaml", kubectlOutput("get", "hookkeeper", "-A", "-o", "yaml"))
	AddReportEntry("kubectl get events -A", kubectlOutput("get", "events", "-A"))
	if specNamespace != "" {
		AddReportEntry("kubectl describe hookkeeper -n "+specNamespace,
			kubectlOutput("describe", "retrypolicies,webhookendpoints,deliveryrecoveries", "-n", specNamespace))
	}
	for _, r := range specReceivers {
		AddReportEntry("receiver "+r.name, r.String())
	}
})

// kubectlOutput runs kubectl and returns what it printed, errors included:
// for reports, never for assertions.
func kubectlOutput(args ...string) string {
	out, err := runKubectl("", args...)
	if err != nil {
		return out + "\n" + err.Error()
	}
	return out
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr() string {
	addr, err := testenv.FreeAddr()
	Expect(err).NotTo(HaveOccurred())
	return addr
}

// runKubectl runs the real kubectl against the suite's control plane.
func runKubectl(stdin string, args ...string) (string, error) {
	return testenv.RunKubectl(kubectlPath, kubeconfig, stdin, args...)
}
