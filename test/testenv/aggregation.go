package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The aggregated delivery API (delivery.hookkeeper.dev) as a local control
// plane reaches it: kube-apiserver proxies to the manager on loopback
// through the APIService, named as config/default names it. Endpoints and
// EndpointSlices on loopback are refused, so the Service is of type
// ExternalName for 127.0.0.1: the aggregator dials 127.0.0.1 on the
// APIService's port and verifies the serving certificate for DeliveryAPIHost
// against the APIService's caBundle.
const (
	DeliveryAPINamespace  = "hookkeeper-system"
	DeliveryAPIService    = "hookkeeper-delivery-api"
	DeliveryAPIServiceAPI = "v1alpha1.delivery.hookkeeper.dev"
	// DeliveryAPIHost is the name the aggregator expects on the serving
	// certificate: that of the Service the APIService names.
	DeliveryAPIHost = DeliveryAPIService + "." + DeliveryAPINamespace + ".svc"
	// FrontProxyClientName is the CN of the client certificate the
	// aggregator presents (--requestheader-allowed-names).
	FrontProxyClientName = "front-proxy-client"
)

// CA is a certificate authority for test certificates.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte
}

// NewCA returns a self-signed CA named cn, valid for a day.
func NewCA(cn string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating the CA %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue signs a leaf with serial: a serving certificate for 127.0.0.1 and
// DeliveryAPIHost when server, else a client certificate for cn.
func (ca *CA) Issue(cn string, serial int64, server bool) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{DeliveryAPIHost}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("issuing %s: %w", cn, err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

// IssueFiles issues a leaf as Issue does and writes it to dir/name.crt and
// dir/name.key.
func (ca *CA) IssueFiles(dir, name, cn string, serial int64, server bool) (certFile, keyFile string, err error) {
	c, k, err := ca.Issue(cn, serial, server)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, c, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, k, 0o600)
}

// FrontProxy configures env's kube-apiserver, before it starts, as a
// cluster's is for API aggregation: a front-proxy (request-header) CA,
// which kube-apiserver publishes in kube-system/extension-apiserver-authentication
// for aggregated servers to trust, and the client certificate of that CA
// its aggregator presents when it proxies, all written to dir. It returns
// the CA, for tests that forge front-proxy requests.
func FrontProxy(env *envtest.Environment, dir string) (*CA, error) {
	ca, err := NewCA("front-proxy-ca")
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "front-proxy-ca.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		return nil, err
	}
	certFile, keyFile, err := ca.IssueFiles(dir, "front-proxy-client", FrontProxyClientName, 2, false)
	if err != nil {
		return nil, fmt.Errorf("writing the front-proxy client certificate: %w", err)
	}
	env.ControlPlane.GetAPIServer().Configure().
		Set("requestheader-client-ca-file", caFile).
		Set("requestheader-allowed-names", FrontProxyClientName).
		Set("requestheader-username-headers", "X-Remote-User").
		Set("requestheader-group-headers", "X-Remote-Group").
		Set("requestheader-extra-headers-prefix", "X-Remote-Extra-").
		Set("proxy-client-cert-file", certFile).
		Set("proxy-client-key-file", keyFile)
	return ca, nil
}

// DeliveryAPICert writes a serving certificate for the aggregated API
// (127.0.0.1 and DeliveryAPIHost) to dir/delivery-api.crt and .key, for the
// manager's --aggregated-api-tls-cert-file and --aggregated-api-tls-key-file,
// and returns the PEM of its CA, the APIService's caBundle.
func DeliveryAPICert(dir string) (certFile, keyFile string, caBundle []byte, err error) {
	ca, err := NewCA("delivery-api-ca")
	if err != nil {
		return "", "", nil, err
	}
	certFile, keyFile, err = ca.IssueFiles(dir, "delivery-api", DeliveryAPIHost, 2, true)
	if err != nil {
		return "", "", nil, fmt.Errorf("writing the aggregated API's certificate: %w", err)
	}
	return certFile, keyFile, ca.PEM, nil
}

// RegisterDeliveryAPI registers the aggregated API served on addr (a
// loopback host:port) with the control plane of kubeconfig, as
// config/default does but through an ExternalName Service for 127.0.0.1,
// trusting caBundle. It does not wait: see WaitDeliveryAPI. While the
// APIService is registered and nothing serves it, discovery of the whole
// cluster is incomplete (namespace deletion waits for it): register it
// with a server to follow, and unregister it before that server stops for
// good.
func RegisterDeliveryAPI(kubectl, kubeconfig, addr string, caBundle []byte) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("the aggregated API's address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.Equal(net.IPv4(127, 0, 0, 1)) {
		return fmt.Errorf("the aggregated API's address %q: the route is an ExternalName for 127.0.0.1, so it must listen there", addr)
	}
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[3]s
---
apiVersion: v1
kind: Service
metadata:
  name: %[4]s
  namespace: %[3]s
spec:
  type: ExternalName
  externalName: 127.0.0.1
  ports:
  - port: %[1]s
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: %[5]s
spec:
  group: delivery.hookkeeper.dev
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 100
  caBundle: %[2]s
  service:
    name: %[4]s
    namespace: %[3]s
    port: %[1]s
`, port, base64.StdEncoding.EncodeToString(caBundle), DeliveryAPINamespace, DeliveryAPIService, DeliveryAPIServiceAPI)
	if out, err := RunKubectl(kubectl, kubeconfig, manifest, "apply", "-f", "-"); err != nil {
		return fmt.Errorf("registering the aggregated API: %w\n%s", err, out)
	}
	return nil
}

// WaitDeliveryAPI waits until kube-apiserver reports the APIService
// Available (it reached the server and read its discovery), for at most
// timeout; the error carries the APIService's status.
func WaitDeliveryAPI(kubectl, kubeconfig string, timeout time.Duration) error {
	if out, err := RunKubectl(kubectl, kubeconfig, "", "wait", "apiservice/"+DeliveryAPIServiceAPI,
		"--for=condition=Available", "--timeout="+timeout.String()); err != nil {
		status, _ := RunKubectl(kubectl, kubeconfig, "", "get", "apiservice/"+DeliveryAPIServiceAPI, "-o", "yaml")
		return fmt.Errorf("the aggregated API is not available: %w\n%s\n%s", err, out, status)
	}
	return nil
}

// UnregisterDeliveryAPI deletes the APIService, so that the cluster's
// discovery no longer depends on the server.
func UnregisterDeliveryAPI(kubectl, kubeconfig string) error {
	if out, err := RunKubectl(kubectl, kubeconfig, "", "delete", "apiservice/"+DeliveryAPIServiceAPI, "--ignore-not-found", "--wait"); err != nil {
		return fmt.Errorf("unregistering the aggregated API: %w\n%s", err, out)
	}
	return nil
}
