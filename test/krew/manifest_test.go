// Package krew checks the krew manifest of the kubectl plugin
// (hack/krew/hookkeeper.yaml): rendered as krew-release-bot renders it on a
// release, it must pass krew's own validate-krew-manifest and name the
// binary that cmd/kubectl-hookkeeper builds for every platform it lists.
package krew

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"sigs.k8s.io/yaml"

	"github.com/hookkeeper/hookkeeper/test/tools"
)

// plugin is the part of krew's index.Plugin (v1alpha2) the test reads.
type plugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

const tag = "v1.2.3"

// render fills the template as krew-release-bot does: {{ .TagName }} is
// the release tag, addURIAndSha renders the archive's URI and adds its
// sha256. The bot hashes the downloaded archive; there is no release here,
// so the stand-in is the hash of the URI (validation checks its form).
func render(t *testing.T, src []byte) []byte {
	t.Helper()
	funcs := template.FuncMap{"addURIAndSha": func(uri, tagName string) (string, error) {
		u, err := template.New("uri").Parse(uri)
		if err != nil {
			return "", err
		}
		var b bytes.Buffer
		if err := u.Execute(&b, map[string]string{"TagName": tagName}); err != nil {
			return "", err
		}
		sum := sha256.Sum256(b.Bytes())
		return fmt.Sprintf("uri: %s\n    sha256: %s", b.String(), hex.EncodeToString(sum[:])), nil
	}}
	tmpl, err := template.New("hookkeeper.yaml").Funcs(funcs).Parse(string(src))
	if err != nil {
		t.Fatalf("parsing the template: %v", err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, map[string]string{"TagName": tag}); err != nil {
		t.Fatalf("rendering the template: %v", err)
	}
	return out.Bytes()
}

func TestManifest(t *testing.T) {
	root := tools.Root()
	src, err := os.ReadFile(filepath.Join(root, "hack", "krew", "hookkeeper.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rendered := render(t, src)

	var p plugin
	if err := yaml.UnmarshalStrict(rendered, &p); err != nil {
		t.Fatalf("the rendered manifest does not parse: %v\n%s", err, rendered)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "hookkeeper" {
		t.Errorf("apiVersion %q kind %q name %q", p.APIVersion, p.Kind, p.Metadata.Name)
	}
	if p.Spec.Version != tag {
		t.Errorf("spec.version %q, want the release tag %s", p.Spec.Version, tag)
	}
	// Every verb the plugin has is described.
	for _, verb := range []string{"status", "recover", "replay", "rotate-secret", "send-test", "trace", "probe", "catalog"} {
		if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(verb) + `\s`).MatchString(p.Spec.Description) {
			t.Errorf("spec.description does not describe %s", verb)
		}
	}

	// The binary is the one cmd/kubectl-hookkeeper builds, on the
	// platforms Go builds it for, each archive named for its platform.
	if _, err := os.Stat(filepath.Join(root, "cmd", "kubectl-hookkeeper", "main.go")); err != nil {
		t.Fatalf("the plugin's command: %v", err)
	}
	var platforms []string
	for i, pl := range p.Spec.Platforms {
		osName, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		platforms = append(platforms, osName+"/"+arch)
		wantBin, ext := "kubectl-hookkeeper", ".tar.gz"
		if osName == "windows" {
			wantBin, ext = "kubectl-hookkeeper.exe", ".zip"
		}
		if pl.Bin != wantBin {
			t.Errorf("platforms[%d] %s/%s: bin %q, want %q", i, osName, arch, pl.Bin, wantBin)
		}
		wantURI := fmt.Sprintf("https://github.com/hookkeeper/hookkeeper/releases/download/%s/kubectl-hookkeeper_%s_%s_%s%s", tag, tag, osName, arch, ext)
		if pl.URI != wantURI {
			t.Errorf("platforms[%d]: uri %q, want %q", i, pl.URI, wantURI)
		}
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(pl.SHA256) {
			t.Errorf("platforms[%d]: sha256 %q", i, pl.SHA256)
		}
	}
	slices.Sort(platforms)
	if want := []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64", "windows/amd64"}; !slices.Equal(platforms, want) {
		t.Errorf("platforms %v, want %v", platforms, want)
	}

	// krew's own validation, as krew-index runs it on a submission (the
	// install step downloads the archives, which do not exist here).
	validator := tools.Require(t, "krew", "sigs.k8s.io/krew")
	path := filepath.Join(t.TempDir(), "hookkeeper.yaml")
	if err := os.WriteFile(path, rendered, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(validator, "-manifest", path, "-skip-install").CombinedOutput()
	if err != nil {
		t.Fatalf("validate-krew-manifest: %v\n%s\nmanifest:\n%s", err, out, rendered)
	}
	for _, want := range []string{"structural validation OK", "all spec.platform[] items are used", "no overlapping spec.platform[].selector"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("validate-krew-manifest did not say %q:\n%s", want, out)
		}
	}
}

// TestInstallDocumented: the docs give the go install path of the plugin
// under the module's own path.
func TestInstallDocumented(t *testing.T) {
	root := tools.Root()
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^module (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("no module line in go.mod")
	}
	want := "go install " + string(m[1]) + "/cmd/kubectl-hookkeeper@latest"
	doc, err := os.ReadFile(filepath.Join(root, "docs", "kubectl-plugin.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), want) {
		t.Errorf("docs/kubectl-plugin.md does not say %q", want)
	}
}
