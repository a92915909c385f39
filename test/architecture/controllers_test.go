package architecture

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// controllerPackages are the packages under controllers/ (issue #45): one
// per kind, as cert-manager keeps pkg/controller/<name>, and the two small
// ones they share. controllers/ itself holds only the package doc, and
// controllers/internal/ only test helpers.
var controllerPackages = []string{
	"controllers",
	"controllers/conditions",
	"controllers/deliveryrecovery",
	"controllers/eventtype",
	"controllers/index",
	"controllers/internal/testutil",
	"controllers/ledgerread",
	"controllers/quota",
	"controllers/retrypolicy",
	"controllers/signingsecret",
	"controllers/webhookendpoint",
}

// maxInternalImports is the most internal/... packages one controller
// package may import: a reconciler that needs more reaches into the
// delivery machinery instead of asking it.
const maxInternalImports = 8

// TestControllerPackages holds controllers/ to controllerPackages, and each
// of them to at most maxInternalImports packages of internal/ (non-test
// imports: what a build pulls in).
func TestControllerPackages(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./controllers/...")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list ./controllers/...: %v\n%s", err, out)
	}
	var found []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(fields[0], module+"/")
		found = append(found, pkg)
		var internal []string
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module+"/internal/") {
				internal = append(internal, strings.TrimPrefix(imp, module+"/"))
			}
		}
		if len(internal) > maxInternalImports {
			t.Errorf("%s imports %d internal packages, more than %d: %s", pkg, len(internal), maxInternalImports, strings.Join(internal, ", "))
		}
	}
	slices.Sort(found)
	want := slices.Sorted(slices.Values(controllerPackages))
	if !slices.Equal(found, want) {
		t.Errorf("the controller packages are\n  %s\nwant\n  %s\n(a new controller gets a package of its own: add it to controllerPackages)",
			strings.Join(found, "\n  "), strings.Join(want, "\n  "))
	}
}
