// Command kube-controllers runs three upstream kube-controller-manager
// controllers that a bare control plane (etcd + kube-apiserver) lacks and
// that our tests depend on:
//
//   - the namespace controller: deleting a namespace empties it and removes
//     the "kubernetes" finalizer, so the deletion completes;
//   - the garbage collector: dependents of a deleted owner are deleted
//     (background and foreground propagation, orphaning);
//   - the clusterrole aggregation controller: ClusterRoles with an
//     aggregationRule (view, edit, admin) gain the rules of the roles
//     labelled to aggregate into them.
//
// They are wired the way kube-controller-manager wires them (shared typed
// and metadata informers, a discovery-backed RESTMapper), without the rest of
// kube-controller-manager, whose kubelet dependencies the module proxy does
// not serve. It lives in its own module because k8s.io/kubernetes can only be
// required with every staging module replaced by its published release.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/clusterroleaggregation"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	namespacecontroller "k8s.io/kubernetes/pkg/controller/namespace"
)

type options struct {
	kubeconfig          string
	discoveryPeriod     time.Duration
	namespaceSyncPeriod time.Duration
	resyncPeriod        time.Duration
	readyFile           string
}

func main() {
	var o options
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the API server (default $KUBECONFIG)")
	// kube-controller-manager refreshes discovery every 30s; tests install
	// CRDs and expect their objects to be collected soon after.
	fs.DurationVar(&o.discoveryPeriod, "discovery-period", 5*time.Second, "how often the garbage collector re-reads discovery to watch new resources")
	fs.DurationVar(&o.namespaceSyncPeriod, "namespace-sync-period", 5*time.Minute, "resync period of the namespace controller (kube-controller-manager's default)")
	fs.DurationVar(&o.resyncPeriod, "resync-period", 12*time.Hour, "resync period of the shared informers")
	fs.StringVar(&o.readyFile, "ready-file", "", "if set, created once the informers have synced, so a caller can wait for it")
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, o); err != nil {
		klog.ErrorS(err, "kube-controllers failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, o options) error {
	if o.kubeconfig == "" {
		return errors.New("--kubeconfig (or $KUBECONFIG) is required")
	}
	config, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig %s: %w", o.kubeconfig, err)
	}
	// kube-controller-manager's defaults; the namespace controller and the
	// garbage collector raise them below as it does.
	config.QPS, config.Burst = 20, 30

	client, err := kubernetes.NewForConfig(rest.CopyConfig(config))
	if err != nil {
		return fmt.Errorf("kube client: %w", err)
	}
	if err := waitForAPIServer(ctx, client); err != nil {
		return err
	}

	sharedInformers := informers.NewSharedInformerFactory(client, o.resyncPeriod)
	metadataClient, err := metadata.NewForConfig(rest.CopyConfig(config))
	if err != nil {
		return fmt.Errorf("metadata client: %w", err)
	}
	metadataInformers := metadatainformer.NewSharedInformerFactory(metadataClient, o.resyncPeriod)
	objectOrMetadataInformers := informerfactory.NewInformerFactory(sharedInformers, metadataInformers)
	informersStarted := make(chan struct{})

	discoveryClient, err := discovery.NewDiscoveryClientForConfig(rest.CopyConfig(config))
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	restMapper := restmapper.NewDeferredDiscoveryRESTMapper(cacheddiscovery.NewMemCacheClient(discoveryClient))

	// Namespace controller: as kube-controller-manager, with a raised rate
	// limit because it issues many discovery and delete calls.
	nsConfig := rest.CopyConfig(config)
	nsConfig.QPS *= 20
	nsConfig.Burst *= 100
	nsClient, err := kubernetes.NewForConfig(nsConfig)
	if err != nil {
		return fmt.Errorf("namespace controller client: %w", err)
	}
	nsMetadata, err := metadata.NewForConfig(nsConfig)
	if err != nil {
		return fmt.Errorf("namespace controller metadata client: %w", err)
	}
	namespaces := namespacecontroller.NewNamespaceController(ctx, nsClient, nsMetadata,
		nsClient.Discovery().ServerPreferredNamespacedResources,
		sharedInformers.Core().V1().Namespaces(), o.namespaceSyncPeriod, v1.FinalizerKubernetes)

	// Garbage collector: each deletion takes two calls, hence twice the QPS.
	gcConfig := rest.CopyConfig(config)
	gcConfig.QPS *= 2
	gcMetadata, err := metadata.NewForConfig(gcConfig)
	if err != nil {
		return fmt.Errorf("garbage collector metadata client: %w", err)
	}
	gc, err := garbagecollector.NewGarbageCollector(ctx, client, gcMetadata, restMapper,
		garbagecollector.DefaultIgnoredResources(), objectOrMetadataInformers, informersStarted)
	if err != nil {
		return fmt.Errorf("garbage collector: %w", err)
	}
	gcDiscovery, err := discovery.NewDiscoveryClientForConfig(rest.CopyConfig(config))
	if err != nil {
		return fmt.Errorf("garbage collector discovery client: %w", err)
	}

	aggregation := clusterroleaggregation.NewClusterRoleAggregation(
		sharedInformers.Rbac().V1().ClusterRoles(), client.RbacV1())

	// Informers are requested by the constructors above; start them only now.
	sharedInformers.Start(ctx.Done())
	objectOrMetadataInformers.Start(ctx.Done())
	close(informersStarted)
	defer sharedInformers.Shutdown()

	var wg sync.WaitGroup
	// kube-controller-manager's worker counts.
	wg.Go(func() { namespaces.Run(ctx, 10) })
	wg.Go(func() { gc.Run(ctx, 20, 30*time.Second) })
	wg.Go(func() { gc.Sync(ctx, gcDiscovery, o.discoveryPeriod) })
	wg.Go(func() { aggregation.Run(ctx, 5) })
	wg.Go(func() { wait.Until(restMapper.Reset, o.discoveryPeriod, ctx.Done()) })

	for typ, synced := range sharedInformers.WaitForCacheSync(ctx.Done()) {
		if !synced {
			if ctx.Err() != nil {
				break
			}
			return fmt.Errorf("informer for %v did not sync", typ)
		}
	}
	if o.readyFile != "" && ctx.Err() == nil {
		if err := os.WriteFile(o.readyFile, []byte("ready\n"), 0o644); err != nil {
			return fmt.Errorf("writing ready file: %w", err)
		}
	}
	klog.InfoS("namespace, garbagecollector and clusterrole-aggregation controllers running")

	<-ctx.Done()
	klog.InfoS("stopping controllers")
	wg.Wait()
	return nil
}

// waitForAPIServer waits until /healthz answers ok, like
// kube-controller-manager does before it builds its controllers.
func waitForAPIServer(ctx context.Context, client kubernetes.Interface) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/healthz").Do(ctx).Raw()
		if err != nil {
			last = err
			return false, nil
		}
		return string(body) == "ok", nil
	})
	if err != nil {
		return fmt.Errorf("API server not healthy (last error: %v): %w", last, err)
	}
	return nil
}
