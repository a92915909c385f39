package architecture

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildOutputsAreIgnored keeps binaries out of the repository: `go
// build` of any main package, run from the root or from the package's own
// directory, writes a file that .gitignore covers.
func TestBuildOutputsAreIgnored(t *testing.T) {
	root := goOutput(t, "list", "-m", "-f", "{{.Dir}}")
	dirs := strings.Fields(goOutput(t, "list", "-f", `{{if eq .Name "main"}}{{.Dir}}{{end}}`, "github.com/hookkeeper/hookkeeper/..."))
	if len(dirs) < 3 {
		t.Fatalf("go list found only %d main packages", len(dirs))
	}
	var outputs []string
	for _, dir := range dirs {
		name := filepath.Base(dir)
		outputs = append(outputs, filepath.Join(root, name), filepath.Join(dir, name))
	}
	// Each tool module under hack/tools builds a command in its own
	// directory (the main module cannot build it from the root).
	tools, err := filepath.Glob(filepath.Join(root, "hack", "tools", "*", "go.mod"))
	if err != nil || len(tools) == 0 {
		t.Fatalf("no tool modules under hack/tools (%v)", err)
	}
	for _, mod := range tools {
		dir := filepath.Dir(mod)
		outputs = append(outputs, filepath.Join(dir, filepath.Base(dir)))
	}
	for _, out := range outputs {
		if fi, err := os.Stat(out); err == nil && fi.IsDir() {
			continue // go build refuses to write over a directory
		}
		rel, _ := filepath.Rel(root, out)
		cmd := exec.Command("git", "check-ignore", "-q", "--no-index", rel)
		cmd.Dir = root
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exit) && exit.ExitCode() == 1:
			t.Errorf("%s, the output of a go build, is not in .gitignore", rel)
		default:
			t.Fatalf("git check-ignore %s: %v", rel, err)
		}
	}
}

func goOutput(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}
