// Command manager runs hookkeeper: the data plane (the delivery engine,
// the HTTP API, the aggregated API, probes and metrics), which runs from
// the ledger for the life of the process, and the control plane (the
// controllers), one manager after another (cmd/planes.go). It only wires:
// flags, options, the two planes, start.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	hookkeeperv1alpha1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/deliveryrecovery"
	"github.com/hookkeeper/hookkeeper/controllers/eventtype"
	"github.com/hookkeeper/hookkeeper/controllers/quota"
	"github.com/hookkeeper/hookkeeper/controllers/retrypolicy"
	"github.com/hookkeeper/hookkeeper/controllers/signingsecret"
	"github.com/hookkeeper/hookkeeper/controllers/webhookendpoint"
	"github.com/hookkeeper/hookkeeper/internal/destination"
	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/groupcommit"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/ledgerstore"
	"github.com/hookkeeper/hookkeeper/internal/publish"
	"github.com/hookkeeper/hookkeeper/internal/servingcert"
	"github.com/hookkeeper/hookkeeper/internal/tracing"
)

var (
	scheme   = runtime.NewScheme()
	setupLog = ctrl.Log.WithName("setup")
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(hookkeeperv1alpha1.AddToScheme(scheme))
}

func main() {
	var (
		metricsAddr, probeAddr, ledgerFlag string
		pprofAddr                          string
		leaderElectionNamespace            string
		secureMetrics, enableHTTP2         bool
		leaderElect                        bool
		instance                           string
		workers                            int
		statusResync, commitDelay          time.Duration
		activityInterval, policyResync     time.Duration
		quotaRefresh, counterInterval      time.Duration
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "Address the metrics endpoint binds to, such as :8443; \"0\" disables it.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS, for callers authorized by a SubjectAccessReview.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false, "Enable HTTP/2 for the metrics server (off by default: CVE-2023-44487, CVE-2023-39325).")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "0", "Address Go's pprof handlers (/debug/pprof/) bind to, such as 127.0.0.1:8082, for diagnosing the manager's CPU and memory; \"0\" disables them. They are unauthenticated: bind to loopback or reach them with kubectl port-forward.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Run the controllers on one elected replica at a time.")
	flag.StringVar(&leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader-election Lease; empty means the manager's own namespace (required when it runs outside the cluster).")
	flag.StringVar(&ledgerFlag, "ledger", "sqlite://hookkeeper-ledger.db", "Where the delivery ledger lives: sqlite://<path> (embedded, one replica) or postgres://<dsn> (shared, several replicas).")
	var apiFlags apiOptions // the HTTP API: address, authentication, TLS (cmd/api.go)
	apiFlags.bindFlags(flag.CommandLine)
	flag.StringVar(&instance, "instance", "", "Identity of this replica across restarts of its container, never shared by two running processes: the pod's UID (metadata.uid from the downward API). At start the engine returns to the pool the deliveries an earlier process of the same instance had in flight, instead of waiting for their leases to expire. Empty: no such reclaim (the SQLite ledger reclaims every lease when it opens regardless).")
	var certFlags servingCertOptions // the self-provisioned serving certificate (cmd/servingcert.go)
	certFlags.bindFlags(flag.CommandLine)
	var deliveryAPIFlags deliveryAPIOptions // kubectl get deliveries (cmd/deliveryapi.go)
	deliveryAPIFlags.bindFlags(flag.CommandLine)
	flag.IntVar(&workers, "workers", 128, "Delivery attempts in progress at once, per replica.")
	flag.DurationVar(&commitDelay, "commit-delay", engine.DefaultCommitDelay, "How long a ledger commit of publishes or attempt records may wait for more of them while they keep coming, so that several share one transaction and its fsync; 0 commits each as soon as the ledger is free.")
	flag.DurationVar(&statusResync, "endpoint-status-resync", 0, "The safety resync: how often every WebhookEndpoint is reconciled again whether or not its deliveries moved (0: 1h to 2h, jittered). Counters that move show within --endpoint-activity-interval, exhaustions at once, and a status that changes with time (a rotation's end, evidence windows) when it does.")
	flag.DurationVar(&policyResync, "policy-evidence-resync", 0, "How often every RetryPolicy's outcome evidence is refreshed from the ledger (0: 1m).")
	flag.DurationVar(&quotaRefresh, "quota-refresh", 0, "How often every WebhookQuota's status.used is read again from the ledger (0: 1m); written only when it moved.")
	flag.DurationVar(&counterInterval, "endpoint-counter-interval", 0, "The least time between two status writes of a WebhookEndpoint whose status changed only in its fast-moving counters (delivered total, last success, evidence); any other change (conditions, the breaker, pending, in flight, exhausted) is written at once (0: 1m). Live figures: kubectl get deliveries and the metrics.")
	flag.DurationVar(&activityInterval, "endpoint-activity-interval", 0, "How often the leader reads from the ledger, in one query, the counters of the WebhookEndpoints whose deliveries moved since its last read, to refresh their status (0: 5s).")
	var destFlags destinationFlags
	destFlags.bind(flag.CommandLine)
	var watched string
	flag.StringVar(&watched, "watch-namespaces", "", watchNamespacesUsage)
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	apiFlags.provisioned = certFlags.enabled()
	deliveryAPIFlags.provisioned = certFlags.enabled()
	if err := apiFlags.validate(); err != nil {
		setupLog.Error(err, "invalid HTTP API flags")
		os.Exit(2)
	}
	if err := deliveryAPIFlags.validate(); err != nil {
		setupLog.Error(err, "invalid aggregated API flags")
		os.Exit(2)
	}

	// Safe destinations: the engine's sender refuses forbidden addresses
	// when it dials, the WebhookEndpoint controller when it reconciles.
	destinations, err := destFlags.policy()
	if err != nil {
		setupLog.Error(err, "invalid destination policy")
		os.Exit(2)
	}
	setupLog.Info("destination policy", "allowed", destFlags.allowed, "clusterServices", destFlags.services, "clusterPods", destFlags.pods)

	cacheOpts, err := watchNamespaces(watched).cacheOptions()
	if err != nil {
		setupLog.Error(err, "invalid --watch-namespaces")
		os.Exit(2)
	}

	loc, err := ledger.ParseLocation(ledgerFlag)
	if err != nil {
		setupLog.Error(err, "invalid --ledger")
		os.Exit(2)
	}
	ctx := ctrl.SetupSignalHandler()
	// Traces when the OTEL_* environment asks for them, else none
	// (docs/operations/tracing.md).
	traces, stopTraces, err := tracing.Setup(ctx)
	if err != nil {
		setupLog.Error(err, "unable to set up tracing")
		os.Exit(2)
	}
	defer flushTraces(stopTraces)
	if traces.Enabled {
		setupLog.Info("exporting traces over OTLP", "protocol", traces.Protocol)
	}
	store, err := ledgerstore.Open(ctx, loc)
	if err != nil {
		setupLog.Error(err, "unable to open the ledger")
		os.Exit(1)
	}
	defer store.Close()
	setupLog.Info("ledger opened", "ledger", loc.String())

	var tlsOpts []func(*tls.Config)
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{
		BindAddress:   metricsAddr,
		SecureServing: secureMetrics,
		TLSOpts:       tlsOpts,
		// OpenMetrics when the scraper asks for it: the attempt duration
		// histogram's exemplars (trace IDs) are served only in it.
		HandlerOpts: []func(*promhttp.HandlerOpts){func(o *promhttp.HandlerOpts) { o.EnableOpenMetrics = true }},
	}
	if secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	// Reading the kubeconfig asks nothing of the API server.
	restConfig := ctrl.GetConfigOrDie()

	// The data plane (cmd/planes.go, docs/adr/0049): everything below runs
	// for the life of the process, from the ledger, whether or not the API
	// server answers. The control plane, a series of managers, comes after.
	var dataPlane errgroup.Group
	dataCtx, stopDataPlane := context.WithCancelCause(ctx)
	defer stopDataPlane(nil)
	runData := func(what string, fn func(context.Context) error) {
		dataPlane.Go(func() error {
			if err := fn(dataCtx); err != nil {
				err = fmt.Errorf("%s: %w", what, err)
				stopDataPlane(err)
				return err
			}
			return nil
		})
	}

	// Exhaustions and circuit-breaker changes reach the endpoints' status
	// through channels the WebhookEndpoint controller watches; they outlive
	// its incarnations, and drop (and count) what no controller takes.
	exhausted := webhookendpoint.NewExhaustionEvents(1024)
	breakers := webhookendpoint.NewBreakerEvents(1024)
	overruns := webhookendpoint.NewFilterOverrunEvents(1024)
	eng, err := engine.New(engine.Options{
		Store:       store,
		Sender:      dispatch.NewGuardedSender(destinations),
		Instance:    instance,
		Workers:     workers,
		WriteBatch:  groupcommit.Options{MaxDelay: cmp.Or(commitDelay, -1)},
		Logger:      ctrl.Log.WithName("engine"),
		Metrics:     engine.NewMetrics(ctrlmetrics.Registry, store),
		OnExhausted: exhausted.Notify,
		OnBreaker:   breakers.Notify,
		// The publish cores tell the engine (their Committer) of filter
		// overruns; it wakes the endpoint's controller.
		OnFilterOverrun: overruns.Notify,
		// Replicas share a PostgreSQL ledger: the endpoints' rateLimit
		// and maxInFlight hold for all of them together.
		SharedLimits: loc.Driver == ledger.Postgres,
	})
	if err != nil {
		setupLog.Error(err, "unable to create the delivery engine")
		os.Exit(1)
	}
	defer eng.Close()
	runData("the delivery engine", eng.Run)

	ready := map[string]healthz.Checker{"engine": func(*http.Request) error { return eng.Ready() }}
	// The serving certificate: the HTTP API takes it through GetCertificate,
	// the aggregated API server as a dynamiccertificates.CertKeyContentProvider.
	var servingCert *servingcert.Provisioner
	if certFlags.enabled() {
		var run []func(context.Context) error
		var certReady healthz.Checker
		if servingCert, run, certReady, err = certFlags.setup(restConfig); err != nil {
			setupLog.Error(err, "unable to set up the serving certificate")
			os.Exit(2)
		}
		for _, fn := range run {
			runData("the serving certificate", fn)
		}
		ready["serving-cert"] = certReady
	}
	// The event types' contracts, which every replica holds publishes to:
	// a book the control plane's caches fill and the ledger keeps, so that
	// a publish reads no API server and a process started during an outage
	// knows the last contracts (docs/adr/0049).
	contracts, err := eventtype.NewEventTypeContracts(ctx, eventtype.ContractsOptions{
		Snapshots:       store,
		WatchNamespaces: slices.Sorted(maps.Keys(cacheOpts.DefaultNamespaces)),
		Log:             ctrl.Log.WithName("contracts"),
	})
	if err != nil {
		setupLog.Error(err, "unable to load the event types' contracts from the ledger")
		os.Exit(1)
	}
	// The publish core, built once and handed to both doors (each sees it
	// through its own metrics label): one set of limits, one secrets hash,
	// one share of the cores for a namespace's filters, whichever door a
	// publish or its retry comes through.
	core, err := publish.New(publish.Config{Committer: eng, MaxFanOut: apiFlags.maxFanOut, FilterEvalTimeout: apiFlags.filterEvalTimeout,
		Metrics: publish.NewMetrics(ctrlmetrics.Registry), Contracts: contracts})
	if err != nil {
		setupLog.Error(err, "unable to set up publishing")
		os.Exit(1)
	}
	if apiFlags.enabled() {
		var certs certificateSource
		if servingCert != nil {
			certs = servingCert
		}
		api, err := apiServer(apiFlags, restConfig, core, eng, store, certs)
		if err != nil {
			setupLog.Error(err, "unable to set up the HTTP API")
			os.Exit(1)
		}
		runData("the HTTP API", api)
	}
	if deliveryAPIFlags.enabled() {
		var provisioned dynamiccertificates.CertKeyContentProvider
		if servingCert != nil {
			provisioned = servingCert
		}
		// The aggregated API delegates authentication and authorization to
		// the API server, which reaches it through its aggregation layer:
		// while the API server does not answer nobody can call it, and a
		// setup that needs the API server is retried until it answers.
		log := ctrl.Log.WithName("delivery-api")
		runData("the aggregated API", func(ctx context.Context) error {
			supervise(ctx, log, "the aggregated API", restartBackoff, clock.RealClock{}, func(ctx context.Context) error {
				// kubectl create webhookevent: the same core, whether or not
				// the HTTP API itself is served.
				srv, err := deliveryAPIServer(deliveryAPIFlags, store, core.Through(publish.DoorKube), provisioned, log)
				if err != nil {
					return err
				}
				return srv.Start(ctx)
			})
			return nil
		})
	}
	httpClient, err := rest.HTTPClientFor(restConfig)
	if err != nil {
		setupLog.Error(err, "unable to set up the metrics server's client")
		os.Exit(1)
	}
	metricsSrv, err := metricsserver.NewServer(metricsOpts, restConfig, httpClient)
	if err != nil {
		setupLog.Error(err, "unable to set up the metrics server")
		os.Exit(1)
	}
	if metricsSrv != nil {
		runData("the metrics server", metricsSrv.Start)
	}
	probeSrv, err := probes(probeAddr, ready)
	if err != nil {
		setupLog.Error(err, "unable to set up the probes")
		os.Exit(1)
	}
	runData("the probes", probeSrv)
	pprofSrv, err := pprofServer(pprofAddr)
	if err != nil {
		setupLog.Error(err, "unable to set up pprof")
		os.Exit(1)
	}
	runData("pprof", pprofSrv)

	// The control plane: one manager after another (cmd/planes.go).
	metrics := webhookendpoint.NewBreakerMetrics(ctrlmetrics.Registry)
	incarnation := func(ctx context.Context) error {
		mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
			Scheme: scheme,
			Cache:  cacheOpts,
			// On SIGTERM the manager releases the Lease and then reports
			// it as an error; stoppingLogger says it at info level.
			Logger:                  stoppingLogger(ctrl.Log, func() bool { return ctx.Err() != nil }),
			Metrics:                 metricsserver.Options{BindAddress: "0"}, // served by the data plane
			HealthProbeBindAddress:  "0",                                     // likewise
			LeaderElection:          leaderElect,
			LeaderElectionID:        "controller-leader.hookkeeper.dev",
			LeaderElectionNamespace: leaderElectionNamespace,
			// A replica stopping hands the Lease over at once instead of
			// leaving the controllers idle until it expires.
			LeaderElectionReleaseOnCancel: true,
			// Each incarnation builds the same controllers again.
			Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		})
		if err != nil {
			return fmt.Errorf("creating the manager: %w", err)
		}
		if err := setupControllers(mgr, controllerDeps{
			store: store, eng: eng, exhausted: exhausted, breakers: breakers, overruns: overruns, metrics: metrics,
			destinations: destinations, policyResync: policyResync, quotaRefresh: quotaRefresh,
			activityInterval: activityInterval, statusResync: statusResync, counterInterval: counterInterval,
		}); err != nil {
			return err
		}
		if err := contracts.Attach(mgr); err != nil {
			return fmt.Errorf("setting up the event types' contracts: %w", err)
		}
		setupLog.Info("starting the control plane")
		return mgr.Start(ctx)
	}
	dataPlane.Go(func() error {
		supervise(dataCtx, setupLog, "the control plane", restartBackoff, clock.RealClock{}, incarnation)
		return nil
	})

	err = dataPlane.Wait()
	if cause := context.Cause(dataCtx); ctx.Err() == nil && cause != nil {
		err = cause
	}
	if err != nil {
		setupLog.Error(err, "problem running hookkeeper")
		os.Exit(1)
	}
}

