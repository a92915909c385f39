// Package architecture holds tests of the code's shape rather than its
// behaviour.
package architecture

import (
	"os/exec"
	"strings"
	"testing"
)

// kubernetesAdapters are the packages under internal/ that may import
// Kubernetes. internal/kubeauth is the adapter that implements the HTTP
// API's Auth with TokenReview and SubjectAccessReview; internal/servingcert
// keeps the manager's serving certificate in a Secret and an APIService's
// caBundle current; internal/deliveryapi (and its generated OpenAPI
// definitions) serves the ledger's history as an aggregated Kubernetes API;
// internal/httpapi asks k8s.io/apiserver's authentication and
// authorization interfaces, and nothing else of Kubernetes
// (TestHTTPAPIUsesOnlyTheAuthInterfacesOfAPIServer).
// They are not part of the engine, and no engine package may import them
// (if one did, its Kubernetes dependencies would show up below and fail the
// test).
var kubernetesAdapters = map[string]bool{
	"github.com/hookkeeper/hookkeeper/internal/kubeauth":            true,
	"github.com/hookkeeper/hookkeeper/internal/servingcert":         true,
	"github.com/hookkeeper/hookkeeper/internal/deliveryapi":         true,
	"github.com/hookkeeper/hookkeeper/internal/deliveryapi/openapi": true,
	"github.com/hookkeeper/hookkeeper/internal/httpapi":             true,
}

// TestEngineImportsNoKubernetes keeps the delivery engine (everything under
// internal/ but the adapters above) free of Kubernetes packages: the
// controllers drive it through its Go API, so it can be tested,
// benchmarked and reasoned about alone.
func TestEngineImportsNoKubernetes(t *testing.T) {
	list := exec.Command("go", "list", "github.com/hookkeeper/hookkeeper/internal/...")
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var engine []string
	for _, pkg := range strings.Fields(string(out)) {
		if !kubernetesAdapters[pkg] {
			engine = append(engine, pkg)
		}
	}
	if len(engine) < 5 {
		t.Fatalf("go list found only %d engine packages under internal/", len(engine))
	}
	for adapter := range kubernetesAdapters {
		if !strings.Contains(string(out), adapter+"\n") {
			t.Errorf("the adapter %s no longer exists: drop it from kubernetesAdapters", adapter)
		}
	}

	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`}, engine...)...)
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list found only %d dependencies; is ./internal/... empty?", len(deps))
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "k8s.io/") || strings.HasPrefix(dep, "sigs.k8s.io/") {
			t.Errorf("the engine (internal/ without the Kubernetes adapters) depends on the Kubernetes package %s", dep)
		}
		if kubernetesAdapters[dep] {
			t.Errorf("the engine imports the Kubernetes adapter %s", dep)
		}
	}
}

// TestServingCertUsesOnlyTheCertificateSeamOfAPIServer keeps
// internal/servingcert's use of k8s.io/apiserver to the interface through
// which an aggregated API server takes its certificate
// (dynamiccertificates), so that the certificate adapter does not grow
// into an API server.
func TestServingCertUsesOnlyTheCertificateSeamOfAPIServer(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "github.com/hookkeeper/hookkeeper/internal/servingcert")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const allowed = "k8s.io/apiserver/pkg/server/dynamiccertificates"
	found := false
	for _, imp := range strings.Fields(string(out)) {
		switch {
		case imp == allowed:
			found = true
		case strings.HasPrefix(imp, "k8s.io/apiserver/"):
			t.Errorf("internal/servingcert imports %s; only %s is meant to be used", imp, allowed)
		}
	}
	if !found {
		t.Errorf("internal/servingcert no longer imports %s: drop this test or update it", allowed)
	}
}

// TestHTTPAPIUsesOnlyTheAuthInterfacesOfAPIServer keeps internal/httpapi's
// use of Kubernetes to the interfaces through which it authenticates and
// authorizes (the ones the aggregated API's delegating stack implements),
// so that the HTTP door does not grow Kubernetes machinery of its own.
func TestHTTPAPIUsesOnlyTheAuthInterfacesOfAPIServer(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "github.com/hookkeeper/hookkeeper/internal/httpapi")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{
		"k8s.io/apiserver/pkg/authentication/authenticator": true,
		"k8s.io/apiserver/pkg/authentication/user":          true,
		"k8s.io/apiserver/pkg/authorization/authorizer":     true,
	}
	for _, imp := range strings.Fields(string(out)) {
		if (strings.HasPrefix(imp, "k8s.io/") || strings.HasPrefix(imp, "sigs.k8s.io/")) && !allowed[imp] {
			t.Errorf("internal/httpapi imports %s; only the authentication and authorization interfaces of k8s.io/apiserver are meant to be used", imp)
		}
	}
}
