package deliveryapi_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/deliveryapi"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/test/testenv"
	"github.com/hookkeeper/hookkeeper/test/testenv/aggregated"
)

// Secrets of the run: none may appear in any answer.
const (
	signingSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	oneTimeSecret = "tok_ONE_TIME_7c1d0e5f"
	payloadMarker = "payload-marker-3f9a"
)

// issue signs a leaf: a serving certificate for 127.0.0.1 and the
// APIService's Service, or a client certificate for cn.
func issue(t *testing.T, ca *testenv.CA, cn string, serial int64, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	c, k, err := ca.Issue(cn, serial, server)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// history is what the test writes to the ledger.
type history struct {
	secretEvent, paidEvent                        string
	shopBillingExhausted                          []string // of shop/billing, before recovery
	reissued, reissueEvent, reissueDelivery       string
	retried, retryDelivery, auditDelivered, other string
	shopDeliveries                                []string
	createdDeliveries                             []string // of the shop's order.created event
}

// writeHistory publishes events, attempts every delivery (billing fails,
// audit succeeds) and recovers two exhausted deliveries: one retried, one
// reissued.
func writeHistory(t *testing.T, ctx context.Context, s ledger.Store) history {
	t.Helper()
	now := time.Now().Add(-10 * time.Minute).Truncate(time.Millisecond)
	policy := ledger.Policy{ReplayWindow: 24 * time.Hour, EvidenceRetention: 48 * time.Hour, PayloadRetention: 48 * time.Hour}
	for _, ep := range []struct{ ns, name, owner string }{{"shop", "billing", "team-billing"}, {"shop", "audit", ""}, {"other", "billing", ""}} {
		if _, err := s.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{Now: now, Endpoint: ledger.Endpoint{
			ID: ledger.EndpointID(ep.ns, ep.name), Namespace: ep.ns, Name: ep.name, Owner: ep.owner,
			URL: "https://receiver.example/" + ep.name, EventTypes: []string{"*"}, Policy: policy,
			Secrets: []ledger.SigningSecret{{Value: sensitive.Bytes(signingSecret)}}, AckMode: ledger.AckResponse,
		}}); err != nil {
			t.Fatal(err)
		}
	}
	var h history
	publish := func(ns, typ string, secrets bool, at time.Time) ledger.EventInsertResult {
		data := []byte(fmt.Sprintf(`{"marker":%q,"at":%q}`, payloadMarker, at))
		p := &ledger.EventInsertParams{ID: ledger.NewID("evt", at), Namespace: ns, Type: typ, Data: data, BodyHash: data[:8], Now: at}
		if secrets {
			p.Secrets, p.SecretNames = sensitive.Bytes(`{"token":"`+oneTimeSecret+`"}`), []string{"token"}
		}
		res, err := s.EventInsertMany(ctx, []*ledger.EventInsertParams{p})
		if err != nil || res[0].Err != nil {
			t.Fatalf("publish: %v %v", err, res[0].Err)
		}
		return res[0]
	}
	e1 := publish("shop", "user.created", true, now)
	e2 := publish("shop", "order.paid", false, now.Add(time.Millisecond))
	e3 := publish("shop", "order.created", false, now.Add(2*time.Millisecond))
	e4 := publish("other", "order.created", false, now.Add(3*time.Millisecond))
	h.secretEvent, h.paidEvent = e1.Event.ID, e2.Event.ID
	at := now.Add(time.Second)
	claimed, err := s.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: "w", Now: at, LeaseFor: time.Minute, Limit: 100})
	if err != nil || len(claimed) != 7 {
		t.Fatalf("claim: %d, %v", len(claimed), err)
	}
	var recs []*ledger.AttemptRecordParams
	for _, c := range claimed {
		p := &ledger.AttemptRecordParams{DeliveryID: c.Delivery.ID, Owner: "w", Now: at,
			Attempt: ledger.Attempt{StartedAt: at, Duration: 120 * time.Millisecond, StatusCode: 503, Error: "HTTP 503 from the receiver"},
			Next:    ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustMaxAttempts}}
		if strings.HasSuffix(c.Delivery.EndpointID, "/audit") {
			p.Attempt.StatusCode, p.Attempt.Error, p.Next = 200, "", ledger.Next{State: ledger.StateDelivered}
		}
		recs = append(recs, p)
	}
	if _, err := s.AttemptRecordMany(ctx, recs); err != nil {
		t.Fatal(err)
	}
	to := func(r ledger.EventInsertResult, ep string) string {
		for _, d := range r.Deliveries {
			if d.EndpointID == ep {
				return d.ID
			}
		}
		t.Fatalf("no delivery to %s", ep)
		return ""
	}
	h.reissued, h.retried = to(e2, "shop/billing"), to(e3, "shop/billing")
	h.auditDelivered, h.other = to(e2, "shop/audit"), to(e4, "other/billing")
	h.shopBillingExhausted = []string{to(e1, "shop/billing"), h.reissued, h.retried}
	rat := now.Add(2 * time.Second)
	reissue, err := s.RecoveryApply(ctx, &ledger.RecoveryApplyParams{OperationKey: "op-1", DeliveryID: h.reissued,
		Action: ledger.RecoveryReissue, NewEventID: ledger.NewID("evt", rat), NewDeliveryID: ledger.NewID("dlv", rat), Now: rat})
	if err != nil || reissue.Outcome != ledger.OutcomeReissued {
		t.Fatalf("reissue: %+v, %v", reissue, err)
	}
	retry, err := s.RecoveryApply(ctx, &ledger.RecoveryApplyParams{OperationKey: "op-1", DeliveryID: h.retried,
		Action: ledger.RecoveryRetry, NewEventID: ledger.NewID("evt", rat), NewDeliveryID: ledger.NewID("dlv", rat), Now: rat})
	if err != nil || retry.Outcome != ledger.OutcomeRetried {
		t.Fatalf("retry: %+v, %v", retry, err)
	}
	h.reissueEvent, h.reissueDelivery, h.retryDelivery = reissue.NewEventID, reissue.NewDeliveryID, retry.NewDeliveryID
	for _, r := range []ledger.EventInsertResult{e1, e2, e3} {
		for _, d := range r.Deliveries {
			h.shopDeliveries = append(h.shopDeliveries, d.ID)
		}
	}
	for _, d := range e3.Deliveries {
		h.createdDeliveries = append(h.createdDeliveries, d.ID)
	}
	h.shopDeliveries = append(h.shopDeliveries, h.reissueDelivery, h.retryDelivery)
	slices.Sort(h.shopDeliveries)
	return h
}

