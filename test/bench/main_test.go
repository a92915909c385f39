package main

import (
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProfileStagesNameDeclaredFunctions: every function a profile stage
// is found by is declared in this module (or is the standard library's),
// so that a renamed store call cannot silently drop its stage from the
// breakdown, as the ledger stages were dropped once the engine wrote
// through WriteMany.
func TestProfileStagesNameDeclaredFunctions(t *testing.T) {
	for _, st := range profileStages {
		for _, fn := range st.fns {
			slash := strings.LastIndex(fn, "/")
			dot := slash + 1 + strings.Index(fn[slash+1:], ".")
			pkg, rest := fn[:dot], fn[dot+1:]
			recv, name := "", rest
			if i := strings.LastIndex(rest, "."); i >= 0 {
				recv, name = strings.Trim(rest[:i], "(*)"), rest[i+1:]
			}
			if pkg == "runtime" || pkg == "net/http" {
				continue // the standard library's
			}
			dir := packageDir(t, pkg)
			if dir == "" {
				t.Errorf("stage %q: package %q of %s is not in internal/", st.label, pkg, fn)
				continue
			}
			if !declares(t, dir, recv, name) {
				t.Errorf("stage %q: %s is not declared in %s", st.label, fn, dir)
			}
		}
	}
}

// packageDir finds the directory of the package named pkg under internal/.
func packageDir(t *testing.T, pkg string) string {
	t.Helper()
	var found string
	err := filepath.WalkDir("../../internal", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == pkg && found == "" {
			found = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// declares reports whether a non-test file in dir declares the function
// name, as a method of recv (a type name) when recv is not empty.
func declares(t *testing.T, dir, recv, name string) bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := gotoken.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Name.Name != name {
				continue
			}
			if recvName(fd) == recv {
				return true
			}
		}
	}
	return false
}

// recvName is the name of a method's receiver type ("" for a function).
func recvName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}

func TestWriteSectionArchivesWhatItReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "benchmarks.md")
	if err := os.WriteFile(path, []byte("# T\n\n## A\nold a\n### sub\nx\n\n## B\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeSection(path, "## A", "\n## A\nnew a\n"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "# T\n\n## A\nnew a\n\n## B\nb\n" {
		t.Errorf("current: %q", got)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "benchmarks-archive.md"))
	if !strings.HasPrefix(string(got), "# Benchmarks: past runs\n") || !strings.Contains(string(got), "\n## A (replaced on ") ||
		!strings.HasSuffix(string(got), ")\n\nold a\n#### sub\nx\n") {
		t.Errorf("archive: %q", got)
	}
	if err := writeFile(path, "# T\n\nall new\n"); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(filepath.Join(dir, "benchmarks-archive.md"))
	if !strings.HasSuffix(string(got), ")\n\n### A\nnew a\n\n### B\nb\n") || strings.Count(string(got), "# Benchmarks: past runs") != 1 {
		t.Errorf("archive after a full write: %q", got)
	}
}

func TestReplaceSectionAtTheStart(t *testing.T) {
	if got := replaceSection("## B\nold\n\n## C\nc\n", "## B", "\n## B\nnew\n"); got != "## B\nnew\n\n## C\nc\n" {
		t.Errorf("got %q", got)
	}
}
