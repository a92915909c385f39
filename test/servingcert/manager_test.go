// Package servingcert runs the manager as a process the way the installer
// does (--serving-cert-secret) against the real control plane, and checks
// its certificate handling from outside: nothing made by hand, the HTTP API
// served with the certificate of the Secret the manager made, the
// APIService's caBundle filled, and a new certificate served without a
// restart.
package servingcert

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

const (
	namespace  = "hookkeeper-system"
	secretName = "hookkeeper-serving-cert"
	apiService = "v1alpha1.delivery.hookkeeper.dev"
	serverName = "hookkeeper-api.hookkeeper-system.svc"
)

func TestManagerProvisionsItsCertificate(t *testing.T) {
	dir := t.TempDir()
	suite, err := testenv.StartSuite(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.Env.Stop() })
	cfg := suite.Env.Config
	cs := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The APIService as the installer makes it: no caBundle.
	apiSvcRes := dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	if _, err := apiSvcRes.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": apiService},
		"spec": map[string]any{
			"group": "delivery.hookkeeper.dev", "version": "v1alpha1",
			"groupPriorityMinimum": int64(1000), "versionPriority": int64(100),
			"service": map[string]any{"namespace": namespace, "name": "hookkeeper-delivery-api", "port": int64(443)},
		},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	probeAddr, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	apiAddr, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	manager := exec.Command(suite.Manager,
		"--ledger=sqlite://"+filepath.Join(dir, "ledger.db"),
		"--metrics-bind-address=0",
		"--health-probe-bind-address="+probeAddr,
		"--api-bind-address="+apiAddr,
		"--api-auth=kubernetes",
		// As config/manager/manager.yaml; the namespace comes from the
		// Deployment's POD_NAMESPACE there.
		"--serving-cert-secret="+secretName,
		"--serving-cert-services=hookkeeper-api,hookkeeper-delivery-api",
		"--serving-cert-apiservice="+apiService,
	)
	manager.Env = append(os.Environ(), "KUBECONFIG="+suite.Kubeconfig, "POD_NAMESPACE="+namespace)
	manager.Stdout, manager.Stderr = logFile, logFile
	if err := manager.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- manager.Wait() }()
	t.Cleanup(func() {
		_ = manager.Process.Signal(os.Interrupt)
		if err := <-exited; err != nil {
			t.Logf("manager exited after the interrupt: %v", err)
		}
		_ = logFile.Close()
		if t.Failed() {
			t.Log("manager log:\n" + testenv.Tail(logPath, 80))
		}
	})

	eventually := func(what string, cond func() error) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			select {
			case err := <-exited:
				t.Fatalf("%s: the manager exited: %v", what, err)
			default:
			}
			err := cond()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(100 * time.Millisecond) // polling, not synchronization
		}
	}
	// current checks that the manager is ready, the API serves a
	// certificate for its Service trusted by the Secret's ca.crt, and the
	// APIService's caBundle is that ca.crt; it returns the Secret.
	current := func() (*corev1.Secret, *x509.Certificate, error) {
		resp, err := http.Get("http://" + probeAddr + "/readyz")
		if err != nil {
			return nil, nil, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, nil, fmt.Errorf("/readyz: %s", resp.Status)
		}
		secret, err := cs.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		bundle := secret.Data["ca.crt"]
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(bundle) {
			return nil, nil, fmt.Errorf("ca.crt holds no certificate")
		}
		conn, err := tls.Dial("tcp", apiAddr, &tls.Config{RootCAs: roots, ServerName: serverName})
		if err != nil {
			return nil, nil, fmt.Errorf("the HTTP API with the Secret's ca.crt as roots: %w", err)
		}
		served := conn.ConnectionState().PeerCertificates[0]
		conn.Close()
		obj, err := apiSvcRes.Get(ctx, apiService, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		caBundle, _, _ := unstructured.NestedString(obj.Object, "spec", "caBundle")
		if caBundle != base64.StdEncoding.EncodeToString(bundle) {
			return nil, nil, fmt.Errorf("the APIService's caBundle is not the Secret's ca.crt")
		}
		return secret, served, nil
	}

	var first *corev1.Secret
	var firstCert *x509.Certificate
	eventually("the manager serves the certificate it provisioned", func() (err error) {
		first, firstCert, err = current()
		return err
	})
	if first.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret type %s", first.Type)
	}

	// Deleting the Secret forces a new CA and certificate: the running
	// manager makes and serves them, and updates the caBundle.
	if err := cs.CoreV1().Secrets(namespace).Delete(ctx, secretName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("the same manager process serves a new certificate", func() error {
		secret, served, err := current()
		if err != nil {
			return err
		}
		if secret.UID == first.UID || served.Equal(firstCert) {
			return fmt.Errorf("still the first certificate")
		}
		return nil
	})
}
