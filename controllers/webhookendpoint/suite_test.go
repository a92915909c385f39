package webhookendpoint

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/deliveryrecovery"
	"github.com/hookkeeper/hookkeeper/controllers/eventtype"
	"github.com/hookkeeper/hookkeeper/controllers/quota"
	"github.com/hookkeeper/hookkeeper/controllers/retrypolicy"
	"github.com/hookkeeper/hookkeeper/controllers/signingsecret"
	"github.com/hookkeeper/hookkeeper/internal/destination"
	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// The controller suite runs the reconcilers in a real manager against the
// real kube-apiserver and etcd, and drives them through the API server only.
// The WebhookEndpoint controller drives a real delivery engine on a SQLite
// ledger in a temporary directory, which delivers to real HTTP receivers on
// loopback.

var (
	env       *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	ctx       context.Context
	cancel    context.CancelFunc
	scheme    = runtime.NewScheme()

	ledgerDir  string
	store      ledger.Store
	eng        *engine.Engine
	engineDone chan error
	exhaustion *ExhaustionEvents
	breakers   *BreakerEvents
	// breakerRegistry holds the WebhookEndpoint controller's circuit
	// metrics.
	breakerRegistry = prometheus.NewRegistry()

	destinations *destination.Policy

	// contracts are the event types' contracts as the publish core reads
	// them, from the manager's cache.
	contracts *eventtype.EventTypeContracts

	// endpointReads counts what the suite's WebhookEndpoint controller
	// reads live from the API server.
	endpointReads *liveReads

	// errorLog keeps the error-level lines the manager logged, for specs
	// that assert something is not an error.
	errorLog = &logLines{}
)

// logLines is an io.Writer that keeps the lines at level ERROR.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(string(p), "\n") {
		if strings.Contains(line, "\tERROR\t") {
			l.lines = append(l.lines, line)
		}
	}
	return len(p), nil
}

// containing returns the error lines that contain s.
func (l *logLines) containing(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// suiteDNS resolves the suite's test names, and any other name as the
// system does.
var suiteDNS = testResolver{"metadata.test": netip.MustParseAddr("169.254.169.254")}

type testResolver map[string]netip.Addr

func (r testResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return []netip.Addr{a}, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}

// suiteResync is the RetryPolicy controller's evidence resync in the
// suite: short, so that its evidence shows within seconds.
const suiteResync = 3 * time.Second

// suiteActivityInterval is how often the suite's WebhookEndpoint
// controller polls the ledger's counters: counters of successful
// deliveries (which the engine does not announce) show from that poll
// alone, as the endpoints' safety resync is an hour (slowRefresh).
const suiteActivityInterval = 200 * time.Millisecond

// suiteEventInterval is the least time between two DeliveriesExhausted
// Events of an endpoint in the suite: longer than any spec runs, so that
// "one Event for a thousand exhaustions" holds however slowly the machine
// publishes and delivers them. With the default minute, a spec slowed down
// by a loaded machine (-race, shared cores: 97s measured) rightly got a
// second Event for the still growing count. The interval rule itself is
// TestExhaustionEvent's, on a fixed clock.
const suiteEventInterval = time.Hour

// suiteCounterWriteInterval is the least time between two status writes
// of an endpoint that change only its counters, in the suite: short, so
// that specs waiting for a delivered total see it within moments (the
// default is a minute).
const suiteCounterWriteInterval = time.Second

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	// A bound for what the controllers do on their own, not a measure of
	// speed: Gomega's default second failed a RetryPolicy's first reconcile
	// on a loaded machine (two control planes on shared cores).
	SetDefaultEventuallyTimeout(10 * time.Second)
	RunSpecs(t, "Controller suite (real kube-apiserver)")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(io.MultiWriter(GinkgoWriter, errorLog)), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(hookv1.AddToScheme(scheme)).To(Succeed())

	var err error
	env, err = testenv.New()
	Expect(err).NotTo(HaveOccurred())
	cfg, err = env.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	// The suite's endpoints and recoveries, but for those of the
	// slow-refresh namespace, which a manager of its own reconciles.
	notSlow := cache.ByObject{Field: fields.OneTermNotEqualSelector("metadata.namespace", slowRefreshNamespace)}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{ByObject: map[client.Object]cache.ByObject{&hookv1.WebhookEndpoint{}: notSlow, &hookv1.DeliveryRecovery{}: notSlow}},
	})
	Expect(err).NotTo(HaveOccurred())

	ledgerDir, err = os.MkdirTemp("", "hookkeeper-controllers-")
	Expect(err).NotTo(HaveOccurred())
	store, err = sqlite.Open(ctx, filepath.Join(ledgerDir, "ledger.db"))
	Expect(err).NotTo(HaveOccurred())
	Expect((&retrypolicy.RetryPolicyReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("hookkeeper-retrypolicy"), Ledger: store, ResyncPeriod: suiteResync}).SetupWithManager(mgr)).To(Succeed())
	exhaustion = NewExhaustionEvents(1024)
	breakers = NewBreakerEvents(1024)
	overruns := NewFilterOverrunEvents(1024)
	slowExhaustion := NewExhaustionEvents(1024)
	// The manager's destination policy, with loopback allowed for the
	// suite's receivers (as --allowed-destination-cidrs=127.0.0.0/8 does)
	// and a resolver that knows the suite's test names.
	allowed, err := destination.ParseCIDRs("127.0.0.0/8")
	Expect(err).NotTo(HaveOccurred())
	destinations = destination.New(destination.Options{Allowed: allowed, Resolver: suiteDNS})
	eng, err = engine.New(engine.Options{
		Store:           store,
		Sender:          dispatch.NewGuardedSender(destinations),
		OnExhausted:     func(n engine.ExhaustedNotice) { exhaustion.Notify(n); slowExhaustion.Notify(n) },
		OnBreaker:       breakers.Notify,
		OnFilterOverrun: overruns.Notify,
		IdleWait:        100 * time.Millisecond,
		SweepInterval:   200 * time.Millisecond,
		Logger:          logf.Log.WithName("engine"),
	})
	Expect(err).NotTo(HaveOccurred())
	engineDone = make(chan error, 1)
	go func() { engineDone <- eng.Run(ctx) }()
	endpointReads = &liveReads{Reader: mgr.GetAPIReader()}
	Expect((&WebhookEndpointReconciler{
		Client:           mgr.GetClient(),
		APIReader:        endpointReads,
		Engine:           eng,
		Recorder:         mgr.GetEventRecorder("hookkeeper-webhookendpoint"),
		DefaultPolicy:    retrypolicy.DefaultPolicy(),
		Exhausted:        exhaustion.Events(),
		Breakers:         breakers.Events(),
		FilterOverruns:   overruns.Events(),
		Metrics:          NewBreakerMetrics(breakerRegistry),
		Ledger:           store,
		ActivityInterval: suiteActivityInterval,
		ResyncPeriod:     slowRefresh,
		EventInterval:    suiteEventInterval,
		Destinations:     destinations,

		CounterWriteInterval: suiteCounterWriteInterval,
	}).SetupWithManager(mgr)).To(Succeed())

	Expect((&signingsecret.SigningSecretReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Ledger: store}).SetupWithManager(mgr)).To(Succeed())

	Expect((&deliveryrecovery.DeliveryRecoveryReconciler{Client: mgr.GetClient(), Engine: eng, Ledger: store, FollowInterval: 200 * time.Millisecond, Recorder: mgr.GetEventRecorder("hookkeeper-deliveryrecovery")}).SetupWithManager(mgr)).To(Succeed())
	Expect((&eventtype.WebhookEventTypeReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)).To(Succeed())
	Expect((&quota.WebhookQuotaReconciler{Client: mgr.GetClient(), Ledger: store, RefreshPeriod: 200 * time.Millisecond}).SetupWithManager(mgr)).To(Succeed())
	contracts, err = eventtype.NewEventTypeContracts(ctx, eventtype.ContractsOptions{Snapshots: store, Log: logf.Log.WithName("contracts")})
	Expect(err).NotTo(HaveOccurred())
	Expect(contracts.Attach(mgr)).To(Succeed())

	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	startSlowRefreshManager(slowExhaustion)
})

