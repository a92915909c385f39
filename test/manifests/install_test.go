// Package manifests checks the kustomize bases in config/ against the real
// API server: what `make build-installer` renders must be accepted as is,
// and needs nothing created by hand.
package manifests

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/hookkeeper/hookkeeper/internal/servingcert"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

const (
	namespace      = "hookkeeper-system"
	serviceAccount = "system:serviceaccount:hookkeeper-system:hookkeeper-controller-manager"
	apiServiceName = "v1alpha1.delivery.hookkeeper.dev"
	testImage      = "example.test/hookkeeper:installer-test"
)

// buildInstaller runs `make build-installer` and returns dist/install.yaml.
// It does not regenerate the CRDs and RBAC first (-o manifests): other
// packages' tests read them while this one runs, and whether they are
// current is checked apart.
func buildInstaller(t *testing.T) []byte {
	t.Helper()
	cmd := exec.Command("make", "-s", "build-installer", "IMG="+testImage, "-o", "manifests", "-o", "controlplane")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build-installer: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "dist", "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// objectRef names an object of the installer as `kubectl get -o name`
// prints it, with its namespace.
type objectRef struct{ namespace, name string }

// installerObjects lists the objects of the installer.
func installerObjects(t *testing.T, installer []byte) []objectRef {
	t.Helper()
	var refs []objectRef
	for doc := range strings.SplitSeq(string(installer), "\n---\n") {
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("parsing the installer: %v", err)
		}
		if obj.Object == nil {
			continue
		}
		gvk := obj.GroupVersionKind()
		kind := strings.ToLower(gvk.Kind)
		if gvk.Group != "" {
			kind += "." + gvk.Group
		}
		refs = append(refs, objectRef{obj.GetNamespace(), kind + "/" + obj.GetName()})
	}
	return refs
}

