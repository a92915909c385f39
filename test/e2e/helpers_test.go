package e2e

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/test/apicall"
	"github.com/hookkeeper/hookkeeper/test/fixtures"
	"github.com/hookkeeper/hookkeeper/test/receivers"
)

// ---- kubectl ----

// kubectl runs kubectl and fails the spec when it fails.
func kubectl(args ...string) string {
	GinkgoHelper()
	out, err := runKubectl("", args...)
	if err != nil {
		Fail(err.Error())
	}
	return out
}

// apply pipes manifests to kubectl apply -f -.
func apply(manifests string) {
	GinkgoHelper()
	out, err := runKubectl(manifests, "apply", "-f", "-")
	if err != nil {
		Fail(err.Error() + "\nmanifests:\n" + manifests)
	}
	GinkgoWriter.Print(out)
}

// jsonpath reads one field of an object in the spec's namespace.
func jsonpath(object, path string) string {
	GinkgoHelper()
	return kubectl("get", "-n", specNamespace, object, "-o", "jsonpath="+path)
}

// kubectlWait runs kubectl wait on an object of the spec's namespace, e.g.
// kubectlWait("webhookendpoint/x", "--for=condition=Ready").
func kubectlWait(object, condition string, timeout time.Duration) {
	GinkgoHelper()
	kubectl("wait", "-n", specNamespace, object, condition, "--timeout="+timeout.String())
}

// useNamespace creates the spec's namespace and makes it the one the
// helpers and the failure report use.
func useNamespace(name string) string {
	GinkgoHelper()
	specNamespace = name
	apply(fixtures.Namespace(name))
	return name
}

// signingSecret reads the endpoint's generated signing secret the way a
// receiver's operator would: the Secret named in its status, with kubectl.
func signingSecret(endpoint string) sensitive.Bytes {
	GinkgoHelper()
	name := jsonpath("webhookendpoint/"+endpoint, "{.status.signingSecretName}")
	Expect(name).NotTo(BeEmpty(), "webhookendpoint %s names no signing Secret", endpoint)
	encoded := kubectl("get", "secret", "-n", specNamespace, name, "-o", "jsonpath={.data.signingSecret}")
	raw, err := base64.StdEncoding.DecodeString(encoded)
	Expect(err).NotTo(HaveOccurred())
	Expect(string(raw)).To(HavePrefix("whsec_"))
	return sensitive.Bytes(raw)
}

// The manifests the specs apply.
var (
	policyYAML   = fixtures.RetryPolicy
	endpointYAML = fixtures.WebhookEndpoint
)

// ---- the HTTP API ----

type apiClient struct {
	base, token string
	client      *http.Client
}

// The API's answers, as the wire shows them (decoded here rather than with
// the ingest package's types, so that a renamed field fails the suite).
type publishAnswer struct {
	ID          string   `json:"id"`
	ReissueOf   string   `json:"reissueOf"`
	SecretNames []string `json:"secretNames"`
	Deliveries  []struct {
		ID       string `json:"id"`
		Endpoint string `json:"endpoint"`
		State    string `json:"state"`
	} `json:"deliveries"`
}

type eventView struct {
	ID              string          `json:"id"`
	Type            string          `json:"type"`
	ReissueOf       string          `json:"reissueOf"`
	SecretNames     []string        `json:"secretNames"`
	SecretsScrubbed bool            `json:"secretsScrubbed"`
	Data            json.RawMessage `json:"data"`
}

type deliveryView struct {
	ID            string `json:"id"`
	Event         string `json:"event"`
	Endpoint      string `json:"endpoint"`
	Owner         string `json:"owner"`
	State         string `json:"state"`
	Attempts      int    `json:"attempts"`
	LastStatus    int    `json:"lastStatus"`
	LastError     string `json:"lastError"`
	ExhaustReason string `json:"exhaustReason"`
	Resolution    string `json:"resolution"`
}

type attemptView struct {
	Number          int    `json:"number"`
	StatusCode      int    `json:"statusCode"`
	Error           string `json:"error"`
	ResponseExcerpt string `json:"responseExcerpt"`
}

// do sends one request and returns the status and body.
func (c *apiClient) do(method, path, body, idempotencyKey string) (int, []byte, error) {
	return apicall.Do(c.client, c.base, c.token, method, path, body, idempotencyKey)
}

