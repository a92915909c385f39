package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// KubeControllers is the kube-controllers process (hack/tools/kube-controllers):
// the upstream namespace controller, garbage collector and clusterrole
// aggregation controller, which a bare etcd + kube-apiserver lacks. With it
// a namespace deletion completes, dependents of a deleted owner go, and the
// built-in view, edit and admin ClusterRoles gain the rules of the roles
// labelled to aggregate into them.
type KubeControllers struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the process's exit, set before done is closed
	// Log is the path of the process's output, for failure reports.
	Log string
}

// KubeControllersBinary returns the path of kube-controllers, built by
// `make controlplane` beside the other control-plane binaries. A missing
// binary is an error, never a reason to skip.
func KubeControllersBinary() (string, error) {
	dir, err := AssetsDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kube-controllers")
	if _, err := exec.LookPath(path); err != nil {
		return "", fmt.Errorf("kube-controllers missing in %s: run `make controlplane` (hack/controlplane.sh builds it once): %w", dir, err)
	}
	return path, nil
}

// StartKubeControllers runs kube-controllers against the API server of
// kubeconfig (a cluster-admin's) and returns once its informers have
// synced. Its output goes to dir/kube-controllers.log.
func StartKubeControllers(kubeconfig, dir string) (*KubeControllers, error) {
	binary, err := KubeControllersBinary()
	if err != nil {
		return nil, err
	}
	k := &KubeControllers{Log: filepath.Join(dir, "kube-controllers.log"), done: make(chan struct{})}
	ready := filepath.Join(dir, "kube-controllers.ready")
	logFile, err := os.Create(k.Log)
	if err != nil {
		return nil, fmt.Errorf("creating the kube-controllers log: %w", err)
	}
	k.cmd = exec.Command(binary, "--kubeconfig="+kubeconfig, "--ready-file="+ready)
	k.cmd.Stdout, k.cmd.Stderr = logFile, logFile
	if err := k.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	go func() {
		k.err = k.cmd.Wait()
		_ = logFile.Close()
		close(k.done)
	}()

	// Polls for the ready file the process writes once its informers have
	// synced; the process exiting or the deadline ends the wait.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(ready); err == nil {
			return k, nil
		}
		select {
		case <-k.done:
			return nil, fmt.Errorf("kube-controllers exited before it was ready (%v):\n%s", k.err, Tail(k.Log, 40))
		case <-ctx.Done():
			return nil, errors.Join(fmt.Errorf("kube-controllers not ready after a minute:\n%s", Tail(k.Log, 40)), k.Stop())
		case <-tick.C:
		}
	}
}

// Stop sends SIGTERM and waits for a clean exit (status 0); after 30s it
// kills the process and reports that it did not stop.
func (k *KubeControllers) Stop() error {
	if k == nil || k.cmd == nil || k.cmd.Process == nil {
		return nil
	}
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(30 * time.Second):
		_ = k.cmd.Process.Kill()
		<-k.done
		return fmt.Errorf("kube-controllers did not stop within 30s of SIGTERM:\n%s", Tail(k.Log, 40))
	}
	if k.err != nil {
		return fmt.Errorf("kube-controllers exited with %w after SIGTERM:\n%s", k.err, Tail(k.Log, 40))
	}
	return nil
}
