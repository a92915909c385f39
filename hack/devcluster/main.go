// Command devcluster runs a local control plane (the real etcd and
// kube-apiserver from `make controlplane`) with hookkeeper's CRDs installed
// and kube-controllers beside it (namespace deletion, garbage collection,
// clusterrole aggregation), writes an admin kubeconfig, and keeps running
// until interrupted. With --delivery-api it also routes the manager's
// aggregated API through kube-apiserver on loopback: kube-apiserver is
// configured for aggregation, a serving certificate is written for the
// manager, and the APIService is registered, so that `kubectl get
// deliveries` works with the ordinary kubeconfig. It is the cluster behind
// `make dev` and `make demo`.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

func main() {
	dir := flag.String("dir", ".dev", "Directory for the kubeconfig, the certificates, the logs and the ready marker.")
	deliveryAPI := flag.String("delivery-api", "", "Address (127.0.0.1:port) the manager's aggregated API will listen on: its serving certificate is written to <dir>/delivery-api.crt and .key and its APIService registered. Empty: none.")
	flag.Parse()
	if err := run(*dir, *deliveryAPI); err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		os.Exit(1)
	}
}

func run(dir, deliveryAPI string) (err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ready := filepath.Join(dir, "cluster.ready")
	_ = os.Remove(ready)
	// A signal during the start is taken once everything has started, so
	// that the deferred stops still run.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)

	env, err := testenv.New()
	if err != nil {
		return err
	}
	if _, err := testenv.FrontProxy(env, dir); err != nil {
		return err
	}
	if _, err := env.Start(); err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() { err = errors.Join(err, env.Stop()) }()

	kubeconfig, err := testenv.Kubeconfig(env, dir)
	if err != nil {
		return err
	}
	controllers, err := testenv.StartKubeControllers(kubeconfig, dir)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, controllers.Stop()) }()
	if deliveryAPI != "" {
		kubectl, err := testenv.Kubectl()
		if err != nil {
			return err
		}
		_, _, caBundle, err := testenv.DeliveryAPICert(dir)
		if err != nil {
			return err
		}
		if err := testenv.RegisterDeliveryAPI(kubectl, kubeconfig, deliveryAPI, caBundle); err != nil {
			return err
		}
	}
	if err := os.WriteFile(ready, []byte(kubeconfig+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "devcluster: kube-apiserver at %s, kubeconfig %s, kube-controllers log %s\n", env.Config.Host, kubeconfig, controllers.Log)

	<-sig
	_ = os.Remove(ready)
	return nil
}
