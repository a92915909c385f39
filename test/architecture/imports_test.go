// Package architecture holds tests of the code's shape rather than its
// behaviour.
package architecture

import (
	"os/exec"
	"strings"
	"testing"
)

// Which packages may import Kubernetes is said by folder in house.json
// (TestKubernetesStaysInItsWings); internal/httpapi only k8s.io/apiserver's
// authentication and authorization interfaces
// (TestHTTPAPIUsesOnlyTheAuthInterfacesOfAPIServer).

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