// publish posts an event to namespace ns and expects 201 Created.
func (c *apiClient) publish(ns, key, body string) publishAnswer {
	GinkgoHelper()
	status, data, err := c.do(http.MethodPost, "/v1/namespaces/"+ns+"/events", body, key)
	Expect(err).NotTo(HaveOccurred())
	Expect(status).To(Equal(http.StatusCreated), "publishing %s: %s", body, data)
	var a publishAnswer
	Expect(json.Unmarshal(data, &a)).To(Succeed())
	return a
}

// getJSON reads path, expects 200 and decodes into out; it returns the raw
// body too.
func (c *apiClient) getJSON(g Gomega, path string, out any) []byte {
	status, data, err := c.do(http.MethodGet, path, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusOK), "GET %s: %s", path, data)
	g.Expect(json.Unmarshal(data, out)).To(Succeed())
	return data
}

func (c *apiClient) event(g Gomega, ns, id string) (eventView, []byte) {
	var ev eventView
	raw := c.getJSON(g, "/v1/namespaces/"+ns+"/events/"+id, &ev)
	return ev, raw
}

// deliveriesOf lists the deliveries of an event.
func (c *apiClient) deliveriesOf(g Gomega, ns, eventID string) []deliveryView {
	var list struct {
		Items []deliveryView `json:"items"`
	}
	c.getJSON(g, "/v1/namespaces/"+ns+"/deliveries?event="+eventID, &list)
	return list.Items
}

// deliveryOf is the only delivery of an event.
func (c *apiClient) deliveryOf(g Gomega, ns, eventID string) deliveryView {
	ds := c.deliveriesOf(g, ns, eventID)
	g.Expect(ds).To(HaveLen(1), "deliveries of event %s", eventID)
	return ds[0]
}

func (c *apiClient) attempts(g Gomega, ns, deliveryID string) ([]attemptView, []byte) {
	var list struct {
		Items []attemptView `json:"items"`
	}
	raw := c.getJSON(g, "/v1/namespaces/"+ns+"/deliveries/"+deliveryID+"/attempts", &list)
	return list.Items, raw
}

// ---- receivers ----

// received is one request a receiver got (test/receivers).
type received = receivers.Request

// receiver is a real HTTP receiver on loopback (test/receivers). respond
// decides the answer to each request (n counts the requests with the same
// webhook-id, from 1). Once the endpoint's secret is known (useSecret,
// once the operator generated it), requests go through pkg/receiver: their
// signature is verified and a copy of an event answered 2xx before is a
// duplicate, answered 200 without asking respond. When verify is set, a
// request whose signature does not verify is answered 401 before respond
// is asked.
type receiver struct {
	*receivers.Receiver
	name string
}

func newReceiver(name string, verify bool, respond func(n int, r *received) int) *receiver {
	r := &receiver{name: name, Receiver: receivers.New(receivers.Options{Verify: verify,
		Respond: func(_ *http.Request, rc *received) int { return respond(rc.N, rc) }})}
	DeferCleanup(r.Close)
	specReceivers = append(specReceivers, r)
	return r
}

func (r *receiver) URL(path string) string { return r.Receiver.URL() + path }

func (r *receiver) useSecret(s sensitive.Bytes) {
	GinkgoHelper()
	Expect(r.UseSecrets(string(s.Reveal()))).To(Succeed())
}

// received returns what the receiver got, in order.
func (r *receiver) received() []received { return r.Requests() }

// of returns the requests carrying one event identity.
func (r *receiver) of(webhookID string) []received { return r.Of(webhookID) }

// answer returns a respond func that always answers status.
func answer(status int) func(int, *received) int {
	return func(int, *received) int { return status }
}

// metricsText is what the manager's /metrics answers.
func metricsText() string {
	GinkgoHelper()
	resp, err := http.Get(metricsURL)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.StatusCode).To(Equal(http.StatusOK), "GET /metrics: %s", data)
	return string(data)
}

// loopbackURL is the URL a sample document gets on loopback: rcv's, in
// https for a sample with tls (which applies only to https urls; such a
// sample names credential Secrets that the test does not create, so
// nothing is sent to it).
func loopbackURL(doc string, rcv *receiver, path string) string {
	u := rcv.URL(path)
	if strings.Contains(doc, "\n  tls:\n") {
		u = strings.Replace(u, "http://", "https://", 1)
	}
	return u
}
