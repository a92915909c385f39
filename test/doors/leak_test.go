// Package doors holds tests that hold both of hookkeeper's doors (the HTTP
// API and the aggregated Kubernetes API) to one permission model, against
// the real kube-apiserver with the roles the install ships.
package doors

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hookkeeper/hookkeeper/internal/deliveryapi"
	"github.com/hookkeeper/hookkeeper/internal/httpapi"
	"github.com/hookkeeper/hookkeeper/internal/kubeauth"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
	"github.com/hookkeeper/hookkeeper/internal/publish"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/test/testenv"
	"github.com/hookkeeper/hookkeeper/test/testenv/aggregated"
)

// cardNumber is the event data a reader without get on webhookevents/data
// must never see, through any route of either door.
const cardNumber = "4111111111111111"

const (
	ns             = "shop"
	idempotencyKey = "order-42-paid"
	eventBody      = `{"type":"order.paid","data":{"order":42,"card":"` + cardNumber + `"}}`
	deliveryGroup  = "delivery.hookkeeper.dev"
)

// subject is a ServiceAccount of ns bound to some roles (ClusterRoles by
// RoleBinding in ns; "role:" names a Role of the test's own).
type subject struct {
	name  string
	roles []string
}

// subjects: the reader (get on webhookendpoints only, what view
// grants through the shipped aggregation), the built-in view role, each
// shipped reader and publisher role alone, the data role with view and
// with the publisher role, and nobody.
var subjects = []subject{
	{"nobody", nil},
	{"endpoint-getter", []string{"role:get-webhookendpoints"}},
	{"viewer", []string{"view"}},
	{"delivery-reader", []string{"hookkeeper-delivery-reader"}},
	{"historian", []string{"hookkeeper-delivery-history-viewer-role"}},
	{"publisher", []string{"hookkeeper-event-publisher"}},
	{"data-reader", []string{"view", "hookkeeper-webhookevent-data-reader-role"}},
	{"publishing-data-reader", []string{"hookkeeper-event-publisher", "hookkeeper-webhookevent-data-reader-role"}},
}

// route is one way of either door to ask about the event. returnsData says
// whether the route can answer the event's data at all (to a caller who
// may read it); every other route must never answer it. needs is the
// permission the route itself asks for (in ns unless it names another
// scope), all of it.
type route struct {
	name        string
	returnsData bool
	needs       []authzv1.ResourceAttributes
	call        func(token string) (int, string)
}

// TestEventDataNeedsTheDataPermissionAtEveryRoute is the class test of the
// privacy rule: every route of both doors answers an event's data only to
// a caller the cluster allows get on webhookevents/data in its namespace,
// and every route that can answer data does answer it to such a caller.
// The ground truth of "allowed" is a SubjectAccessReview asked by the test
// itself (of the data permission, and of each route's own); the roles are
// the shipped ones, aggregated into view by the upstream aggregation
// controller.
func TestEventDataNeedsTheDataPermissionAtEveryRoute(t *testing.T) {
	h := start(t)
	routes := h.routes()
	shown := map[string]bool{} // data routes held to answering data to someone

	for _, s := range subjects {
		mayReadData := h.allowed(t, s.name, authzv1.ResourceAttributes{
			Namespace: ns, Verb: "get", Group: deliveryGroup, Resource: "webhookevents", Subresource: "data",
		})
		for _, r := range routes {
			mayCall := true
			for _, need := range r.needs {
				mayCall = mayCall && h.allowed(t, s.name, need)
			}
			if r.returnsData && mayReadData && mayCall {
				shown[r.name] = true
			}
			t.Run(s.name+"/"+r.name, func(t *testing.T) {
				status, body := r.call(h.tokens[s.name])
				shows := strings.Contains(body, cardNumber)
				switch {
				case shows && !mayReadData:
					t.Fatalf("answered %d with the event's data to %s, who may not get webhookevents/data:\n%s", status, s.name, body)
				case shows && !r.returnsData:
					t.Fatalf("a route that is not to answer event data answered it (%d):\n%s", status, body)
				case !shows && r.returnsData && mayReadData && mayCall:
					t.Fatalf("answered %d without the event's data to %s, who may call the route and read data:\n%s", status, s.name, body)
				}
			})
		}
	}
	// Every data route but the list of every namespace (no subject here
	// may list cluster-wide) is held to answering data to someone.
	if len(shown) != 4 {
		t.Errorf("data routes checked to answer data to an allowed caller: %v, want all four namespaced ones", shown)
	}
}

