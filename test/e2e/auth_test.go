package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// The manager's API runs as in a cluster: --api-auth=kubernetes (TokenReview
// and SubjectAccessReview against the suite's API server) over TLS with a
// certificate from files, as a mounted Secret provides it.
var _ = Describe("Authentication and authorization", func() {
	It("refuses unauthenticated callers (401) and producers without RBAC (403), and accepts them once a RoleBinding grants the shipped role", func() {
		ns := useNamespace("e2e-auth")
		apply(fmt.Sprintf("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: newcomer\n  namespace: %s\n", ns))
		newcomer := &apiClient{base: api.base, token: createToken(ns, "newcomer"), client: api.client}
		anonymous := &apiClient{base: api.base, client: api.client}
		forger := &apiClient{base: api.base, token: "eyJhbGciOiJSUzI1NiJ9.e30.c2lnbmF0dXJl", client: api.client}
		const event = `{"type":"order.created","data":{"order":1}}`
		publishPath := "/v1/namespaces/" + ns + "/events"

		expectRefusal := func(c *apiClient, method, path, body string, status int, code string) {
			GinkgoHelper()
			got, data, err := c.do(method, path, body, "")
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal(status), "%s %s: %s", method, path, data)
			Expect(string(data)).To(ContainSubstring(`"code":"`+code+`"`), "%s %s", method, path)
		}

		By("no token, and a token the API server does not know: 401")
		expectRefusal(anonymous, http.MethodPost, publishPath, event, http.StatusUnauthorized, "Unauthenticated")
		expectRefusal(forger, http.MethodPost, publishPath, event, http.StatusUnauthorized, "Unauthenticated")

		By("a ServiceAccount without a RoleBinding: 403 for publishing and for reading")
		expectRefusal(newcomer, http.MethodPost, publishPath, event, http.StatusForbidden, "Forbidden")
		expectRefusal(newcomer, http.MethodGet, "/v1/namespaces/"+ns+"/events/evt_none", "", http.StatusForbidden, "Forbidden")

		By("a RoleBinding to the event-publisher ClusterRole: 201")
		apply(roleBindingYAML(ns, "newcomer-publishes", "event-publisher", ns, "newcomer"))
		var a publishAnswer
		Eventually(func(g Gomega) {
			status, data, err := newcomer.do(http.MethodPost, publishPath, event, "auth-1")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(http.StatusCreated), "%s", data)
			g.Expect(json.Unmarshal(data, &a)).To(Succeed())
		}).Should(Succeed())
		Expect(a.ID).NotTo(BeEmpty())

		By("publishing in another namespace still refused, and reading too")
		expectRefusal(newcomer, http.MethodPost, "/v1/namespaces/e2e-elsewhere/events", event, http.StatusForbidden, "Forbidden")
		expectRefusal(newcomer, http.MethodGet, "/v1/namespaces/"+ns+"/events/"+a.ID, "", http.StatusForbidden, "Forbidden")

		By("a RoleBinding to the delivery-reader ClusterRole: the event reads back")
		apply(roleBindingYAML(ns, "newcomer-reads", "delivery-reader", ns, "newcomer"))
		Eventually(func(g Gomega) {
			var e eventView
			newcomer.getJSON(g, "/v1/namespaces/"+ns+"/events/"+a.ID, &e)
			g.Expect(e.ID).To(Equal(a.ID))
		}).Should(Succeed())

		By("plain HTTP to the API refused: it serves TLS only")
		plain := &apiClient{base: strings.Replace(api.base, "https://", "http://", 1), token: api.token, client: &http.Client{Timeout: 5 * time.Second}}
		// Go's TLS server answers a plain request with a bare 400 and closes
		// the connection, which the client may see as a reset instead.
		status, data, err := plain.do(http.MethodGet, "/v1/namespaces/"+ns+"/events/"+a.ID, "", "")
		if err == nil {
			Expect(status).To(Equal(http.StatusBadRequest), "%s", data)
			Expect(string(data)).NotTo(ContainSubstring(a.ID))
		}
	})
})

// createToken returns a token for the ServiceAccount from the TokenRequest
// API, through kubectl.
func createToken(ns, serviceAccount string) string {
	GinkgoHelper()
	token := strings.TrimSpace(kubectl("create", "token", serviceAccount, "-n", ns, "--duration=2h"))
	Expect(token).NotTo(BeEmpty())
	return token
}

func roleBindingYAML(ns, name, clusterRole, saNamespace, sa string) string {
	return fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: %s
  namespace: %s
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: %s
subjects:
- kind: ServiceAccount
  name: %s
  namespace: %s
`, name, ns, clusterRole, sa, saNamespace)
}

// suiteProducer sets up the identity the suite publishes and reads with,
// as an installation would: the shipped ClusterRoles from config/rbac (as
// named there, without the installer's hookkeeper- prefix), a
// ServiceAccount bound to them in every namespace, and a token for it.
func suiteProducer() string {
	GinkgoHelper()
	for _, f := range []string{"event_publisher_role.yaml", "delivery_reader_role.yaml"} {
		kubectl("apply", "-f", filepath.Join(testenv.RepoRoot(), "config", "rbac", f))
	}
	apply(`apiVersion: v1
kind: Namespace
metadata:
  name: hookkeeper-e2e
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: producer
  namespace: hookkeeper-e2e
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: e2e-producer-publishes
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: event-publisher
subjects:
- kind: ServiceAccount
  name: producer
  namespace: hookkeeper-e2e
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: e2e-producer-reads
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: delivery-reader
subjects:
- kind: ServiceAccount
  name: producer
  namespace: hookkeeper-e2e
`)
	return createToken("hookkeeper-e2e", "producer")
}

// servingCertificate writes a self-signed certificate for 127.0.0.1 and
// its key into dir, and returns their paths and a pool that trusts it.
func servingCertificate(dir string) (certFile, keyFile string, roots *x509.CertPool) {
	GinkgoHelper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "hookkeeper e2e API"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	Expect(err).NotTo(HaveOccurred())
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	Expect(os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)).To(Succeed())
	Expect(os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)).To(Succeed())
	cert, err := x509.ParseCertificate(der)
	Expect(err).NotTo(HaveOccurred())
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

// tlsClient trusts roots only.
func tlsClient(roots *x509.CertPool) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}}
}