// slowRefreshNamespace is reconciled by a manager whose WebhookEndpoint
// controller refreshes every endpoint only after slowRefresh, so that a
// spec there sees only what an event triggers, not a periodic refresh.
const (
	slowRefreshNamespace = "slow-refresh"
	slowRefresh          = time.Hour
)

// startSlowRefreshManager starts, beside the suite's, a manager of the
// slow-refresh namespace alone with the controllers its endpoints and
// recoveries need, on the suite's engine. Its controllers share their
// names with the suite's.
func startSlowRefreshManager(exhausted *ExhaustionEvents) {
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: slowRefreshNamespace}})).To(Succeed())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{slowRefreshNamespace: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect((&WebhookEndpointReconciler{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Engine:        eng,
		Recorder:      mgr.GetEventRecorder("hookkeeper-webhookendpoint"),
		DefaultPolicy: retrypolicy.DefaultPolicy(),
		Exhausted:     exhausted.Events(),
		ResyncPeriod:  slowRefresh,
		EventInterval: suiteEventInterval,
		Destinations:  destinations,
		Ledger:        store,
		// No activity poller: only what an event triggers.
		ActivityInterval: -1,

		CounterWriteInterval: suiteCounterWriteInterval,
	}).SetupWithManager(mgr)).To(Succeed())
	Expect((&signingsecret.SigningSecretReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Ledger: store}).SetupWithManager(mgr)).To(Succeed())
	Expect((&deliveryrecovery.DeliveryRecoveryReconciler{Client: mgr.GetClient(), Engine: eng, Ledger: store, FollowInterval: 200 * time.Millisecond, Recorder: mgr.GetEventRecorder("hookkeeper-deliveryrecovery")}).SetupWithManager(mgr)).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
}

var _ = AfterSuite(func() {
	cancel()
	if eng != nil {
		Expect(<-engineDone).To(Succeed())
		eng.Close()
	}
	if store != nil {
		Expect(store.Close()).To(Succeed())
	}
	if ledgerDir != "" {
		Expect(os.RemoveAll(ledgerDir)).To(Succeed())
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
