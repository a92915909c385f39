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
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/test/receivers"
)

// Issue 24: receivers reached as they are. Each receiver here is a real
// HTTPS or HTTP server on loopback that refuses (401) a request without the
// credential it wants; the credentials live in Secrets (and a CA bundle in a
// ConfigMap) created with kubectl, rotated with kubectl, and never appear in
// the manager's log, the objects, the Events, the metrics or the answers of
// either API.
var _ = Describe("Credentials from Secrets", func() {
	It("sends a header, basic and bearer credentials from Secrets, waits for a missing Secret, and follows every rotation without a restart", func() {
		ns := useNamespace("e2e-creds")
		apiKey, user, pass, token := credValue(), "svc-"+credValue(), credValue(), credValue()
		header := newCredReceiver(nil, func(r *http.Request, c *credState) bool { return r.Header.Get("X-Api-Key") == c.get("key") })
		header.set("key", apiKey)
		basic := newCredReceiver(nil, func(r *http.Request, c *credState) bool {
			u, p, ok := r.BasicAuth()
			return ok && u == c.get("user") && p == c.get("pass")
		})
		basic.set("user", user)
		basic.set("pass", pass)
		// The bearer receiver echoes the Authorization header in its
		// answer: the attempt's excerpt must not keep it.
		bearer := newCredReceiver(nil, func(r *http.Request, c *credState) bool {
			return r.Header.Get("Authorization") == "Bearer "+c.get("token")
		})
		bearer.echoAuthorization = true
		bearer.set("token", token)

		By("applying the endpoints before their Secrets, as a GitOps sync may")
		// 401 is retried: between a rotation of a Secret and its
		// registration an attempt may still carry the old value, which the
		// receivers here refuse at once (a real one would accept both for
		// a while).
		apply(policyYAML(ns, "fast", "200ms", 50) + "  retryOn: [NetworkError, Timeout, \"401\", 5xx]\n---\n" +
			endpointYAML(ns, "header", header.url(), "[order.created]", "fast", `  headers:
  - name: X-Api-Key
    valueFrom: {secretKeyRef: {name: receiver-header, key: api-key}}
`) + "---\n" +
			endpointYAML(ns, "basic", basic.url(), "[order.created]", "fast", `  auth:
    basic: {secretRef: {name: receiver-basic}}
`) + "---\n" +
			endpointYAML(ns, "bearer", bearer.url(), "[order.created]", "fast", `  auth:
    bearer: {tokenSecretRef: {name: receiver-bearer, key: token}}
`))
		for _, ep := range []string{"header", "basic", "bearer"} {
			kubectlWait("webhookendpoint/"+ep, `--for=jsonpath={.status.conditions[?(@.type=="Ready")].reason}=CredentialsUnavailable`, 30*time.Second)
		}
		Expect(jsonpath("webhookendpoint/bearer", `{.status.conditions[?(@.type=="Ready")].message}`)).
			To(ContainSubstring(`spec.auth.bearer.tokenSecretRef: Secret "receiver-bearer" not found`))
		early := api.publish(ns, "early", `{"type":"order.created","data":{"n":1}}`)
		Expect(early.Deliveries).To(HaveLen(3), "an endpoint waiting for its Secret still gets its deliveries")
		for _, d := range api.deliveriesOf(Default, ns, early.ID) {
			Expect(d.State).To(Equal("scheduled"))
			Expect(d.Attempts).To(BeZero(), "nothing is attempted without the credential")
		}

		By("creating the Secrets: the waiting deliveries go out with the credentials")
		apply(secretYAML(ns, "receiver-header", "", map[string]string{"api-key": apiKey}) + "---\n" +
			secretYAML(ns, "receiver-basic", "kubernetes.io/basic-auth", map[string]string{"username": user, "password": pass}) + "---\n" +
			secretYAML(ns, "receiver-bearer", "", map[string]string{"token": token}))
		for _, ep := range []string{"header", "basic", "bearer"} {
			kubectlWait("webhookendpoint/"+ep, "--for=condition=Ready", 30*time.Second)
		}
		for _, r := range []*credReceiver{header, basic, bearer} {
			Eventually(func() bool { return r.accepted(early.ID) }).Should(BeTrue(), "%s", r)
		}
		for _, d := range api.deliveriesOf(Default, ns, early.ID) {
			Expect(d.Attempts).To(Equal(1), "delivery %s to %s: sent once, with its credential", d.ID, d.Endpoint)
		}

		By("rotating each Secret: the receivers accept only the new values, and the next event reaches them")
		apiKey2, pass2, token2 := credValue(), credValue(), credValue()
		header.set("key", apiKey2)
		basic.set("pass", pass2)
		bearer.set("token", token2)
		apply(secretYAML(ns, "receiver-header", "", map[string]string{"api-key": apiKey2}) + "---\n" +
			secretYAML(ns, "receiver-basic", "kubernetes.io/basic-auth", map[string]string{"username": user, "password": pass2}) + "---\n" +
			secretYAML(ns, "receiver-bearer", "", map[string]string{"token": token2}))
		late := api.publish(ns, "late", `{"type":"order.created","data":{"n":2}}`)
		for _, r := range []*credReceiver{header, basic, bearer} {
			Eventually(func() bool { return r.accepted(late.ID) }).Should(BeTrue(), "%s", r)
		}

		By("deleting a Secret: the endpoint waits again, naming it")
		kubectl("delete", "secret", "-n", ns, "receiver-bearer")
		kubectlWait("webhookendpoint/bearer", `--for=jsonpath={.status.conditions[?(@.type=="Ready")].reason}=CredentialsUnavailable`, 30*time.Second)

		expectNowhere(ns, map[string]string{"api key": apiKey, "rotated api key": apiKey2, "password": pass,
			"rotated password": pass2, "token": token, "rotated token": token2})
	})

	It("fetches an OAuth2 token once, shares it, fetches a new one on a 401 within the attempt, and follows a rotated client secret", func() {
		ns := useNamespace("e2e-oauth2")
		clientID, secret := "client-"+credValue(), credValue()
		tokens := newTokenServer(clientID, secret)
		rcv := newCredReceiver(nil, func(r *http.Request, _ *credState) bool {
			return tokens.valid(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		})
		apply(policyYAML(ns, "fast", "200ms", 20) + "---\n" +
			secretYAML(ns, "oauth", "", map[string]string{"client-id": clientID, "client-secret": secret}) + "---\n" +
			endpointYAML(ns, "oauth", rcv.url(), "[order.created]", "fast", fmt.Sprintf(`  auth:
    oauth2:
      tokenURL: %s/oauth/token
      clientIDRef: {name: oauth, key: client-id}
      clientSecretRef: {name: oauth, key: client-secret}
      scopes: [webhooks.write, orders.read]
      audience: https://receiver.example
`, tokens.srv.URL)))
		kubectlWait("webhookendpoint/oauth", "--for=condition=Ready", 30*time.Second)

		By("three events on one token")
		var ids []string
		for i := range 3 {
			ids = append(ids, api.publish(ns, fmt.Sprintf("o-%d", i), fmt.Sprintf(`{"type":"order.created","data":{"n":%d}}`, i)).ID)
		}
		for _, id := range ids {
			Eventually(func() bool { return rcv.accepted(id) }).Should(BeTrue(), "%s", rcv)
		}
		Expect(tokens.issued()).To(HaveLen(1), "one token for every attempt of the endpoint")
		req := tokens.requests()[0]
		Expect(req.scope).To(Equal("webhooks.write orders.read"))
		Expect(req.audience).To(Equal("https://receiver.example"))

		By("the receiver revoking the token: a 401, a new token, and the same attempt resent once")
		tokens.revokeAll()
		revoked := api.publish(ns, "o-revoked", `{"type":"order.created","data":{"n":9}}`).ID
		Eventually(func() bool { return rcv.accepted(revoked) }).Should(BeTrue(), "%s", rcv)
		Expect(rcv.answers(revoked)).To(Equal([]int{http.StatusUnauthorized, http.StatusOK}))
		Expect(tokens.issued()).To(HaveLen(2))
		Eventually(func(g Gomega) {
			d := api.deliveryOf(g, ns, revoked)
			g.Expect(d.State).To(Equal("delivered"))
			g.Expect(d.Attempts).To(Equal(1), "the refresh is part of the attempt, not a retry")
		}).Should(Succeed())

		By("rotating the client secret: the next token is fetched with it")
		secret2 := credValue()
		tokens.rotate(secret2)
		tokens.revokeAll()
		apply(secretYAML(ns, "oauth", "", map[string]string{"client-id": clientID, "client-secret": secret2}))
		after := api.publish(ns, "o-rotated", `{"type":"order.created","data":{"n":10}}`).ID
		Eventually(func() bool { return rcv.accepted(after) }).Should(BeTrue(), "%s", rcv)
		issued := tokens.issued()
		Expect(tokens.requests()[len(tokens.requests())-1].secret).To(Equal(secret2))

		values := map[string]string{"client secret": secret, "rotated client secret": secret2}
		for i, t := range issued {
			values[fmt.Sprintf("access token %d", i)] = t
		}
		expectNowhere(ns, values)
	})

	It("presents a client certificate to a receiver that requires one, trusts a private CA from a ConfigMap, and follows a renewed certificate", func() {
		ns := useNamespace("e2e-mtls")
		serverCA, clientCA := newTestCA("receiver CA"), newTestCA("client CA")
		serverCert := serverCA.issue("127.0.0.1", true)
		clientCert := clientCA.issue("hookkeeper-client-1", false)
		rcv := newCredReceiver(&tls.Config{
			Certificates: []tls.Certificate{serverCert.pair},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    clientCA.pool(),
		}, func(r *http.Request, _ *credState) bool { return r.TLS != nil && len(r.TLS.PeerCertificates) > 0 })

		apply(policyYAML(ns, "fast", "200ms", 20) + "---\n" +
			tlsSecretYAML(ns, "client-tls", clientCert) + "---\n" +
			configMapYAML(ns, "receiver-ca", "ca.crt", string(serverCA.certPEM)) + "---\n" +
			endpointYAML(ns, "mtls", rcv.url(), "[order.created]", "fast", `  tls:
    clientCertificateSecretRef: {name: client-tls}
    caBundle: {configMapKeyRef: {name: receiver-ca, key: ca.crt}}
`) + "---\n" +
			endpointYAML(ns, "system-roots", rcv.url(), "[order.created]", "fast", ""))
		kubectlWait("webhookendpoint/mtls", "--for=condition=Ready", 30*time.Second)
		kubectlWait("webhookendpoint/system-roots", "--for=condition=Ready", 30*time.Second)

		By("one event: the endpoint with the CA and the certificate is received; the one on the system roots fails the handshake")
		first := api.publish(ns, "m-1", `{"type":"order.created","data":{"n":1}}`)
		Eventually(func() bool { return rcv.accepted(first.ID) }).Should(BeTrue(), "%s", rcv)
		Expect(rcv.clientNames(first.ID)).To(ConsistOf("hookkeeper-client-1"))
		Eventually(func(g Gomega) {
			var failed deliveryView
			for _, d := range api.deliveriesOf(g, ns, first.ID) {
				if d.Endpoint == "system-roots" {
					failed = d
				}
			}
			g.Expect(failed.Attempts).To(BeNumerically(">=", 1))
			g.Expect(failed.LastError).To(ContainSubstring("certificate"))
		}).Should(Succeed())

		By("renewing the client certificate in its Secret: the next event presents the new one")
		renewed := clientCA.issue("hookkeeper-client-2", false)
		apply(tlsSecretYAML(ns, "client-tls", renewed))
		Eventually(func(g Gomega) {
			id := api.publish(ns, "m-"+credValue(), `{"type":"order.created","data":{"n":2}}`).ID
			g.Eventually(func() bool { return rcv.accepted(id) }).Should(BeTrue())
			g.Expect(rcv.clientNames(id)).To(ContainElement("hookkeeper-client-2"))
		}).WithTimeout(60 * time.Second).Should(Succeed())

		By("a CA bundle that is not PEM: not Ready, naming the ConfigMap and key")
		apply(configMapYAML(ns, "receiver-ca", "ca.crt", "not a certificate"))
		kubectlWait("webhookendpoint/mtls", `--for=jsonpath={.status.conditions[?(@.type=="Ready")].reason}=CredentialsUnavailable`, 30*time.Second)
		Expect(jsonpath("webhookendpoint/mtls", `{.status.conditions[?(@.type=="Ready")].message}`)).
			To(ContainSubstring(`key "ca.crt" of ConfigMap "receiver-ca": the CA bundle holds no PEM certificate`))

		expectNowhere(ns, map[string]string{"client key": keyBody(clientCert.keyPEM), "renewed client key": keyBody(renewed.keyPEM)})
	})
})

// credValue is a credential the hygiene scan can search for: a distinctive
// prefix and random hex, so that a hit can only be a leak.
func credValue() string {
	return strings.Replace(knownToken(), "tok_hygiene_", "cred_hygiene_", 1)
}

// keyBody is the base64 body of a PEM key, the part a leak would show.
func keyBody(keyPEM []byte) string {
	lines := strings.Split(strings.TrimSpace(string(keyPEM)), "\n")
	return strings.Join(lines[1:len(lines)-1], "")
}

// expectNowhere searches the manager's log, every object of the namespace
// and the cluster's Events, the deliveries of both APIs (with their
// attempts' excerpts) and the metrics for each value.
func expectNowhere(ns string, values map[string]string) {
	GinkgoHelper()
	logData, err := os.ReadFile(managerLog)
	Expect(err).NotTo(HaveOccurred())
	corpora := map[string]string{
		"manager log":            string(logData),
		"Events":                 kubectl("get", "events", "-A", "-o", "yaml"),
		"hookkeeper objects":     kubectl("get", "hookkeeper", "-n", ns, "-o", "yaml"),
		"deliveries (kubectl)":   kubectl("get", "deliveries.delivery.hookkeeper.dev", "-n", ns, "-o", "yaml"),
		"events (kubectl)":       kubectl("get", "webhookevents.delivery.hookkeeper.dev", "-n", ns, "-o", "yaml"),
		"metrics":                metricsText(),
		"deliveries (HTTP API)":  "",
		"attempts (HTTP API)":    "",
		"endpoint describe":      kubectl("describe", "webhookendpoints", "-n", ns),
		"ConfigMaps of the spec": kubectl("get", "configmaps", "-n", ns, "-o", "yaml"),
	}
	var list struct {
		Items []deliveryView `json:"items"`
	}
	raw := api.getJSON(Default, "/v1/namespaces/"+ns+"/deliveries", &list)
	corpora["deliveries (HTTP API)"] = string(raw)
	var attempts strings.Builder
	for _, d := range list.Items {
		_, a := api.attempts(Default, ns, d.ID)
		attempts.Write(a)
	}
	corpora["attempts (HTTP API)"] = attempts.String()
	Expect(list.Items).NotTo(BeEmpty())
	for what, text := range corpora {
		Expect(text).NotTo(BeEmpty(), "the %s corpus is empty: the search would prove nothing", what)
		for name, v := range values {
			Expect(strings.Contains(text, v)).To(BeFalse(), "the %s show the %s", what, name)
		}
	}
}

// secretYAML is a Secret of the given type ("" for Opaque) with data in
// stringData.
func secretYAML(ns, name, typ string, data map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: %s\n", name, ns)
	if typ != "" {
		fmt.Fprintf(&b, "type: %s\n", typ)
	}
	b.WriteString("stringData:\n")
	for k, v := range data {
		q, _ := json.Marshal(v)
		fmt.Fprintf(&b, "  %s: %s\n", k, q)
	}
	return b.String()
}

func tlsSecretYAML(ns, name string, c issued) string {
	return secretYAML(ns, name, "kubernetes.io/tls", map[string]string{"tls.crt": string(c.certPEM), "tls.key": string(c.keyPEM)})
}

func configMapYAML(ns, name, key, value string) string {
	q, _ := json.Marshal(value)
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  %s: %s\n", name, ns, key, q)
}

// ---- a receiver that wants a credential ----

// credState holds the values a credReceiver currently accepts.
type credState struct {
	mu     sync.Mutex
	values map[string]string
}

func (c *credState) get(k string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.values[k]
}

// credReceiver answers 200 to a request that check accepts and 401 to any
// other (test/receivers); over TLS when tlsCfg is set. With
// echoAuthorization it answers the Authorization header it got.
type credReceiver struct {
	*receivers.Receiver
	state             credState
	echoAuthorization bool
}

func newCredReceiver(tlsCfg *tls.Config, check func(*http.Request, *credState) bool) *credReceiver {
	r := &credReceiver{state: credState{values: map[string]string{}}}
	r.Receiver = receivers.New(receivers.Options{TLS: tlsCfg,
		Respond: func(req *http.Request, _ *receivers.Request) int {
			if check(req, &r.state) {
				return http.StatusOK
			}
			return http.StatusUnauthorized
		},
		Body: func(req *http.Request) string {
			if r.echoAuthorization {
				return "you sent " + req.Header.Get("Authorization")
			}
			return ""
		},
	})
	DeferCleanup(r.Close)
	return r
}

func (r *credReceiver) url() string { return r.URL() + "/hooks" }

func (r *credReceiver) set(k, v string) {
	r.state.mu.Lock()
	defer r.state.mu.Unlock()
	r.state.values[k] = v
}

func (r *credReceiver) accepted(id string) bool {
	return slices.ContainsFunc(r.Of(id), func(rq receivers.Request) bool { return rq.Status == http.StatusOK })
}

func (r *credReceiver) answers(id string) []int {
	var out []int
	for _, rq := range r.Of(id) {
		out = append(out, rq.Status)
	}
	return out
}

// clientNames are the client certificates' common names of the accepted
// requests of id.
func (r *credReceiver) clientNames(id string) []string {
	var out []string
	for _, rq := range r.Of(id) {
		if rq.Status == http.StatusOK && len(rq.ClientNames) > 0 {
			out = append(out, rq.ClientNames[0])
		}
	}
	return out
}

// ---- an OAuth2 token server ----

type tokenRequest struct {
	secret, scope, audience string
}

// tokenServer issues access tokens for the client credentials grant to one
// client, and says which tokens are valid.
type tokenServer struct {
	srv      *httptest.Server
	clientID string
	secret   atomic.Pointer[string]
	n        atomic.Int64

	mu     sync.Mutex
	tokens []string
	valids map[string]bool
	reqs   []tokenRequest
}

func newTokenServer(clientID, secret string) *tokenServer {
	t := &tokenServer{clientID: clientID, valids: map[string]bool{}}
	t.secret.Store(&secret)
	t.srv = httptest.NewServer(http.HandlerFunc(t.serve))
	DeferCleanup(t.srv.Close)
	return t
}

func (t *tokenServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/oauth/token" || r.ParseForm() != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	t.mu.Lock()
	t.reqs = append(t.reqs, tokenRequest{secret: secret, scope: r.PostForm.Get("scope"), audience: r.PostForm.Get("audience")})
	t.mu.Unlock()
	if id != t.clientID || secret != *t.secret.Load() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_client"}`)
		return
	}
	tok := fmt.Sprintf("at_%d_%s", t.n.Add(1), credValue())
	t.mu.Lock()
	t.tokens = append(t.tokens, tok)
	t.valids[tok] = true
	t.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, tok)
}

func (t *tokenServer) valid(tok string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.valids[tok]
}

func (t *tokenServer) revokeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.valids = map[string]bool{}
}

func (t *tokenServer) rotate(secret string) { t.secret.Store(&secret) }

func (t *tokenServer) issued() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.tokens...)
}

func (t *tokenServer) requests() []tokenRequest {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]tokenRequest(nil), t.reqs...)
}

// ---- a private CA ----

type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	serial  atomic.Int64
}

type issued struct {
	certPEM, keyPEM []byte
	pair            tls.Certificate
}

func newTestCA(name string) *testCA {
	GinkgoHelper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	Expect(err).NotTo(HaveOccurred())
	cert, err := x509.ParseCertificate(der)
	Expect(err).NotTo(HaveOccurred())
	ca := &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	ca.serial.Store(1)
	return ca
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issue signs a certificate: for a server at the IP address name, or for
// a client with the common name name.
func (ca *testCA) issue(name string, server bool) issued {
	GinkgoHelper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP(name)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	Expect(err).NotTo(HaveOccurred())
	out := issued{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	out.pair, err = tls.X509KeyPair(out.certPEM, out.keyPEM)
	Expect(err).NotTo(HaveOccurred())
	return out
}