// harness is the control plane, the aggregated server and kubeconfigs for
// the real kubectl pointed at the server.
type harness struct {
	t          *testing.T
	cp         *testenv.Aggregated
	kubeconfig map[string]string // user → kubeconfig path
	outputs    *bytes.Buffer     // everything the server answered, for the secrets check
}

// run runs kubectl as user and returns stdout+stderr and whether it failed.
func (h *harness) run(user string, args ...string) (string, error) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.cp.Kubectl, append([]string{"--kubeconfig", h.kubeconfig[user]}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+h.cp.Dir, "KUBECACHEDIR="+filepath.Join(h.cp.Dir, "cache-"+user))
	out, err := cmd.CombinedOutput()
	h.outputs.Write(out)
	return string(out), err
}

func (h *harness) ok(user string, args ...string) string {
	h.t.Helper()
	out, err := h.run(user, args...)
	if err != nil {
		h.t.Fatalf("kubectl %s as %s: %v\n%s", strings.Join(args, " "), user, err, out)
	}
	return out
}

func (h *harness) fails(user, want string, args ...string) {
	h.t.Helper()
	out, err := h.run(user, args...)
	if err == nil || !strings.Contains(out, want) {
		h.t.Fatalf("kubectl %s as %s: err %v, want failure containing %q; got:\n%s", strings.Join(args, " "), user, err, want, out)
	}
}

// names runs a get printing names only and returns them sorted.
func (h *harness) names(user string, args ...string) []string {
	h.t.Helper()
	out := h.ok(user, append(args, "-o", "jsonpath={.items[*].metadata.name}")...)
	got := strings.Fields(out)
	slices.Sort(got)
	return got
}

func wantNames(t *testing.T, what string, got, want []string) {
	t.Helper()
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got  %v\n want %v", what, got, want)
	}
}

// writeKubeconfig writes a kubeconfig for the aggregated server with
// cluster-side credentials of cfg (a client certificate of the control
// plane's client CA).
func (h *harness) writeKubeconfig(user string, cfg *rest.Config) {
	h.t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["delivery"] = &clientcmdapi.Cluster{Server: h.cp.URL(), CertificateAuthorityData: h.cp.ServingCA.PEM}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["delivery"] = &clientcmdapi.Context{Cluster: "delivery", AuthInfo: user}
	kc.CurrentContext = "delivery"
	path := filepath.Join(h.cp.Dir, "kubeconfig-"+user)
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		h.t.Fatal(err)
	}
	h.kubeconfig[user] = path
}

