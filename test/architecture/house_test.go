package architecture

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// house is house.json: the parts of the code by folder, the arrows meant
// between them, and the arrows that must never exist.
type house struct {
	Parts map[string]struct {
		Is         []string `json:"is"`
		Says       string   `json:"says"`
		Kubernetes bool     `json:"kubernetes"`
	} `json:"parts"`
	Arrows [][2]string `json:"arrows"`
	Never  [][3]string `json:"never"`
}

func readHouse(t *testing.T) house {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "test", "architecture", "house.json"))
	if err != nil {
		t.Fatal(err)
	}
	var h house
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatalf("house.json: %v", err)
	}
	return h
}

// partOf names the part whose folder holds pkg (a path relative to the
// module), the longest folder winning; "" when none does.
func (h house) partOf(pkg string) string {
	best, bestLen := "", 0
	for name, p := range h.Parts {
		for _, dir := range p.Is {
			if (pkg+"/" == dir || strings.HasPrefix(pkg+"/", dir)) && len(dir) > bestLen {
				best, bestLen = name, len(dir)
			}
		}
	}
	return best
}

// packages lists the module's packages under the housed trees with their
// non-test imports of the module, relative to it.
func packages(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./api/...", "./cmd/...", "./controllers/...", "./internal/...", "./pkg/...")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	pkgs := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module+"/")
		pkgs[pkg] = nil
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				pkgs[pkg] = append(pkgs[pkg], rel)
			}
		}
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

// TestHouseHolds holds house.json against the code: every package lies in
// a part (by its folder, not by a list kept by hand), every import between
// parts is an arrow of the house, and no import is one of its nevers (one
// door through the other, a door into the engine's batching, authentication
// beside a door, storage knowing the loop or Kubernetes...).
func TestHouseHolds(t *testing.T) {
	h := readHouse(t)
	for _, a := range h.Arrows {
		for _, end := range a {
			if _, ok := h.Parts[end]; !ok {
				t.Errorf("house.json: the arrow %s -> %s names no part %q", a[0], a[1], end)
			}
		}
	}
	for _, n := range h.Never {
		if slices.Contains(h.Arrows, [2]string{n[0], n[1]}) {
			t.Errorf("house.json: %s -> %s is both an arrow and a never", n[0], n[1])
		}
	}
	used := map[[2]string]bool{}
	for pkg, imports := range packages(t) {
		from := h.partOf(pkg)
		if from == "" {
			t.Errorf("%s lies in no part of test/architecture/house.json: give it one", pkg)
			continue
		}
		for _, imp := range imports {
			to := h.partOf(imp)
			if to == from || to == "" {
				continue
			}
			used[[2]string{from, to}] = true
			if i := slices.IndexFunc(h.Never, func(n [3]string) bool { return n[0] == from && n[1] == to }); i >= 0 {
				t.Errorf("%s imports %s: never %s -> %s (%s)", pkg, imp, from, to, h.Never[i][2])
			} else if !slices.Contains(h.Arrows, [2]string{from, to}) {
				t.Errorf("%s imports %s: %s -> %s is not an arrow of the house (add it to house.json if it is meant)", pkg, imp, from, to)
			}
		}
	}
	for _, a := range h.Arrows {
		if !used[a] {
			t.Errorf("house.json: no package of %s imports one of %s: drop the arrow, or the house says more than the code", a[0], a[1])
		}
	}
}

// TestKubernetesStaysInItsWings keeps every part not marked kubernetes in
// house.json (the engine, the ledger, the wire, the publish core, the HTTP
// door, the leaves) free of Kubernetes modules, directly or through any
// dependency: they are tested, benchmarked and reasoned about alone.
// k8s.io/utils is not counted: a module of self-contained helpers (the
// filter cache's LRU, issue #45) that depends on no Kubernetes API, client
// or machinery.
func TestKubernetesStaysInItsWings(t *testing.T) {
	h := readHouse(t)
	var free []string
	for pkg := range packages(t) {
		if p := h.partOf(pkg); p != "" && !h.Parts[p].Kubernetes {
			free = append(free, module+"/"+pkg)
		}
	}
	if len(free) < 10 {
		t.Fatalf("only %d packages outside the Kubernetes wings", len(free))
	}
	slices.Sort(free)
	cmd := exec.Command("go", append([]string{"list", "-f", `{{.ImportPath}} {{join .Deps " "}}`}, free...)...)
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		for _, dep := range fields[1:] {
			if (strings.HasPrefix(dep, "k8s.io/") && !strings.HasPrefix(dep, "k8s.io/utils/")) || strings.HasPrefix(dep, "sigs.k8s.io/") {
				t.Errorf("%s (part %s) depends on the Kubernetes package %s", fields[0], h.partOf(strings.TrimPrefix(fields[0], module+"/")), dep)
				break
			}
		}
	}
}
