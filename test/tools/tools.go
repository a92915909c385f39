// Package tools finds the heavy tools the tests run (promtool, helm), each
// pinned in its own module under hack/tools/<name> and built once into
// bin/<name>-<version> by `make <name>`.
package tools

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Root is the repository's root directory, found from this file.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Path returns bin/<name>-<version> for the tool pinned in
// hack/tools/<name> as module modulePath, and whether it is built.
func Path(name, modulePath string) (string, bool, error) {
	version, err := pinnedVersion(filepath.Join(Root(), "hack", "tools", name, "go.mod"), modulePath)
	if err != nil {
		return "", false, err
	}
	path := filepath.Join(Root(), "bin", name+"-"+version)
	_, err = os.Stat(path)
	return path, err == nil, nil
}

// Require returns the tool's path. When it is not built the test skips,
// except under CI=true, where it fails: CI builds it (`make test` depends on
// `make <name>`).
func Require(t testing.TB, name, modulePath string) string {
	t.Helper()
	path, ok, err := Path(name, modulePath)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		msg := fmt.Sprintf("%s is not built at %s: run `make %s` (it builds the pinned version once)", name, path, name)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// pinnedVersion reads modulePath's version from a go.mod's require lines.
func pinnedVersion(goMod, modulePath string) (string, error) {
	f, err := os.Open(goMod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(s.Text()), "require "))
		if len(fields) >= 2 && fields[0] == modulePath {
			return fields[1], nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s does not require %s", goMod, modulePath)
}