// TestWithKubectl runs the aggregated server against the real
// kube-apiserver (delegated authentication and authorization, front-proxy
// CA published by kube-apiserver itself) and the real kubectl, pointed at
// the server and, through the APIService, at kube-apiserver. Users get
// their permissions from the built-in view, edit and admin roles, filled by
// the upstream clusterrole aggregation controller (kube-controllers), and
// from the shipped roles of config/default.
func TestWithKubectl(t *testing.T) {
	// The control plane as a cluster's: kube-apiserver publishes the
	// front-proxy CA in kube-system/extension-apiserver-authentication,
	// where the server reads it. The roles are those users install
	// (config/default, names prefixed), aggregated into the built-in view,
	// edit and admin roles by the upstream controller.
	cp := aggregated.Start(t, testenv.AggregatedOptions{ShippedRoles: true})
	h := &harness{t: t, cp: cp, kubeconfig: map[string]string{}, outputs: &bytes.Buffer{}}
	ctx, cfg, env, dir := t.Context(), cp.Config, cp.Env, cp.Dir

	store, err := sqlite.Open(ctx, filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	hist := writeHistory(t, ctx, store)
	aggregated.Serve(t, cp, deliveryapi.Config{Ledger: store})

	// Users: an admin (system:masters); a viewer, an editor and a
	// namespace admin bound only to the built-in view, edit and admin roles
	// in shop; a historian bound only to the shipped delivery-history role;
	// a reader bound to view and the shipped event-data role; and nobody.
	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, ns := range []string{"shop", "other"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	user := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
	}
	bind(t, ctx, cs, "view", user("viewer"))
	bind(t, ctx, cs, "edit", user("editor"))
	bind(t, ctx, cs, "admin", user("nsadmin"))
	bind(t, ctx, cs, "hookkeeper-delivery-history-viewer-role", user("historian"))
	bind(t, ctx, cs, "view", user("reader"))
	bind(t, ctx, cs, "hookkeeper-webhookevent-data-reader-role", user("reader"))
	apiServerKubeconfig := map[string]string{} // user → kubeconfig of the kube-apiserver itself
	for _, u := range []envtest.User{
		{Name: "admin", Groups: []string{"system:masters"}},
		{Name: "viewer"}, {Name: "editor"}, {Name: "nsadmin"}, {Name: "historian"}, {Name: "reader"}, {Name: "nobody"},
	} {
		au, err := env.AddUser(u, nil)
		if err != nil {
			t.Fatal(err)
		}
		h.writeKubeconfig(u.Name, au.Config())
		data, err := au.KubeConfig()
		if err != nil {
			t.Fatal(err)
		}
		apiServerKubeconfig[u.Name] = filepath.Join(dir, "kubeconfig-apiserver-"+u.Name)
		writeFile(t, apiServerKubeconfig[u.Name], data)
	}

	// A ServiceAccount bound to view, authenticated by its token
	// (TokenReview through the delegated authenticator).
	if _, err := cs.CoreV1().ServiceAccounts("shop").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "oncall"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings("shop").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "oncall-viewer", Namespace: "shop"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "oncall", Namespace: "shop"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := cs.CoreV1().ServiceAccounts("shop").CreateToken(ctx, "oncall", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.writeKubeconfig("oncall", &rest.Config{BearerToken: tok.Status.Token})

	// Ready: discovery answers through delegated authentication.
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := h.run("admin", "api-resources", "--api-group", v1alpha1.GroupName)
		if err == nil && strings.Contains(out, "deliveries") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not ready: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond) // polling readiness, not synchronizing on a result
	}
	// Ready: view, edit and admin (each aggregating the one before) carry
	// the shipped rules on delivery.hookkeeper.dev.
	for _, role := range []string{"view", "edit", "admin"} {
		NewWithT(t).Eventually(func(g Gomega) {
			r, err := cs.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Rules).To(ContainElement(HaveField("APIGroups", ContainElement(v1alpha1.GroupName))))
		}).WithTimeout(time.Minute).Should(Succeed(), "%s aggregates no rule of %s:\n%s", role, v1alpha1.GroupName, testenv.Tail(cp.Controllers.Log, 40))
	}
	// Registered as config/default does, but through an ExternalName
	// Service for 127.0.0.1 (testenv.RegisterDeliveryAPI).
	if err := cp.Register(time.Minute); err != nil {
		t.Fatal(err)
	}

	t.Run("Discovery", func(t *testing.T) {
		h.t = t
		out := h.ok("admin", "api-resources", "--api-group", v1alpha1.GroupName, "-o", "wide")
		for _, want := range []string{"deliveries", "dlv", "Delivery", "webhookevents", "whe", "WebhookEvent", "hookkeeper", "get,list"} {
			if !strings.Contains(out, want) {
				t.Fatalf("api-resources lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "watch") {
			t.Fatalf("api-resources offers watch:\n%s", out)
		}
	})
	t.Run("GetTable", func(t *testing.T) {
		h.t = t
		out := h.ok("admin", "get", "deliveries", "-n", "shop")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		for _, col := range []string{"NAME", "EVENT TYPE", "ENDPOINT", "STATE", "ATTEMPTS", "LAST STATUS", "REASON", "RESOLUTION", "REPLACED BY", "AGE"} {
			if !strings.Contains(lines[0], col) {
				t.Fatalf("header lacks %s: %s", col, lines[0])
			}
		}
		if len(lines)-1 != len(hist.shopDeliveries) {
			t.Fatalf("%d rows, want %d:\n%s", len(lines)-1, len(hist.shopDeliveries), out)
		}
		row := func(id string) string {
			for _, l := range lines {
				if strings.HasPrefix(l, id+" ") {
					return l
				}
			}
			t.Fatalf("no row for %s:\n%s", id, out)
			return ""
		}
		for id, want := range map[string][]string{
			hist.reissued:       {"order.paid", "billing", "Exhausted", "503", "MaxAttempts", "Reissued", "event/" + hist.reissueEvent},
			hist.retried:        {"order.created", "billing", "Exhausted", "Retried", "delivery/" + hist.retryDelivery},
			hist.auditDelivered: {"order.paid", "audit", "Delivered", "200"},
			hist.retryDelivery:  {"order.created", "billing", "Scheduled"},
		} {
			r := row(id)
			for _, w := range want {
				if !strings.Contains(r, w) {
					t.Fatalf("row of %s lacks %q: %s", id, w, r)
				}
			}
		}
		wide := h.ok("admin", "get", "delivery", hist.retryDelivery, "-n", "shop", "-o", "wide")
		for _, w := range []string{"EVENT", "NEXT ATTEMPT", "RETRY OF", "OWNER", "team-billing", "LAST ERROR", hist.retried} {
			if !strings.Contains(wide, w) {
				t.Fatalf("-o wide lacks %q:\n%s", w, wide)
			}
		}
		all := h.ok("admin", "get", "hookkeeper", "-n", "shop")
		if !strings.Contains(all, "delivery.delivery.hookkeeper.dev/") || !strings.Contains(all, "webhookevent.delivery.hookkeeper.dev/") {
			t.Fatalf("kubectl get hookkeeper lacks a kind:\n%s", all)
		}
	})
	t.Run("FieldSelectors", func(t *testing.T) {
		h.t = t
		wantNames(t, "endpoint and state", h.names("admin", "get", "deliveries", "-n", "shop",
			"--field-selector", "spec.endpoint=billing,status.state=Exhausted"), hist.shopBillingExhausted)
		wantNames(t, "unresolved everywhere", h.names("admin", "get", "deliveries", "-A",
			"--field-selector", "status.resolution=Unresolved"), []string{hist.shopBillingExhausted[0], hist.other})
		wantNames(t, "event", h.names("admin", "get", "deliveries", "-n", "shop",
			"--field-selector", "spec.event="+hist.paidEvent), []string{hist.reissued, hist.auditDelivered})
		wantNames(t, "event type", h.names("admin", "get", "deliveries", "-A",
			"--field-selector", "spec.eventType=order.created"), append([]string{hist.retryDelivery, hist.other}, hist.createdDeliveries...))
		wantNames(t, "name", h.names("admin", "get", "deliveries", "-A",
			"--field-selector", "metadata.name="+hist.other), []string{hist.other})
		wantNames(t, "namespace contradiction", h.names("admin", "get", "deliveries", "-n", "shop",
			"--field-selector", "metadata.namespace=other"), nil)
		h.fails("admin", "label selectors are not supported on deliveries", "get", "deliveries", "-n", "shop", "-l", "app=x")
		h.fails("admin", `field selector "spec.url" is not supported`, "get", "deliveries", "-n", "shop", "--field-selector", "spec.url=x")
		h.fails("admin", "unknown value; use one of", "get", "deliveries", "-n", "shop", "--field-selector", "status.state=exhausted")
		h.fails("admin", "spec.endpoint needs a namespace", "get", "deliveries", "-A", "--field-selector", "spec.endpoint=billing")
	})
	t.Run("ChunksAndWatch", func(t *testing.T) {
		h.t = t
		wantNames(t, "--chunk-size=2", h.names("admin", "get", "deliveries", "-n", "shop", "--chunk-size=2"), hist.shopDeliveries)
		h.fails("admin", "(MethodNotAllowed): watch is not supported", "get", "deliveries", "-n", "shop", "-w", "--request-timeout=20s")
	})
	t.Run("ReissueStory", func(t *testing.T) {
		h.t = t
		replaced := h.ok("admin", "get", "delivery", hist.reissued, "-n", "shop", "-o", "jsonpath={.status.resolution} {.status.replacedBy.event}")
		if replaced != "Reissued "+hist.reissueEvent {
			t.Fatalf("replacedBy of the reissued delivery: %q", replaced)
		}
		wantNames(t, "the reissue's deliveries", h.names("admin", "get", "deliveries", "-n", "shop",
			"--field-selector", "spec.event="+hist.reissueEvent), []string{hist.reissueDelivery})
		if got := h.ok("admin", "get", "webhookevent", hist.reissueEvent, "-n", "shop", "-o", "jsonpath={.spec.reissueOf}"); got != hist.paidEvent {
			t.Fatalf("reissueOf of the new event: %q, want %s", got, hist.paidEvent)
		}
		wantNames(t, "events by type", h.names("admin", "get", "webhookevents", "-n", "shop",
			"--field-selector", "spec.type=order.paid"), []string{hist.paidEvent, hist.reissueEvent})
	})
	t.Run("DescribeYAMLExplain", func(t *testing.T) {
		h.t = t
		desc := h.ok("admin", "describe", "delivery", hist.reissued, "-n", "shop")
		for _, w := range []string{"Attempts:", "Status Code:", "503", "HTTP 503 from the receiver", "Duration:", "120ms", "Resolution:", "Reissued", hist.reissueEvent} {
			if !strings.Contains(desc, w) {
				t.Fatalf("describe lacks %q:\n%s", w, desc)
			}
		}
		y := h.ok("admin", "get", "delivery", hist.retried, "-n", "shop", "-o", "yaml")
		for _, w := range []string{"apiVersion: delivery.hookkeeper.dev/v1alpha1", "kind: Delivery", "attempts:", "statusCode: 503", "replacedBy:", "delivery: " + hist.retryDelivery} {
			if !strings.Contains(y, w) {
				t.Fatalf("-o yaml lacks %q:\n%s", w, y)
			}
		}
		ex := h.ok("admin", "explain", "delivery.status")
		for _, w := range []string{"GROUP:      delivery.hookkeeper.dev", "attemptCount", "Scheduled, InFlight, AwaitingAck", "replacedBy"} {
			if !strings.Contains(ex, w) {
				t.Fatalf("explain lacks %q:\n%s", w, ex)
			}
		}
		h.fails("admin", "NotFound", "get", "delivery", hist.other, "-n", "shop")
	})
	t.Run("ShippedRoles", func(t *testing.T) {
		h.t = t
		testShippedRoles(t, h, cp.ShippedRoles, apiServerKubeconfig)
	})
	t.Run("ThroughKubeAPIServer", func(t *testing.T) {
		h.t = t
		testThroughKubeAPIServer(t, h, hist, apiServerKubeconfig)
	})
	t.Run("RBAC", func(t *testing.T) {
		h.t = t
		h.fails("nobody", "Forbidden", "get", "deliveries", "-n", "shop")
		h.fails("nobody", "Forbidden", "get", "webhookevents", "-n", "shop")
		wantNames(t, "viewer in shop", h.names("viewer", "get", "deliveries", "-n", "shop"), hist.shopDeliveries)
		wantNames(t, "ServiceAccount token in shop", h.names("oncall", "get", "deliveries", "-n", "shop"), hist.shopDeliveries)
		h.fails("oncall", "Forbidden", "get", "deliveries", "-n", "other")
		h.fails("viewer", "Forbidden", "get", "deliveries", "-n", "other")
		h.fails("viewer", "Forbidden", "get", "deliveries", "-A")
		// Events: the viewer sees them without data, the reader with it.
		vt := h.ok("viewer", "get", "webhookevents", "-n", "shop")
		if !strings.Contains(vt, "hidden") || strings.Contains(vt, "shown") {
			t.Fatalf("viewer's event table should show data hidden:\n%s", vt)
		}
		vy := h.ok("viewer", "get", "webhookevents", "-n", "shop", "-o", "yaml")
		if strings.Contains(vy, payloadMarker) || !strings.Contains(vy, "dataHidden: true") {
			t.Fatalf("viewer reads event data:\n%s", vy)
		}
		vg := h.ok("viewer", "get", "webhookevent", hist.paidEvent, "-n", "shop", "-o", "json")
		if strings.Contains(vg, payloadMarker) {
			t.Fatalf("viewer reads event data with a get:\n%s", vg)
		}
		ry := h.ok("reader", "get", "webhookevent", hist.paidEvent, "-n", "shop", "-o", "json")
		var ev v1alpha1.WebhookEvent
		if err := json.Unmarshal([]byte(ry), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Spec.Data == nil || !strings.Contains(string(ev.Spec.Data.Raw), payloadMarker) || ev.Status.DataHidden {
			t.Fatalf("reader does not read event data: %s", ry)
		}
		rt := h.ok("reader", "get", "webhookevents", "-n", "shop", "-o", "wide")
		if !strings.Contains(rt, "shown") || !strings.Contains(rt, "1 (scrubbed)") || !strings.Contains(rt, hist.reissueEvent) {
			t.Fatalf("reader's event table:\n%s", rt)
		}
	})
	t.Run("PagingWhileWriting", func(t *testing.T) {
		h.t = t
		testPagingWhileWriting(t, h, store)
	})
	t.Run("FrontProxy", func(t *testing.T) {
		h.t = t
		testFrontProxy(t, h)
	})
	t.Run("Rotation", func(t *testing.T) {
		h.t = t
		c, k := issue(t, cp.ServingCA, testenv.DeliveryAPIHost, 3, true)
		writeFile(t, cp.KeyFile, k)
		writeFile(t, cp.CertFile, c)
		deadline := time.Now().Add(time.Minute)
		for servedSerial(t, h) != 3 {
			if time.Now().After(deadline) {
				t.Fatal("the rotated certificate is not served after a minute")
			}
			time.Sleep(200 * time.Millisecond) // polling the file watcher's effect
		}
		wantNames(t, "after rotation", h.names("admin", "get", "deliveries", "-n", "shop"), hist.shopDeliveries)
	})
	t.Run("NoSecrets", func(t *testing.T) {
		out := h.outputs.String()
		for _, s := range []string{signingSecret, oneTimeSecret} {
			if strings.Contains(out, s) {
				t.Fatalf("a secret of the run appears in an answer")
			}
		}
		if !strings.Contains(out, payloadMarker) {
			t.Fatalf("the secrets check saw no event data at all: it would not notice a leak")
		}
	})
}

// testShippedRoles checks the roles of the aggregated API's readers: no
// shipped role that grants event data aggregates into a built-in role, and
// the real kube-apiserver, asked with the real `kubectl auth can-i`,
// answers for users bound to view, edit, admin, the shipped roles or
// nothing as docs/api.md says.
func testShippedRoles(t *testing.T, h *harness, shipped []rbacv1.ClusterRole, kubeconfig map[string]string) {
	grantsData := func(r rbacv1.ClusterRole) bool {
		for _, rule := range r.Rules {
			if (slices.Contains(rule.APIGroups, v1alpha1.GroupName) || slices.Contains(rule.APIGroups, "*")) &&
				slices.ContainsFunc(rule.Resources, func(res string) bool {
					return res == "webhookevents/data" || res == "webhookevents/*" || res == "*" || res == "*/data"
				}) {
				return true
			}
		}
		return false
	}
	var dataRoles []string
	for _, r := range shipped {
		if !grantsData(r) {
			continue
		}
		dataRoles = append(dataRoles, r.Name)
		for label := range r.Labels {
			if strings.HasPrefix(label, "rbac.authorization.k8s.io/aggregate-to-") {
				t.Errorf("shipped ClusterRole %s grants event data and aggregates (%s)", r.Name, label)
			}
		}
	}
	if !slices.Contains(dataRoles, "hookkeeper-webhookevent-data-reader-role") {
		t.Fatalf("the event-data role is not among the shipped roles granting event data (%v): the check above checked nothing", dataRoles)
	}

	// canI answers yes or no as kubectl auth can-i prints it (exit status
	// 1 for no); anything else fails the test.
	canI := func(user string, args ...string) string {
		t.Helper()
		out, err := testenv.RunKubectl(h.cp.Kubectl, kubeconfig[user], "", append([]string{"auth", "can-i"}, args...)...)
		answer := strings.TrimSpace(out)
		if answer == "yes" && err == nil || answer == "no" && err != nil {
			return answer
		}
		t.Fatalf("kubectl auth can-i %s as %s: %q, %v", strings.Join(args, " "), user, out, err)
		return ""
	}
	listDeliveries := []string{"list", "deliveries." + v1alpha1.GroupName, "-n", "shop"}
	getEvents := []string{"get", "webhookevents." + v1alpha1.GroupName, "-n", "shop"}
	getData := []string{"get", "webhookevents." + v1alpha1.GroupName, "--subresource=data", "-n", "shop"}
	elsewhere := []string{"list", "deliveries." + v1alpha1.GroupName, "-n", "other"}
	for _, c := range []struct {
		user string
		args []string
		want string
	}{
		{"viewer", listDeliveries, "yes"}, {"viewer", getEvents, "yes"}, {"viewer", getData, "no"}, {"viewer", elsewhere, "no"},
		{"editor", listDeliveries, "yes"}, {"editor", getData, "no"},
		{"nsadmin", listDeliveries, "yes"}, {"nsadmin", getData, "no"},
		{"historian", listDeliveries, "yes"}, {"historian", getEvents, "yes"}, {"historian", getData, "no"},
		{"reader", listDeliveries, "yes"}, {"reader", getData, "yes"}, {"reader", elsewhere, "no"},
		{"nobody", listDeliveries, "no"}, {"nobody", getEvents, "no"}, {"nobody", getData, "no"},
	} {
		if got := canI(c.user, c.args...); got != c.want {
			t.Errorf("kubectl auth can-i %s as %s: %s, want %s", strings.Join(c.args, " "), c.user, got, c.want)
		}
	}
}

// testThroughKubeAPIServer reads with the real kubectl pointed at
// kube-apiserver, which proxies to the server through the APIService with
// its front-proxy client certificate: users bound to view read deliveries
// and events without data, the event-data role adds the data, and a user
// with no binding is refused.
func testThroughKubeAPIServer(t *testing.T, h *harness, hist history, kubeconfig map[string]string) {
	run := func(user string, args ...string) (string, error) {
		t.Helper()
		out, err := testenv.RunKubectl(h.cp.Kubectl, kubeconfig[user], "", args...)
		h.outputs.WriteString(out)
		return out, err
	}
	for _, user := range []string{"viewer", "editor", "nsadmin", "historian", "reader"} {
		out, err := run(user, "get", "deliveries", "-n", "shop", "-o", "jsonpath={.items[*].metadata.name}")
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		got := strings.Fields(out)
		slices.Sort(got)
		wantNames(t, user+" through kube-apiserver", got, hist.shopDeliveries)
		out, err = run(user, "get", "webhookevent", hist.paidEvent, "-n", "shop", "-o", "json")
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		if reads := strings.Contains(out, payloadMarker); reads != (user == "reader") {
			t.Errorf("%s reads event data through kube-apiserver: %v", user, reads)
		}
	}
	if out, err := run("nobody", "get", "deliveries", "-n", "shop"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("nobody lists deliveries through kube-apiserver: %v\n%s", err, out)
	}
	if out, err := run("viewer", "get", "deliveries", "-n", "other"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("the viewer of shop lists other's deliveries through kube-apiserver: %v\n%s", err, out)
	}
}

// bind binds subject to the ClusterRole role in shop.
func bind(t *testing.T, ctx context.Context, cs kubernetes.Interface, role string, subject rbacv1.Subject) {
	t.Helper()
	if _, err := cs.RbacV1().RoleBindings("shop").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role + "-" + subject.Name, Namespace: "shop"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{subject},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// servedSerial returns the serial number of the certificate the server
// presents.
func servedSerial(t *testing.T, h *harness) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", h.cp.Addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reading the served certificate
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// testPagingWhileWriting pages through a namespace with limit/continue
// while new deliveries are written between pages: every delivery that
// existed at the start appears exactly once.
func testPagingWhileWriting(t *testing.T, h *harness, store ledger.Store) {
	ctx := t.Context()
	now := time.Now()
	if _, err := store.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{Now: now, Endpoint: ledger.Endpoint{
		ID: "paging/all", Namespace: "paging", Name: "all", URL: "https://receiver.example/all", EventTypes: []string{"*"},
		Secrets: []ledger.SigningSecret{{Value: sensitive.Bytes(signingSecret)}}, AckMode: ledger.AckResponse,
	}}); err != nil {
		t.Fatal(err)
	}
	publish := func(at time.Time) {
		data := []byte(`{}`)
		if _, err := store.EventInsertMany(ctx, []*ledger.EventInsertParams{{ID: ledger.NewID("evt", at), Namespace: "paging",
			Type: "t", Data: data, BodyHash: data, Now: at}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 23 {
		publish(now.Add(time.Duration(i) * time.Millisecond))
	}
	before := h.names("admin", "get", "deliveries", "-n", "paging")
	if len(before) != 23 {
		t.Fatalf("%d deliveries before paging, want 23", len(before))
	}
	kc, err := clientcmd.BuildConfigFromFlags("", h.kubeconfig["admin"])
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(kc)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	cont, pages := "", 0
	for {
		url := fmt.Sprintf("%s/apis/delivery.hookkeeper.dev/v1alpha1/namespaces/paging/deliveries?limit=4&continue=%s", h.cp.URL(), cont)
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		var list v1alpha1.DeliveryList
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("page %d: %d %v", pages, resp.StatusCode, err)
		}
		if len(list.Items) > 4 {
			t.Fatalf("page of %d items with limit 4", len(list.Items))
		}
		for _, d := range list.Items {
			seen[d.Name]++
		}
		pages++
		// A new event lands between the pages.
		publish(time.Now().Add(time.Duration(pages) * time.Millisecond))
		if cont = list.Continue; cont == "" {
			break
		}
		if pages > 100 {
			t.Fatal("paging does not end")
		}
	}
	for _, id := range before {
		if seen[id] != 1 {
			t.Fatalf("delivery %s seen %d times across %d pages", id, seen[id], pages)
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("delivery %s seen %d times", id, n)
		}
	}
	if pages < 6 {
		t.Fatalf("only %d pages of 4 for at least 23 deliveries", pages)
	}
}

// testFrontProxy sends what kube-apiserver's aggregator sends: a client
// certificate of the request-header CA with an allowed name, and the
// X-Remote-* headers. Without that certificate the headers mean nothing.
func testFrontProxy(t *testing.T, h *harness) {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(h.cp.ServingCA.PEM)
	client := func(cn string, ca *testenv.CA) *http.Client {
		cfg := &tls.Config{RootCAs: roots}
		if ca != nil {
			c, k := issue(t, ca, cn, 10, false)
			pair, err := tls.X509KeyPair(c, k)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
	}
	get := func(c *http.Client, ns, user string, groups ...string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/apis/delivery.hookkeeper.dev/v1alpha1/namespaces/%s/deliveries", h.cp.URL(), ns), nil)
		req.Header.Set("X-Remote-User", user)
		for _, g := range groups {
			req.Header.Add("X-Remote-Group", g)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	proxy := client(testenv.FrontProxyClientName, h.cp.FrontProxyCA)
	rogue, err := testenv.NewCA("rogue")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what   string
		client *http.Client
		ns     string
		user   string
		groups []string
		want   int
	}{
		{"proxied viewer in shop", proxy, "shop", "viewer", []string{"system:authenticated"}, http.StatusOK},
		{"proxied viewer in other", proxy, "other", "viewer", []string{"system:authenticated"}, http.StatusForbidden},
		{"proxied nobody", proxy, "shop", "nobody", []string{"system:authenticated"}, http.StatusForbidden},
		{"proxied masters", proxy, "other", "someone", []string{"system:masters"}, http.StatusOK},
		// Forged headers claim system:masters: a 403 means they were ignored
		// and the caller is anonymous; a name not allowed is refused outright.
		{"forged headers without a certificate", client("", nil), "other", "admin", []string{"system:masters"}, http.StatusForbidden},
		{"forged headers, certificate of another CA", client(testenv.FrontProxyClientName, rogue), "other", "viewer", []string{"system:masters"}, http.StatusForbidden},
		{"forged headers, request-header CA but a name not allowed", client("not-the-proxy", h.cp.FrontProxyCA), "other", "admin", []string{"system:masters"}, http.StatusUnauthorized},
	} {
		t.Run(c.what, func(t *testing.T) {
			if got := get(c.client, c.ns, c.user, c.groups...); got != c.want {
				t.Fatalf("status %d, want %d", got, c.want)
			}
		})
	}
}
