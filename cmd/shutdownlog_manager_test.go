package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// TestLeaderStopLogsNoError runs controller-runtime's manager with leader
// election against the real kube-apiserver, in process so that nothing
// the manager logs after Start returns is lost to the exit, and stops it
// as SIGTERM does: it releases the Lease, and says so at info level, with
// no error-level entry.
func TestLeaderStopLogsNoError(t *testing.T) {
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()

	var mu sync.Mutex
	var errorsLogged, infos []string
	base := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(args, `"error"=`) {
			errorsLogged = append(errorsLogged, prefix+" "+args)
		} else {
			infos = append(infos, args)
		}
	}, funcr.Options{})

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	const leaseName = "controller-leader.hookkeeper.dev"
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              leaseName,
		LeaderElectionNamespace:       "default",
		LeaderElectionReleaseOnCancel: true,
		Logger:                        stoppingLogger(base, func() bool { return ctx.Err() != nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	select {
	case <-mgr.Elected():
	case err := <-done:
		t.Fatalf("manager stopped before it was elected: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("not elected within 60s")
	}

	stop() // what SIGTERM does
	if err := <-done; err != nil {
		t.Fatalf("Start after a requested stop: %v", err)
	}
	// The manager reports the release from a goroutine that may outlive
	// Start: wait for the report, then look at everything logged.
	deadline := time.After(30 * time.Second)
	for {
		mu.Lock()
		released := false
		for _, l := range infos {
			released = released || strings.Contains(l, "released the leader election Lease on shutdown")
		}
		got := append([]string(nil), errorsLogged...)
		mu.Unlock()
		if len(got) > 0 {
			t.Fatalf("the manager logged errors on a requested stop:\n%s", strings.Join(got, "\n"))
		}
		if released {
			break
		}
		select {
		case <-deadline:
			t.Fatal("the manager never reported releasing the Lease")
		case <-time.After(20 * time.Millisecond): // polling the log, not synchronizing
		}
	}

	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var lease coordinationv1.Lease
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: leaseName}, &lease); err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Fatalf("the Lease still names %q: it was not released", *h)
	}
}