func TestInstallManifestsAreAcceptedByTheAPIServer(t *testing.T) {
	installerYAML := buildInstaller(t)
	if !bytes.Contains(installerYAML, []byte("image: "+testImage)) {
		t.Errorf("the installer does not run the image given as IMG=%s", testImage)
	}

	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	env.CRDDirectoryPaths = nil // the installer brings its own CRDs
	env.ErrorIfCRDPathMissing = false
	dir := t.TempDir()
	// The whole bundle in one server-side apply, into a control plane
	// where nothing was created by hand: every object is applied, and
	// exists afterwards.
	c := install(t, env, dir, installerYAML)
	cfg, kubeconfig, kubectl, out := c.cfg, c.kubeconfig, c.kubectl, c.applied
	run := func(args ...string) string {
		t.Helper()
		return c.run("", args...)
	}
	installer := filepath.Join(dir, "install.yaml")
	objects := installerObjects(t, installerYAML)
	if len(objects) < 30 {
		t.Fatalf("the installer holds only %d objects", len(objects))
	}
	for _, o := range objects {
		if !strings.Contains(out, o.name+" serverside-applied") {
			t.Errorf("applying the installer: %s not applied in:\n%s", o.name, out)
		}
		args := []string{"get", o.name, "-o", "name"}
		if o.namespace != "" {
			args = append(args, "-n", o.namespace)
		}
		if got := strings.TrimSpace(run(args...)); got != o.name {
			t.Errorf("after applying: kubectl get %s printed %q", o.name, got)
		}
	}
	for _, want := range []string{
		"namespace/hookkeeper-system",
		"customresourcedefinition.apiextensions.k8s.io/retrypolicies.hookkeeper.dev",
		"deployment.apps/hookkeeper-controller-manager",
		"clusterrole.rbac.authorization.k8s.io/hookkeeper-manager-role",
		"persistentvolumeclaim/hookkeeper-ledger",
		"clusterrole.rbac.authorization.k8s.io/hookkeeper-event-publisher",
		"clusterrole.rbac.authorization.k8s.io/hookkeeper-delivery-reader",
		"clusterrole.rbac.authorization.k8s.io/hookkeeper-delivery-history-viewer-role",
		"clusterrole.rbac.authorization.k8s.io/hookkeeper-webhookevent-data-reader-role",
		"clusterrolebinding.rbac.authorization.k8s.io/hookkeeper-manager-auth-delegator",
		"rolebinding.rbac.authorization.k8s.io/hookkeeper-manager-auth-reader",
		"service/hookkeeper-api",
		"service/hookkeeper-delivery-api",
		"apiservice.apiregistration.k8s.io/" + apiServiceName,
	} {
		if !slices.ContainsFunc(objects, func(o objectRef) bool { return o.name == want }) {
			t.Errorf("the installer has no %s", want)
		}
	}

	// The Deployment runs non-root with a read-only root filesystem and
	// mounts the ledger volume; it needs no Secret made by hand (no Secret
	// volume) because it provisions its certificate.
	spec := run("get", "deployment", "-n", namespace, "hookkeeper-controller-manager", "-o",
		`jsonpath={.spec.template.spec.securityContext.runAsNonRoot} {.spec.template.spec.containers[0].securityContext.readOnlyRootFilesystem} {.spec.template.spec.containers[0].volumeMounts[0].mountPath} {.spec.strategy.type}`)
	if spec != "true true /var/lib/hookkeeper Recreate" {
		t.Errorf("deployment security and ledger volume = %q", spec)
	}
	if secrets := run("get", "deployment", "-n", namespace, "hookkeeper-controller-manager", "-o", `jsonpath={.spec.template.spec.volumes[*].secret.secretName}`); secrets != "" {
		t.Errorf("the Deployment mounts Secrets %q: someone would have to create them by hand", secrets)
	}
	args := run("get", "deployment", "-n", namespace, "hookkeeper-controller-manager", "-o", `jsonpath={.spec.template.spec.containers[0].args}`)
	for _, want := range []string{"--serving-cert-secret=hookkeeper-serving-cert", "--serving-cert-apiservice=" + apiServiceName, "--serving-cert-services=hookkeeper-api,hookkeeper-delivery-api"} {
		if !strings.Contains(args, want) {
			t.Errorf("the manager's args %s lack %s", args, want)
		}
	}
	// Each Service's target port is a port of the manager's container.
	ports := run("get", "deployment", "-n", namespace, "hookkeeper-controller-manager", "-o", `jsonpath={.spec.template.spec.containers[0].ports[*].name}`)
	for _, svc := range []string{"hookkeeper-api", "hookkeeper-delivery-api", "hookkeeper-controller-manager-metrics-service"} {
		target := run("get", "service", "-n", namespace, svc, "-o", `jsonpath={.spec.ports[0].targetPort}`)
		if !slices.Contains(strings.Fields(ports), target) {
			t.Errorf("Service %s targets port %q; the manager's ports are %q", svc, target, ports)
		}
	}

	// The APIService points at the aggregated API's Service, verifies its
	// certificate, and leaves the caBundle to the manager.
	apiSvc := run("get", "apiservice", apiServiceName, "-o",
		`jsonpath={.spec.group}/{.spec.version} {.spec.service.namespace}/{.spec.service.name}:{.spec.service.port} [{.spec.insecureSkipTLSVerify}] {.spec.groupPriorityMinimum} {.spec.versionPriority} [{.spec.caBundle}]`)
	if want := "delivery.hookkeeper.dev/v1alpha1 hookkeeper-system/hookkeeper-delivery-api:443 [] 1000 100 []"; apiSvc != want {
		t.Errorf("APIService = %q, want %q", apiSvc, want)
	}
	// kube-apiserver cannot reach the manager here (no pod runs behind
	// the Service): the APIService is registered, and reported
	// unavailable.
	available := run("get", "apiservice", apiServiceName, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
	if available != "False" && available != "" {
		t.Errorf("APIService Available = %q with nothing serving it", available)
	}

	// The roles of the aggregated API's readers: deliveries and events
	// aggregate into view, event data does not.
	viewer := run("get", "clusterrole", "hookkeeper-delivery-history-viewer-role", "-o", `jsonpath={.metadata.labels.rbac\.authorization\.k8s\.io/aggregate-to-view} {.rules[0].apiGroups} {.rules[0].resources} {.rules[0].verbs}`)
	if viewer != `true ["delivery.hookkeeper.dev"] ["deliveries","webhookevents"] ["get","list","watch"]` {
		t.Errorf("delivery-history-viewer-role = %s", viewer)
	}
	data := run("get", "clusterrole", "hookkeeper-webhookevent-data-reader-role", "-o", `jsonpath={.metadata.labels} {.rules[*].resources}`)
	if strings.Contains(data, "aggregate-to") || !strings.Contains(data, `["webhookevents/data"]`) {
		t.Errorf("webhookevent-data-reader-role = %s: want webhookevents/data, aggregated into nothing", data)
	}

	// What the manager's ServiceAccount may do, asked of the real RBAC
	// authorizer: everything the aggregated API server and the certificate
	// provisioner need, with the installer's bindings alone.
	for _, can := range [][]string{
		{"create", "tokenreviews.authentication.k8s.io"},
		{"create", "subjectaccessreviews.authorization.k8s.io"},
		{"get", "configmaps/extension-apiserver-authentication", "-n", "kube-system"},
		{"watch", "configmaps/extension-apiserver-authentication", "-n", "kube-system"},
		{"create", "secrets", "-n", namespace},
		{"update", "secrets/hookkeeper-serving-cert", "-n", namespace},
		{"watch", "secrets", "-n", namespace},
		{"patch", "apiservices.apiregistration.k8s.io/" + apiServiceName},
	} {
		out, err := testenv.RunKubectl(kubectl, kubeconfig, "", append([]string{"auth", "can-i", "--as=" + serviceAccount}, can...)...)
		if strings.TrimSpace(out) != "yes" {
			t.Errorf("the manager's ServiceAccount cannot %s: %q %v", strings.Join(can, " "), out, err)
		}
	}

	// The certificate provisioner and the caBundle syncer, running as the
	// manager's ServiceAccount on the installed objects alone, make the
	// Secret and fill the APIService's caBundle.
	asManager := rest.CopyConfig(cfg)
	asManager.Impersonate = rest.ImpersonationConfig{UserName: serviceAccount, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	provisionAsManager(t, asManager)

	// Applying the installer again (an upgrade, a GitOps sync) leaves the
	// caBundle to the manager.
	run("apply", "--server-side", "-f", installer)
	if err := caBundleMatchesSecret(t.Context(), kubernetes.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg)); err != nil {
		t.Errorf("after applying the installer again: %v", err)
	}
}

// provisionAsManager runs the provisioner and the caBundle syncer with the
// manager's flags' defaults as cfg's user, and checks that the APIService's
// caBundle becomes the bundle that trusts the certificate in the Secret.
func provisionAsManager(t *testing.T, cfg *rest.Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cs := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	p, err := servingcert.New(servingcert.Options{
		Client: cs, Namespace: namespace, SecretName: "hookkeeper-serving-cert", Log: testr.New(t),
		Policy: servingcert.Policy{CAValidity: 5 * 365 * 24 * time.Hour, LeafValidity: 90 * 24 * time.Hour, Overlap: 10 * time.Minute,
			DNSNames: []string{"hookkeeper-delivery-api.hookkeeper-system.svc"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	syncer := &servingcert.CABundleSyncer{Client: dyn, Name: apiServiceName, Source: p, Log: testr.New(t)}
	errs := make(chan error, 2)
	go func() { errs <- p.Start(ctx) }()
	go func() { errs <- syncer.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})

	deadline := time.Now().Add(30 * time.Second)
	for {
		err := caBundleMatchesSecret(ctx, cs, dyn)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("as the manager's ServiceAccount: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // polling, not synchronization
	}
}

func caBundleMatchesSecret(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) error {
	secret, err := cs.CoreV1().Secrets(namespace).Get(ctx, "hookkeeper-serving-cert", metav1.GetOptions{})
	if err != nil {
		return err
	}
	obj, err := dyn.Resource(servingcert.APIServiceResource).Get(ctx, apiServiceName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s, _, _ := unstructured.NestedString(obj.Object, "spec", "caBundle")
	bundle, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return err
	}
	if len(bundle) == 0 || !bytes.Equal(bundle, secret.Data[servingcert.KeyCABundle]) {
		return fmt.Errorf("the APIService's caBundle (%d bytes) is not the Secret's ca.crt", len(bundle))
	}
	return nil
}
