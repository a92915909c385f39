// Package manifests checks the kustomize bases in config/ against the real
// API server: what `make build-installer` renders must be accepted as is.
package manifests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

func TestInstallManifestsAreAcceptedByTheAPIServer(t *testing.T) {
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	env.CRDDirectoryPaths = nil // the installer brings its own CRDs
	env.ErrorIfCRDPathMissing = false
	if _, err := env.Start(); err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })

	dir := t.TempDir()
	kubeconfig, err := testenv.Kubeconfig(env, dir)
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := testenv.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	rendered := run("kustomize", filepath.Join(testenv.RepoRoot(), "config", "default"))
	installer := filepath.Join(dir, "install.yaml")
	if err := os.WriteFile(installer, []byte(rendered), 0o600); err != nil {
		t.Fatal(err)
	}

	// Namespace and CRDs first, for real, so that the dry run of the rest can
	// resolve them.
	out := run("apply", "--server-side", "-f", installer)
	for _, want := range []string{
		"namespace/hookkeeper-system serverside-applied",
		"customresourcedefinition.apiextensions.k8s.io/retrypolicies.hookkeeper.dev serverside-applied",
		"deployment.apps/hookkeeper-controller-manager serverside-applied",
		"clusterrole.rbac.authorization.k8s.io/hookkeeper-manager-role serverside-applied",
		"persistentvolumeclaim/hookkeeper-ledger serverside-applied",
		"clusterrole.rbac.authorization.k8s.io/hookkeeper-event-publisher serverside-applied",
		"clusterrole.rbac.authorization.k8s.io/hookkeeper-delivery-reader serverside-applied",
		"service/hookkeeper-api serverside-applied",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("applying the installer: missing %q in:\n%s", want, out)
		}
	}

	// The Deployment runs non-root with a read-only root filesystem and
	// mounts the ledger volume.
	spec := run("get", "deployment", "-n", "hookkeeper-system", "hookkeeper-controller-manager", "-o",
		`jsonpath={.spec.template.spec.securityContext.runAsNonRoot} {.spec.template.spec.containers[0].securityContext.readOnlyRootFilesystem} {.spec.template.spec.containers[0].volumeMounts[0].mountPath} {.spec.strategy.type}`)
	if spec != "true true /var/lib/hookkeeper Recreate" {
		t.Errorf("deployment security and ledger volume = %q", spec)
	}
}
