package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// BuildManager builds the manager binary (./cmd) into dir and returns its
// path, for suites that run it as a process.
func BuildManager(dir string) (string, error) {
	binary := filepath.Join(dir, "manager")
	cmd := exec.Command("go", "build", "-o", binary, "./cmd")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd: %w\n%s", err, out)
	}
	return binary, nil
}

// RunKubectl runs the kubectl at path against kubeconfig, with stdin when
// it is not empty, and returns what it printed. The error carries
// kubectl's stderr. A kubectl that hangs is killed after KubectlLimit.
func RunKubectl(path, kubeconfig, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), KubectlLimit(args))
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if _, ok := errors.AsType[*exec.ExitError](err); ok {
			return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return stdout.String(), fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return stdout.String(), nil
}

// KubectlLimit is how long RunKubectl lets kubectl run with args: two
// minutes, or half a minute more than a --timeout it was given (kubectl
// wait), so that kubectl's own timeout, whose error names what it waited
// for, is the one that ends a long wait.
func KubectlLimit(args []string) time.Duration {
	limit := 2 * time.Minute
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--timeout="); ok {
			if d, err := time.ParseDuration(v); err == nil {
				limit = max(limit, d+30*time.Second)
			}
		}
	}
	return limit
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago, for a process's listeners.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Tail returns the last n lines of the file at path, for failure reports.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Suite is what a suite that runs the manager as a process works with:
// the control plane, a kubeconfig for it, kubectl and the manager binary.
type Suite struct {
	Env        *envtest.Environment
	Kubeconfig string
	Kubectl    string
	Manager    string
}

// StartSuite starts the control plane while it builds the manager into
// dir, and writes the kubeconfig there. kube-apiserver is configured for
// API aggregation (FrontProxy), so that a suite can route the manager's
// aggregated API through it (RegisterDeliveryAPI). On error nothing is left
// running.
func StartSuite(dir string) (*Suite, error) {
	var s Suite
	built := make(chan error, 1)
	go func() {
		var err error
		s.Manager, err = BuildManager(dir)
		built <- err
	}()
	kubectl, err := Kubectl()
	if err != nil {
		return nil, errors.Join(err, <-built)
	}
	s.Kubectl = kubectl
	if s.Env, err = New(); err != nil {
		return nil, errors.Join(err, <-built)
	}
	if _, err := FrontProxy(s.Env, dir); err != nil {
		return nil, errors.Join(err, <-built)
	}
	if _, err := s.Env.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("starting etcd and kube-apiserver: %w", err), <-built)
	}
	s.Kubeconfig, err = Kubeconfig(s.Env, dir)
	if err = errors.Join(err, <-built); err != nil {
		_ = s.Env.Stop()
		return nil, err
	}
	return &s, nil
}
