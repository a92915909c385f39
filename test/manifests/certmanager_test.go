package manifests

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// TestCertManagerOverlay renders config/certmanager with the real kubectl
// (no cert-manager runs here, so it is not applied) and checks that its
// parts fit together: the manager serves the files of the Secret the
// Certificate fills, provisions nothing itself, the Certificate names every
// Service the manager serves TLS behind, and the CA injector is pointed at
// that Certificate.
func TestCertManagerOverlay(t *testing.T) {
	kubectl, err := testenv.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	out, err := testenv.RunKubectl(kubectl, "/dev/null", "", "kustomize", filepath.Join(testenv.RepoRoot(), "config", "certmanager"))
	if err != nil {
		t.Fatal(err)
	}
	objects := map[string]*unstructured.Unstructured{}
	for doc := range strings.SplitSeq(out, "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		objects[obj.GetKind()+"/"+obj.GetName()] = obj
	}
	get := func(key string) *unstructured.Unstructured {
		t.Helper()
		obj, ok := objects[key]
		if !ok {
			t.Fatalf("config/certmanager renders no %s", key)
		}
		return obj
	}

	cert := get("Certificate/hookkeeper-serving-cert")
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	for key, obj := range objects {
		if obj.GetKind() == "Service" {
			want := obj.GetName() + "." + obj.GetNamespace() + ".svc"
			if strings.Contains(key, "metrics") {
				continue // served by controller-runtime with its own certificate
			}
			if !slices.Contains(dnsNames, want) {
				t.Errorf("the Certificate's dnsNames %v lack %s", dnsNames, want)
			}
		}
	}

	deploy := get("Deployment/hookkeeper-controller-manager")
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	manager := containers[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(manager, "args")
	for _, a := range args {
		if strings.HasPrefix(a, "--serving-cert-") {
			t.Errorf("the manager still provisions its certificate: %s", a)
		}
	}
	if !slices.Contains(args, "--api-tls-cert-file=/etc/hookkeeper/tls/tls.crt") || !slices.Contains(args, "--api-tls-key-file=/etc/hookkeeper/tls/tls.key") {
		t.Errorf("the manager does not serve the mounted certificate: %v", args)
	}
	volumes, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "volumes")
	mounted := false
	for _, v := range volumes {
		name, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName")
		mounted = mounted || name == secretName
	}
	if !mounted {
		t.Errorf("the Deployment does not mount the Certificate's Secret %s", secretName)
	}

	apiService := get("APIService/v1alpha1.delivery.hookkeeper.dev")
	if got, want := apiService.GetAnnotations()["cert-manager.io/inject-ca-from"], cert.GetNamespace()+"/"+cert.GetName(); got != want {
		t.Errorf("APIService inject-ca-from = %q, want %q", got, want)
	}
	issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
	get("Issuer/" + issuer)
}
