// Package architecture holds tests of the code's shape rather than its
// behaviour.
package architecture

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// TestEngineImportsNoKubernetes keeps the delivery engine (everything under
// internal/) free of Kubernetes packages: the controllers drive it through
// its Go API, so it can be tested, benchmarked and reasoned about alone.
func TestEngineImportsNoKubernetes(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, "./internal/...")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list found only %d dependencies; is ./internal/... empty?", len(deps))
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "k8s.io/") || strings.HasPrefix(dep, "sigs.k8s.io/") {
			t.Errorf("internal/ depends on the Kubernetes package %s", dep)
		}
	}
}
