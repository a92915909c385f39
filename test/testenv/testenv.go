// Package testenv starts the real control plane (etcd and kube-apiserver,
// built by `make controlplane`) for envtest suites and the e2e tests, with
// hookkeeper's CRDs installed, and runs the real processes around it: the
// manager binary, kubectl, and kube-controllers (the upstream namespace,
// garbage-collector and clusterrole-aggregation controllers) for suites that
// need them. It never skips: a suite that cannot find the
// binaries fails and says how to build them.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Binaries that make up the control plane.
var binaries = []string{"etcd", "kube-apiserver", "kubectl"}

// RepoRoot is the repository's root directory, found from this file so that
// tests also run from an editor or another working directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// AssetsDir returns the directory holding etcd, kube-apiserver, kubectl and
// kube-controllers: $KUBEBUILDER_ASSETS when set, else the newest build
// under bin/k8s.
func AssetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, checkAssets(dir)
	}
	pattern := filepath.Join(RepoRoot(), "bin", "k8s", fmt.Sprintf("*-%s-%s", runtime.GOOS, runtime.GOARCH))
	dirs, _ := filepath.Glob(pattern)
	for i := len(dirs) - 1; i >= 0; i-- {
		if checkAssets(dirs[i]) == nil {
			return dirs[i], nil
		}
	}
	return "", fmt.Errorf("no control-plane binaries under %s: run `make controlplane` (it builds etcd, kube-apiserver, kubectl and kube-controllers once)", pattern)
}

func checkAssets(dir string) error {
	for _, b := range binaries {
		if _, err := exec.LookPath(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("control-plane binary %s missing in %s: run `make controlplane`", b, dir)
		}
	}
	return nil
}

// New returns an envtest environment that installs hookkeeper's CRDs from
// config/crd/bases and runs the real binaries.
func New() (*envtest.Environment, error) {
	dir, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	return &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: dir,
	}, nil
}

// Kubeconfig writes a kubeconfig for a cluster-admin user of env into dir
// and returns its path, for running the real kubectl against the test
// control plane.
func Kubeconfig(env *envtest.Environment, dir string) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "hookkeeper-test-admin", Groups: []string{"system:masters"}}, &rest.Config{})
	if err != nil {
		return "", fmt.Errorf("adding an admin user to the test control plane: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("rendering kubeconfig: %w", err)
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("writing kubeconfig: %w", err)
	}
	return path, nil
}

// Kubectl returns the path of the kubectl binary built with the control
// plane.
func Kubectl() (string, error) {
	dir, err := AssetsDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "kubectl"), nil
}
