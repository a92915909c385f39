// Command devcluster runs a local control plane (the real etcd and
// kube-apiserver from `make controlplane`) with hookkeeper's CRDs installed,
// writes an admin kubeconfig, and keeps running until interrupted. It is the
// cluster behind `make dev`.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

func main() {
	dir := flag.String("dir", ".dev", "Directory for the kubeconfig and the ready marker.")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ready := filepath.Join(dir, "cluster.ready")
	_ = os.Remove(ready)

	env, err := testenv.New()
	if err != nil {
		return err
	}
	if _, err := env.Start(); err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() { _ = env.Stop() }()

	kubeconfig, err := testenv.Kubeconfig(env, dir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(ready, []byte(kubeconfig+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "devcluster: kube-apiserver at %s, kubeconfig %s\n", env.Config.Host, kubeconfig)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	_ = os.Remove(ready)
	return nil
}