// controllerDeps is what every incarnation's controllers share with the
// data plane.
type controllerDeps struct {
	store                                                      ledger.Store
	eng                                                        *engine.Engine
	exhausted                                                  *webhookendpoint.ExhaustionEvents
	breakers                                                   *webhookendpoint.BreakerEvents
	overruns                                                   *webhookendpoint.FilterOverrunEvents
	metrics                                                    *webhookendpoint.BreakerMetrics
	destinations                                               *destination.Policy
	policyResync, quotaRefresh, activityInterval, statusResync time.Duration
	counterInterval                                            time.Duration
}

// setupControllers adds the controllers to one incarnation's manager.
func setupControllers(mgr ctrl.Manager, d controllerDeps) error {
	if err := (&retrypolicy.RetryPolicyReconciler{
		Client:       mgr.GetClient(),
		Recorder:     mgr.GetEventRecorder("hookkeeper-retrypolicy"),
		Ledger:       d.store,
		ResyncPeriod: d.policyResync,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the RetryPolicy controller: %w", err)
	}
	if err := (&webhookendpoint.WebhookEndpointReconciler{
		Client:               mgr.GetClient(),
		APIReader:            mgr.GetAPIReader(),
		Engine:               d.eng,
		Recorder:             mgr.GetEventRecorder("hookkeeper-webhookendpoint"),
		DefaultPolicy:        retrypolicy.DefaultPolicy(),
		Exhausted:            d.exhausted.Events(),
		Breakers:             d.breakers.Events(),
		FilterOverruns:       d.overruns.Events(),
		Metrics:              d.metrics,
		Ledger:               d.store,
		ActivityInterval:     d.activityInterval,
		CounterWriteInterval: d.counterInterval,
		ResyncPeriod:         d.statusResync,
		Destinations:         d.destinations,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the WebhookEndpoint controller: %w", err)
	}
	if err := (&signingsecret.SigningSecretReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Ledger:    d.store,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the SigningSecret controller: %w", err)
	}
	if err := (&deliveryrecovery.DeliveryRecoveryReconciler{
		Client:   mgr.GetClient(),
		Engine:   d.eng,
		Ledger:   d.store,
		Recorder: mgr.GetEventRecorder("hookkeeper-deliveryrecovery"),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the DeliveryRecovery controller: %w", err)
	}
	if err := (&eventtype.WebhookEventTypeReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the WebhookEventType controller: %w", err)
	}
	// Namespace quotas are registered in the ledger, where every replica's
	// publishes are checked against them.
	if err := (&quota.WebhookQuotaReconciler{Client: mgr.GetClient(), Ledger: d.store, RefreshPeriod: d.quotaRefresh}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the WebhookQuota controller: %w", err)
	}
	return nil
}
