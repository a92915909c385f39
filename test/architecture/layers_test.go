package architecture

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

const module = "github.com/hookkeeper/hookkeeper"

// layerRules say which of the project's own trees a tree may import: the
// API types are a leaf that clients can vendor alone, the engine knows
// nothing of the controllers or the binaries, and the value types that the
// crypto and the wire share with the ledger live in leaves of their own, so
// that signing and dispatch never depend on storage.
var layerRules = []struct {
	tree      string   // packages at or under this path
	forbidden []string // may not import packages at or under these
}{
	{"api", []string{"internal", "controllers", "cmd"}},
	{"internal", []string{"controllers", "cmd"}},
	{"internal/signing", []string{"internal/ledger", "internal/dispatch", "internal/engine", "internal/httpapi"}},
	{"internal/dispatch", []string{"internal/ledger", "internal/engine", "internal/httpapi"}},
	{"internal/sensitive", []string{""}},
	{"internal/wire", []string{""}},
	{"internal/truncate", []string{""}},
}

// TestLayers checks layerRules against every package's non-test imports:
// what a build of the tree pulls in. Tests may reach across (the API suite
// holds the CRD's CEL rules against internal/wire, so that they cannot
// drift), since no consumer of the tree compiles them.
func TestLayers(t *testing.T) {
	for _, rule := range layerRules {
		cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./"+rule.tree+"/...")
		cmd.Dir = testenv.RepoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", rule.tree, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) == 0 || lines[0] == "" {
			t.Fatalf("go list found no package under %s", rule.tree)
		}
		for _, line := range lines {
			fields := strings.Fields(line)
			pkg := fields[0]
			for _, imp := range fields[1:] {
				if imp == pkg || !strings.HasPrefix(imp, module+"/") {
					continue
				}
				rel := strings.TrimPrefix(imp, module+"/")
				if rel == rule.tree || strings.HasPrefix(rel, rule.tree+"/") {
					continue // within the tree (a leaf's own test helpers)
				}
				for _, f := range rule.forbidden {
					if f == "" || rel == f || strings.HasPrefix(rel, f+"/") {
						t.Errorf("%s imports %s: %s may not import %s", pkg, imp, rule.tree, describe(f))
					}
				}
			}
		}
	}
}

func describe(tree string) string {
	if tree == "" {
		return "any other hookkeeper package (it is a leaf)"
	}
	return tree + "/"
}