type harness struct {
	ctx      context.Context
	cs       *kubernetes.Clientset
	httpDoor *httptest.Server
	kubeDoor string // https://host:port of the aggregated server
	kubeHTTP *http.Client
	tokens   map[string]string // subject → ServiceAccount token
	eventID  string
	delivery string
}

// start runs the control plane with the shipped roles, the ledger with one
// event carrying a card number (delivered once, with an attempt), and both
// doors on it, with the subjects.
func start(t *testing.T) *harness {
	t.Helper()
	cp := aggregated.Start(t, testenv.AggregatedOptions{ShippedRoles: true})
	cfg := cp.Config
	h := &harness{ctx: t.Context(), cs: kubernetes.NewForConfigOrDie(cfg), tokens: map[string]string{}}

	// The ledger: an endpoint of shop, which the event goes to.
	store, err := sqlite.Open(h.ctx, filepath.Join(cp.Dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	policy := ledger.Policy{ReplayWindow: 24 * time.Hour, EvidenceRetention: 48 * time.Hour, PayloadRetention: 48 * time.Hour}
	if _, err := store.EndpointUpsert(h.ctx, &ledger.EndpointUpsertParams{Now: time.Now(), Endpoint: ledger.Endpoint{
		ID: ledger.EndpointID(ns, "billing"), Namespace: ns, Name: "billing", URL: "https://receiver.example/billing",
		EventTypes: []string{"*"}, Policy: policy, AckMode: ledger.AckResponse,
		Secrets: []ledger.SigningSecret{{Value: sensitive.Bytes("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")}},
	}}); err != nil {
		t.Fatal(err)
	}

	// The HTTP door, authenticating and authorising through the cluster;
	// no cache of denials, so that a new RoleBinding counts at once.
	auth, err := kubeauth.NewForConfig(cfg, kubeauth.Options{AuthnNegativeTTL: -1, AuthzNegativeTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	pub := storePublisher{store}
	api, err := httpapi.New(httpapi.Config{Publisher: pub, Reader: store, Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	h.httpDoor = httptest.NewServer(api)
	t.Cleanup(h.httpDoor.Close)

	// The aggregated door, its authentication and authorisation delegated
	// to the cluster, creatable through the same publish path.
	core, err := publish.New(publish.Config{Committer: pub})
	if err != nil {
		t.Fatal(err)
	}
	aggregated.Serve(t, cp, deliveryapi.Config{Ledger: store, Publisher: core})
	h.kubeDoor = cp.URL()
	if h.kubeHTTP, err = cp.Client(nil); err != nil {
		t.Fatal(err)
	}

	h.makeSubjects(t)

	// The event, published by the publisher, then attempted once.
	NewWithT(t).Eventually(func(g Gomega) {
		status, body := h.httpCall(h.tokens["publisher"], http.MethodPost, "/v1/namespaces/"+ns+"/events", eventBody)
		g.Expect(status).To(BeElementOf(http.StatusCreated, http.StatusOK), body)
		h.eventID = jsonField(g, body, "id")
	}).WithTimeout(time.Minute).Should(Succeed())
	at := time.Now()
	claimed, err := store.DeliveryClaim(h.ctx, &ledger.DeliveryClaimParams{Owner: "w", Now: at, LeaseFor: time.Minute, Limit: 10})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %d, %v", len(claimed), err)
	}
	h.delivery = claimed[0].Delivery.ID
	if _, err := store.AttemptRecordMany(h.ctx, []*ledger.AttemptRecordParams{{DeliveryID: h.delivery, Owner: "w", Now: at,
		Attempt: ledger.Attempt{StartedAt: at, Duration: time.Millisecond, StatusCode: 503, Error: "HTTP 503 from the receiver"},
		Next:    ledger.Next{State: ledger.StateScheduled, DueAt: at.Add(time.Hour)}}}); err != nil {
		t.Fatal(err)
	}

	// Ready: the aggregated server answers, and view carries the shipped
	// rules on delivery.hookkeeper.dev (aggregation is asynchronous).
	NewWithT(t).Eventually(func(g Gomega) {
		status, body := h.kubeCall(h.tokens["viewer"], http.MethodGet, "/deliveries", "", "")
		g.Expect(status).To(Equal(http.StatusOK), body)
		g.Expect(h.allowed(t, "data-reader", authzv1.ResourceAttributes{Namespace: ns, Verb: "get", Group: deliveryGroup,
			Resource: "webhookevents", Subresource: "data"})).To(BeTrue())
	}).WithTimeout(time.Minute).Should(Succeed())
	return h
}

// makeSubjects creates each subject's ServiceAccount, bindings and token.
func (h *harness) makeSubjects(t *testing.T) {
	t.Helper()
	if _, err := h.cs.CoreV1().Namespaces().Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.cs.RbacV1().Roles(ns).Create(h.ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "get-webhookendpoints"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"hookkeeper.dev"}, Resources: []string{"webhookendpoints"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range subjects {
		if _, err := h.cs.CoreV1().ServiceAccounts(ns).Create(h.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: s.name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for i, role := range s.roles {
			ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
			if name, ok := strings.CutPrefix(role, "role:"); ok {
				ref.Kind, ref.Name = "Role", name
			}
			if _, err := h.cs.RbacV1().RoleBindings(ns).Create(h.ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", s.name, i)},
				RoleRef:    ref,
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: s.name, Namespace: ns}},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		tok, err := h.cs.CoreV1().ServiceAccounts(ns).CreateToken(h.ctx, s.name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h.tokens[s.name] = tok.Status.Token
	}
}

// allowed asks the API server whether subject's ServiceAccount may do attrs.
func (h *harness) allowed(t *testing.T, subject string, attrs authzv1.ResourceAttributes) bool {
	t.Helper()
	sar, err := h.cs.AuthorizationV1().SubjectAccessReviews().Create(h.ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + ns + ":" + subject,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &attrs,
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// routes are every route of both doors that reads or answers the event or
// its deliveries.
func (h *harness) routes() []route {
	httpGet := func(path string) func(string) (int, string) {
		return func(tok string) (int, string) { return h.httpCall(tok, http.MethodGet, path, "") }
	}
	kubeGet := func(path, accept string) func(string) (int, string) {
		return func(tok string) (int, string) { return h.kubeCall(tok, http.MethodGet, path, "", accept) }
	}
	const table = "application/json;as=Table;v=v1;g=meta.k8s.io"
	needs := func(verb, group, resource, namespace string) []authzv1.ResourceAttributes {
		return []authzv1.ResourceAttributes{{Namespace: namespace, Verb: verb, Group: group, Resource: resource}}
	}
	getEvents, listEvents := needs("get", deliveryGroup, "webhookevents", ns), needs("list", deliveryGroup, "webhookevents", ns)
	getDeliveries, listDeliveries := needs("get", deliveryGroup, "deliveries", ns), needs("list", deliveryGroup, "deliveries", ns)
	publishEvents := needs("create", "hookkeeper.dev", "events", ns)
	kubePublish := append(needs("create", deliveryGroup, "webhookevents", ns), publishEvents...)
	create := fmt.Sprintf(`{"apiVersion":"delivery.hookkeeper.dev/v1alpha1","kind":"WebhookEvent","metadata":{"namespace":%q},`+
		`"spec":{"type":"order.paid","idempotencyKey":%q,"data":{"order":42,"card":%q}}}`, ns, idempotencyKey, cardNumber)
	return []route{
		{"http GET event", true, getEvents, httpGet("/v1/namespaces/" + ns + "/events/" + h.eventID)},
		{"http GET deliveries of the event", false, listDeliveries, httpGet("/v1/namespaces/" + ns + "/deliveries?event=" + h.eventID)},
		{"http GET delivery", false, getDeliveries, httpGet("/v1/namespaces/" + ns + "/deliveries/" + h.delivery)},
		{"http GET attempts", false, getDeliveries, httpGet("/v1/namespaces/" + ns + "/deliveries/" + h.delivery + "/attempts")},
		{"http POST event again (idempotent replay)", false, publishEvents, func(tok string) (int, string) {
			return h.httpCall(tok, http.MethodPost, "/v1/namespaces/"+ns+"/events", eventBody)
		}},
		{"kube get webhookevent", true, getEvents, kubeGet("/webhookevents/"+h.eventID, "")},
		{"kube get webhookevent as a table", false, getEvents, kubeGet("/webhookevents/"+h.eventID, table)},
		{"kube list webhookevents", true, listEvents, kubeGet("/webhookevents", "")},
		{"kube list webhookevents as a table", false, listEvents, kubeGet("/webhookevents", table)},
		{"kube list webhookevents of every namespace", true, needs("list", deliveryGroup, "webhookevents", ""), func(tok string) (int, string) {
			return h.kubeCallAt(tok, http.MethodGet, "/apis/"+deliveryGroup+"/v1alpha1/webhookevents", "", "")
		}},
		{"kube get delivery", false, getDeliveries, kubeGet("/deliveries/"+h.delivery, "")},
		{"kube list deliveries", false, listDeliveries, kubeGet("/deliveries", "")},
		{"kube create webhookevent again (idempotent replay)", true, kubePublish, func(tok string) (int, string) {
			return h.kubeCall(tok, http.MethodPost, "/webhookevents", create, "")
		}},
	}
}

func (h *harness) httpCall(token, method, path, body string) (int, string) {
	req, err := http.NewRequestWithContext(h.ctx, method, h.httpDoor.URL+path, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(httpapi.IdempotencyKeyHeader, idempotencyKey)
	}
	return do(h.httpDoor.Client(), req)
}

// kubeCall calls the aggregated server at path under ns.
func (h *harness) kubeCall(token, method, path, body, accept string) (int, string) {
	return h.kubeCallAt(token, method, "/apis/"+deliveryGroup+"/v1alpha1/namespaces/"+ns+path, body, accept)
}

func (h *harness) kubeCallAt(token, method, path, body, accept string) (int, string) {
	req, err := http.NewRequestWithContext(h.ctx, method, h.kubeDoor+path, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	return do(h.kubeHTTP, req)
}

func do(c *http.Client, req *http.Request) (int, string) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err.Error()
	}
	return resp.StatusCode, string(data)
}

// storePublisher commits a publish straight into the ledger: the test is of
// the doors' permissions, not of the engine's batching.
type storePublisher struct{ store ledger.Store }

func (p storePublisher) Publish(ctx context.Context, params *ledger.EventInsertParams) (ledger.EventInsertResult, error) {
	res, err := p.store.EventInsertMany(ctx, []*ledger.EventInsertParams{params})
	if err != nil {
		return ledger.EventInsertResult{}, err
	}
	return res[0], nil
}

// jsonField is the string field name of the JSON object body.
func jsonField(g Gomega, body, name string) string {
	var obj map[string]any
	g.Expect(json.Unmarshal([]byte(body), &obj)).To(Succeed(), body)
	v, _ := obj[name].(string)
	g.Expect(v).NotTo(BeEmpty(), "%s of %s", name, body)
	return v
}
