package webhookendpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/internal/testutil"
	"github.com/hookkeeper/hookkeeper/controllers/signingsecret"
	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// hookReceiver is a real HTTP server on loopback that answers with status()
// and checks every request's Standard Webhooks signature against each of
// its named sets of secrets, as a receiver that knows only those would.
type hookReceiver struct {
	*httptest.Server
	status func() int

	mu       sync.Mutex
	verifier map[string][]sensitive.Bytes
	received []receivedHook
}

type receivedHook struct {
	ID         string
	Signatures int
	// Verified says, per named set of secrets, whether the signature
	// verified with it.
	Verified map[string]bool
}

func newHookReceiver(status int) *hookReceiver {
	r := &hookReceiver{status: func() int { return status }, verifier: map[string][]sensitive.Bytes{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		id, ts, sig := req.Header.Get(signing.HeaderID), req.Header.Get(signing.HeaderTimestamp), req.Header.Get(signing.HeaderSignature)
		r.mu.Lock()
		got := receivedHook{ID: id, Signatures: len(strings.Fields(sig)), Verified: map[string]bool{}}
		for name, secrets := range r.verifier {
			got.Verified[name] = signing.Verify(secrets, id, ts, sig, body, time.Now(), 0) == nil
		}
		r.received = append(r.received, got)
		r.mu.Unlock()
		w.WriteHeader(r.status())
	}))
	DeferCleanup(r.Close)
	return r
}

// verifyWith makes the receiver check signatures with secrets, as name.
func (r *hookReceiver) verifyWith(name string, secrets ...sensitive.Bytes) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.verifier[name] = secrets
}

// hook returns what the receiver got for an event, and whether it got it.
func (r *hookReceiver) hook(eventID string) (receivedHook, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.received {
		if h.ID == eventID {
			return h, true
		}
	}
	return receivedHook{}, false
}

func (r *hookReceiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.received)
}

// publishEvent ingests an event through the engine, as the HTTP API would.
func publishEvent(ns, typ string, secrets map[string]string) string {
	now := time.Now()
	params := &ledger.EventInsertParams{
		ID: ledger.NewID("evt", now), Namespace: ns, Type: typ, Data: json.RawMessage(`{"order":42}`), Now: now,
	}
	if len(secrets) > 0 {
		b, err := json.Marshal(secrets)
		Expect(err).NotTo(HaveOccurred())
		params.Secrets = sensitive.Bytes(b)
		for name := range secrets {
			params.SecretNames = append(params.SecretNames, name)
		}
	}
	res, err := eng.Publish(ctx, params)
	Expect(err).NotTo(HaveOccurred())
	Expect(res.Err).NotTo(HaveOccurred())
	return res.Event.ID
}

func newEndpoint(ns, name, url string, mutate ...func(*hookv1.WebhookEndpointSpec)) *hookv1.WebhookEndpoint {
	ep := &hookv1.WebhookEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       hookv1.WebhookEndpointSpec{URL: url, EventTypes: []hookv1.EventTypePattern{"*"}},
	}
	for _, m := range mutate {
		m(&ep.Spec)
	}
	Expect(k8sClient.Create(ctx, ep)).To(Succeed())
	return ep
}

// fastPolicy retries every 100ms, up to attempts in all. Its circuit
// breaker is off: the specs that use it count attempts and exhaustions,
// which an open breaker would hold once a slow run's failures spanned its
// minute (retrypolicy.Breaker's spec has its own).
func fastPolicy(ns, name string, attempts int32) *hookv1.RetryPolicy {
	p := &hookv1.RetryPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: hookv1.RetryPolicySpec{
			Backoff:        hookv1.Backoff{Strategy: hookv1.BackoffFixed, InitialDelay: testutil.Dur("100ms"), JitterPercent: ptr.To[int32](0)},
			Horizon:        hookv1.Horizon{MaxAttempts: ptr.To(attempts)},
			AttemptTimeout: testutil.Dur("5s"),
			ReplayWindow:   *testutil.Dur("1h"),
			CircuitBreaker: &hookv1.CircuitBreaker{Disabled: true},
		},
	}
	Expect(k8sClient.Create(ctx, p)).To(Succeed())
	return p
}

func getEndpoint(g Gomega, key client.ObjectKey) *hookv1.WebhookEndpoint {
	var ep hookv1.WebhookEndpoint
	g.Expect(k8sClient.Get(ctx, key, &ep)).To(Succeed())
	return &ep
}

// condition returns the endpoint's condition of type t once its status
// describes its current generation.
func condition(g Gomega, key client.ObjectKey, t string) *metav1.Condition {
	ep := getEndpoint(g, key)
	g.Expect(ep.Status.ObservedGeneration).To(Equal(ep.Generation))
	c := meta.FindStatusCondition(ep.Status.Conditions, t)
	g.Expect(c).NotTo(BeNil(), "no %s condition", t)
	return c
}

func expectReady(key client.ObjectKey) *hookv1.WebhookEndpoint {
	var ep *hookv1.WebhookEndpoint
	Eventually(func(g Gomega) {
		c := condition(g, key, hookv1.ConditionReady)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		ep = getEndpoint(g, key)
	}).WithTimeout(20 * time.Second).Should(Succeed())
	return ep
}

func registered(key client.ObjectKey) (ledger.Endpoint, error) {
	return eng.Endpoint(ctx, ledger.EndpointID(key.Namespace, key.Name))
}

func stats(key client.ObjectKey) ledger.EndpointStats {
	st, err := eng.EndpointStats(ctx, ledger.EndpointID(key.Namespace, key.Name))
	Expect(err).NotTo(HaveOccurred())
	return st
}

// exhaustionEventsOf lists the DeliveriesExhausted Events of an endpoint.
func exhaustionEventsOf(g Gomega, key client.ObjectKey) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(k8sClient.List(ctx, &list, client.InNamespace(key.Namespace))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == key.Name && e.Regarding.Kind == "WebhookEndpoint" && e.Reason == hookv1.ReasonDeliveriesExhausted {
			out = append(out, e)
		}
	}
	return out
}

func secretValue(key client.ObjectKey, dataKey string) sensitive.Bytes {
	var s corev1.Secret
	Expect(k8sClient.Get(ctx, key, &s)).To(Succeed())
	return sensitive.Bytes(s.Data[dataKey])
}

var _ = Describe("WebhookEndpoint controller", func() {
	It("generates an owned whsec_ signing secret once, and never shows it", func() {
		ns := newNamespace()
		rcv := newHookReceiver(http.StatusNoContent)
		ep := newEndpoint(ns, "orders", rcv.URL)
		key := client.ObjectKeyFromObject(ep)
		got := expectReady(key)
		Expect(got.Status.SigningSecretName).To(Equal("orders-signing"))
		Expect(got.Finalizers).To(ContainElement("hookkeeper.dev/endpoint"))

		var s corev1.Secret
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders-signing"}, &s)).To(Succeed())
		owner := metav1.GetControllerOf(&s)
		Expect(owner).NotTo(BeNil())
		Expect(owner.UID).To(Equal(got.UID))
		Expect(owner.Kind).To(Equal("WebhookEndpoint"))
		value := s.Data["signingSecret"]
		Expect(string(value)).To(HavePrefix("whsec_"))
		_, err := signing.ParseSecret(value)
		Expect(err).NotTo(HaveOccurred())

		cfg, err := registered(key)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Secrets).To(HaveLen(1))
		Expect(signingsecret.Same(cfg.Secrets[0].Value, value)).To(BeTrue(), "the engine signs with another secret")
		Expect(cfg.URL).To(Equal(rcv.URL))

		// A spec change re-registers but reuses the secret.
		Eventually(func(g Gomega) {
			cur := getEndpoint(g, key)
			cur.Spec.EventTypes = []hookv1.EventTypePattern{"order.*"}
			g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			cfg, err := registered(key)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.EventTypes).To(Equal([]string{"order.*"}))
		}).Should(Succeed())
		Expect(secretValue(client.ObjectKey{Namespace: ns, Name: "orders-signing"}, "signingSecret")).To(Equal(sensitive.Bytes(value)))

		// Deliveries verify with it.
		rcv.verifyWith("generated", value)
		id := publishEvent(ns, "order.created", nil)
		Eventually(func() bool { h, ok := rcv.hook(id); return ok && h.Verified["generated"] }).WithTimeout(10 * time.Second).Should(BeTrue())

		// The value appears nowhere in the endpoint or its Events.
		endpointJSON, err := json.Marshal(getEndpoint(Default, key))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(endpointJSON)).NotTo(ContainSubstring(strings.TrimPrefix(string(value), "whsec_")))
		var events eventsv1.EventList
		Expect(k8sClient.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		for _, e := range events.Items {
			Expect(e.Note).NotTo(ContainSubstring(strings.TrimPrefix(string(value), "whsec_")))
		}
	})

	It("is not Ready while its RetryPolicy is missing, registers once it appears, and keeps it when it goes", func() {
		ns := newNamespace()
		ep := newEndpoint(ns, "billing", "http://127.0.0.1:1/", func(s *hookv1.WebhookEndpointSpec) {
			s.RetryPolicyRef = &hookv1.LocalObjectReference{Name: "later"}
		})
		key := client.ObjectKeyFromObject(ep)
		Eventually(func(g Gomega) {
			c := condition(g, key, hookv1.ConditionReady)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(hookv1.ReasonRetryPolicyNotFound))
			g.Expect(c.Message).To(ContainSubstring(`RetryPolicy "later" not found`))
			g.Expect(c.Message).To(ContainSubstring("not registered with the delivery engine"))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		_, err := registered(key)
		Expect(errors.Is(err, ledger.ErrNotFound)).To(BeTrue(), "registered without its policy: %v", err)

		// The policy appears: the watch registers the endpoint.
		policy := fastPolicy(ns, "later", 7)
		got := expectReady(key)
		Expect(got.Status.RetryPolicyName).To(Equal("later"))
		Expect(meta.FindStatusCondition(got.Status.Conditions, hookv1.ConditionReady).Message).To(ContainSubstring(`RetryPolicy "later"`))
		cfg, err := registered(key)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Policy.Backoff.MaxAttempts).To(Equal(int32(7)))
		Expect(cfg.Policy.ReplayWindow).To(Equal(time.Hour))

		// The policy goes: the endpoint says so and the engine keeps it.
		Expect(k8sClient.Delete(ctx, policy)).To(Succeed())
		Eventually(func(g Gomega) {
			c := condition(g, key, hookv1.ConditionReady)
			g.Expect(c.Reason).To(Equal(hookv1.ReasonRetryPolicyNotFound))
			g.Expect(c.Message).To(ContainSubstring("keeps using the endpoint's previous configuration"))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		cfg, err = registered(key)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Policy.Backoff.MaxAttempts).To(Equal(int32(7)))
	})

	It("keeps the previous generated secret valid during a rotation: both sign", func() {
		ns := newNamespace()
		rcv := newHookReceiver(http.StatusOK)
		ep := newEndpoint(ns, "rotating", rcv.URL, func(s *hookv1.WebhookEndpointSpec) {
			s.SigningRotationGracePeriod = testutil.Dur("1h")
		})
		key := client.ObjectKeyFromObject(ep)
		expectReady(key)
		secretKey := client.ObjectKey{Namespace: ns, Name: "rotating-signing"}
		oldValue := secretValue(secretKey, "signingSecret")
		rcv.verifyWith("old", oldValue)

		// Rotate by writing a new value into the generated Secret.
		newValue, err := signing.GenerateSecret()
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			var s corev1.Secret
			g.Expect(k8sClient.Get(ctx, secretKey, &s)).To(Succeed())
			s.Data["signingSecret"] = newValue
			g.Expect(k8sClient.Update(ctx, &s)).To(Succeed())
		}).Should(Succeed())
		rcv.verifyWith("new", newValue)

		Eventually(func(g Gomega) {
			cfg, err := registered(key)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.Secrets).To(HaveLen(2))
			g.Expect(signingsecret.Same(cfg.Secrets[0].Value, newValue)).To(BeTrue())
			g.Expect(signingsecret.Same(cfg.Secrets[1].Value, oldValue)).To(BeTrue())
			g.Expect(cfg.Secrets[1].NotAfter).To(BeTemporally("~", time.Now().Add(time.Hour), time.Minute))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(secretValue(secretKey, "previousSigningSecret")).To(Equal(oldValue))
		Expect(secretValue(secretKey, "rotatedAt")).NotTo(BeEmpty())
		Eventually(func(g Gomega) {
			g.Expect(condition(g, key, hookv1.ConditionReady).Message).To(ContainSubstring("previous one stays valid until"))
		}).Should(Succeed())

		id := publishEvent(ns, "order.created", nil)
		var h receivedHook
		Eventually(func() bool { var ok bool; h, ok = rcv.hook(id); return ok }).WithTimeout(10 * time.Second).Should(BeTrue())
		Expect(h.Signatures).To(Equal(2))
		Expect(h.Verified).To(HaveKeyWithValue("old", true), "a receiver that still has the old secret rejects the delivery")
		Expect(h.Verified).To(HaveKeyWithValue("new", true), "a receiver with the new secret rejects the delivery")
	})

	It("resolves a user-managed secret, refuses invalid ones without showing them, and keeps the previous one on rotation", func() {
		ns := newNamespace()
		rcv := newHookReceiver(http.StatusOK)
		ep := newEndpoint(ns, "managed", rcv.URL, func(s *hookv1.WebhookEndpointSpec) {
			s.SigningSecretRef = &hookv1.SecretKeyReference{Name: "partner-secret", Key: "token"}
		})
		key := client.ObjectKeyFromObject(ep)
		Eventually(func(g Gomega) {
			g.Expect(condition(g, key, hookv1.ConditionReady).Reason).To(Equal(hookv1.ReasonSigningSecretNotFound))
		}).WithTimeout(20 * time.Second).Should(Succeed())

		// An invalid value is refused, and not repeated.
		invalid := "whsec_dG9vLXNob3J0LXRvLWJlLWEta2V5"
		user := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "partner-secret"},
			Data:       map[string][]byte{"token": []byte(invalid)},
		}
		Expect(k8sClient.Create(ctx, user)).To(Succeed())
		Eventually(func(g Gomega) {
			c := condition(g, key, hookv1.ConditionReady)
			g.Expect(c.Reason).To(Equal(hookv1.ReasonSigningSecretInvalid))
			g.Expect(c.Message).To(ContainSubstring(`Secret "partner-secret" key "token"`))
			g.Expect(c.Message).NotTo(ContainSubstring("dG9vLXNob3J0"))
		}).WithTimeout(20 * time.Second).Should(Succeed())

		// A valid value (with a trailing newline, as files often have).
		oldValue, err := signing.GenerateSecret()
		Expect(err).NotTo(HaveOccurred())
		user.Data["token"] = append(append([]byte(nil), oldValue...), '\n')
		Expect(k8sClient.Update(ctx, user)).To(Succeed())
		got := expectReady(key)
		Expect(got.Status.SigningSecretName).To(Equal("partner-secret"))
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "managed-signing"}, &corev1.Secret{}))).
			To(BeTrue(), "a Secret was generated although one is referenced")

		// Rotation: the user writes a new value; the old one is kept in a
		// Secret of the operator's, owned by the endpoint.
		newValue, err := signing.GenerateSecret()
		Expect(err).NotTo(HaveOccurred())
		user.Data["token"] = newValue
		Expect(k8sClient.Update(ctx, user)).To(Succeed())
		rcv.verifyWith("old", oldValue)
		rcv.verifyWith("new", newValue)
		Eventually(func(g Gomega) {
			cfg, err := registered(key)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.Secrets).To(HaveLen(2))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		var prev corev1.Secret
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "managed-signing-previous"}, &prev)).To(Succeed())
		Expect(metav1.IsControlledBy(&prev, got)).To(BeTrue())
		Expect(sensitive.Bytes(prev.Data["previousSigningSecret"])).To(Equal(oldValue))

		id := publishEvent(ns, "order.created", nil)
		var h receivedHook
		Eventually(func() bool { var ok bool; h, ok = rcv.hook(id); return ok }).WithTimeout(10 * time.Second).Should(BeTrue())
		Expect(h.Verified).To(HaveKeyWithValue("old", true))
		Expect(h.Verified).To(HaveKeyWithValue("new", true))
	})

	It("counts real deliveries and does not write its status or register in a loop", func() {
		ns := newNamespace()
		rcv := newHookReceiver(http.StatusNoContent)
		ep := newEndpoint(ns, "counted", rcv.URL)
		key := client.ObjectKeyFromObject(ep)
		expectReady(key)
		for range 3 {
			publishEvent(ns, "order.created", nil)
		}
		Eventually(func(g Gomega) {
			got := getEndpoint(g, key)
			g.Expect(got.Status.Deliveries.Delivered).To(Equal(int64(3)))
			g.Expect(got.Status.Deliveries.Pending).To(BeZero())
			g.Expect(got.Status.LastSuccessTime).NotTo(BeNil())
			g.Expect(got.Status.LastFailureTime).To(BeNil())
			h := meta.FindStatusCondition(got.Status.Conditions, hookv1.ConditionHealthy)
			g.Expect(h).NotTo(BeNil())
			g.Expect(h.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(h.Reason).To(Equal(hookv1.ReasonNoFailures))
			x := meta.FindStatusCondition(got.Status.Conditions, hookv1.ConditionDeliveriesExhausted)
			g.Expect(x).NotTo(BeNil())
			g.Expect(x.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(x.Reason).To(Equal(hookv1.ReasonNoneUnresolved))
		}).WithTimeout(4 * suiteResync).Should(Succeed())
		Expect(rcv.count()).To(Equal(3))

		// Reconciles that learn nothing new write nothing and register
		// nothing: poke the controller a few times through the exhaustion
		// channel and across polls of the ledger's counters.
		rv := getEndpoint(Default, key).ResourceVersion
		cfg, err := registered(key)
		Expect(err).NotTo(HaveOccurred())
		for range 5 {
			exhaustion.Notify(engine.ExhaustedNotice{Delivery: ledger.Delivery{EndpointID: ledger.EndpointID(ns, "counted")}})
		}
		Consistently(func(g Gomega) {
			g.Expect(getEndpoint(g, key).ResourceVersion).To(Equal(rv))
			again, err := registered(key)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again.Version).To(Equal(cfg.Version))
		}).WithTimeout(suiteResync + time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	})

	It("shows exhausted deliveries within seconds, with the count, the oldest and what to do, and one Event for a thousand", func() {
		ns := newNamespace()
		rcv := newHookReceiver(http.StatusServiceUnavailable)
		fastPolicy(ns, "once", 1)
		ep := newEndpoint(ns, "failing", rcv.URL, func(s *hookv1.WebhookEndpointSpec) {
			s.RetryPolicyRef = &hookv1.LocalObjectReference{Name: "once"}
		})
		key := client.ObjectKeyFromObject(ep)
		expectReady(key)

		// One event carrying a one-time secret.
		first := publishEvent(ns, "fan.confirmation_requested", map[string]string{"confirmToken": "tok_9a2b"})
		var got *hookv1.WebhookEndpoint
		Eventually(func(g Gomega) {
			got = getEndpoint(g, key)
			c := meta.FindStatusCondition(got.Status.Conditions, hookv1.ConditionDeliveriesExhausted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}).WithTimeout(15*time.Second).WithPolling(100*time.Millisecond).Should(Succeed(), "the exhaustion did not reach the status within seconds")

		list, err := eng.ExhaustedList(ctx, &ledger.ExhaustedListParams{EndpointID: ledger.EndpointID(ns, "failing")})
		Expect(err).NotTo(HaveOccurred())
		Expect(list).To(HaveLen(1))
		c := meta.FindStatusCondition(got.Status.Conditions, hookv1.ConditionDeliveriesExhausted)
		Expect(c.Reason).To(Equal(hookv1.ReasonUnresolvedDeliveries))
		Expect(c.Message).To(ContainSubstring("1 exhausted delivery is unresolved"))
		Expect(c.Message).To(ContainSubstring(list[0].Delivery.ID))
		Expect(c.Message).To(ContainSubstring("create a DeliveryRecovery with action Auto"))
		Expect(got.Status.Deliveries.ExhaustedUnresolved).To(Equal(int64(1)))
		Expect(got.Status.RecentExhausted).To(HaveLen(1))
		item := got.Status.RecentExhausted[0]
		Expect(item.EventID).To(Equal(first))
		Expect(item.EventType).To(Equal("fan.confirmation_requested"))
		Expect(item.Reason).To(Equal("MaxAttempts"))
		Expect(item.LastError).To(Equal("HTTP 503"))
		// The store scrubs the one-time secret when the last pending
		// delivery ends (grace period 0): then only a reissue can help.
		wantRecovery := hookv1.RecoveryRetry
		if list[0].SecretsScrubbed {
			wantRecovery = hookv1.RecoveryReissue
		}
		By(fmt.Sprintf("the ledger reports secretsScrubbed=%v: recovery %s", list[0].SecretsScrubbed, wantRecovery))
		Expect(item.Recovery).To(Equal(wantRecovery))
		Expect(got.Status.LastFailureReason).To(Equal("HTTP 503"))
		h := meta.FindStatusCondition(got.Status.Conditions, hookv1.ConditionHealthy)
		Expect(h.Status).To(Equal(metav1.ConditionFalse))
		Expect(h.Message).To(ContainSubstring("HTTP 503"))
		Expect(strings.Contains(toJSON(got), "tok_9a2b")).To(BeFalse(), "the event's secret reached the status")

		// Many more exhaustions: the count grows, one Event says so.
		const more = 999
		for range more {
			publishEvent(ns, "order.created", nil)
		}
		Eventually(func(g Gomega) {
			got := getEndpoint(g, key)
			g.Expect(got.Status.Deliveries.ExhaustedUnresolved).To(Equal(int64(more + 1)))
			g.Expect(got.Status.RecentExhausted).To(HaveLen(recentExhaustedMax))
			g.Expect(got.Status.RecentExhausted[recentExhaustedMax-1].EventType).To(Equal("order.created"))
			c := meta.FindStatusCondition(got.Status.Conditions, hookv1.ConditionDeliveriesExhausted)
			g.Expect(c.Message).To(ContainSubstring("1000 exhausted deliveries are unresolved: the oldest, " + list[0].Delivery.ID))
		}).WithTimeout(time.Minute).Should(Succeed())
		Expect(rcv.count()).To(Equal(more + 1))

		Eventually(func(g Gomega) []eventsv1.Event { return exhaustionEventsOf(g, key) }).Should(HaveLen(1))
		Consistently(func(g Gomega) []eventsv1.Event { return exhaustionEventsOf(g, key) }).WithTimeout(3 * time.Second).Should(HaveLen(1))
		e := exhaustionEventsOf(Default, key)[0]
		Expect(e.Type).To(Equal(corev1.EventTypeWarning))
		Expect(e.Note).To(ContainSubstring("exhausted and unresolved"))
		Expect(e.Note).To(ContainSubstring(list[0].Delivery.ID))

		// kubectl get -o wide adds the columns that say why an endpoint is
		// in trouble: each of them shows a value for this endpoint.
		kubectl, err := testenv.Kubectl()
		Expect(err).NotTo(HaveOccurred())
		kubeconfig, err := testenv.Kubeconfig(env, GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		table := serverTable(key)
		var wide []string
		for i, col := range table.ColumnDefinitions {
			if col.Priority == 0 {
				continue
			}
			wide = append(wide, col.Name)
			Expect(table.Rows).To(HaveLen(1))
			// A number (0 included) is a value; a string must not be blank.
			cell := table.Rows[0].Cells[i]
			Expect(cell).NotTo(BeNil(), "-o wide column %q is missing for an endpoint that failed", col.Name)
			if text, ok := cell.(string); ok {
				Expect(text).NotTo(BeEmpty(), "-o wide column %q is empty for an endpoint that failed", col.Name)
			}
		}
		Expect(wide).To(ConsistOf("Healthy", "Last Failure", "Recovered", "Exhausted 24h", "Budget Limited", "Policy"))
		out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "-n", ns, "get", "whep", "failing", "-o", "wide").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(string(out)).To(MatchRegexp(`NAME\s+URL\s+READY\s+HEALTHY\s+BREAKER\s+PENDING\s+EXHAUSTED\s+LAST SUCCESS\s+LAST FAILURE\s+FIRST TRY\s+RECOVERED\s+EXHAUSTED 24H\s+BUDGET LIMITED\s+POLICY\s+AGE`))
		Expect(string(out)).To(MatchRegexp(`failing\s+\S+\s+True\s+False\s+Closed\s+\d+\s+1000\s+HTTP 503\s+0%\s+0\s+1000\s+False\s+once\s+`), "no success yet: LAST SUCCESS is blank")

		// The condition's advice is a command an admin can paste: run it
		// with the real kubectl and it creates the DeliveryRecovery.
		c = meta.FindStatusCondition(getEndpoint(Default, key).Status.Conditions, hookv1.ConditionDeliveriesExhausted)
		command := regexp.MustCompile(`echo '[^']*' \| kubectl create -f -`).FindString(c.Message)
		Expect(command).NotTo(BeEmpty(), "the message has no command to paste: %s", c.Message)
		sh := exec.Command("sh", "-c", strings.Replace(command, "kubectl create", kubectl+" --kubeconfig "+kubeconfig+" create", 1))
		out, err = sh.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s\n%s", command, out)
		var recs hookv1.DeliveryRecoveryList
		Expect(k8sClient.List(ctx, &recs, client.InNamespace(ns))).To(Succeed())
		Expect(recs.Items).To(HaveLen(1))
		Expect(recs.Items[0].Spec.EndpointRef.Name).To(Equal("failing"))
		Expect(recs.Items[0].Spec.Action).To(Equal(hookv1.RecoveryModeAuto))
	})

	It("cancels pending deliveries when deleted, keeping their history", func() {
		ns := newNamespace()
		rcv := newHookReceiver(http.StatusOK)
		ep := newEndpoint(ns, "paused", rcv.URL, func(s *hookv1.WebhookEndpointSpec) { s.Paused = true })
		key := client.ObjectKeyFromObject(ep)
		expectReady(key)
		cfg, err := registered(key)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Paused).To(BeTrue())
		for range 3 {
			publishEvent(ns, "order.created", nil)
		}
		Eventually(func(g Gomega) {
			g.Expect(getEndpoint(g, key).Status.Deliveries.Pending).To(Equal(int64(3)))
		}).WithTimeout(4 * suiteResync).Should(Succeed())

		Expect(k8sClient.Delete(ctx, ep)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, key, &hookv1.WebhookEndpoint{}))
		}).WithTimeout(20 * time.Second).Should(BeTrue())
		st := stats(key)
		Expect(st.Cancelled).To(Equal(int64(3)))
		Expect(st.Pending).To(BeZero())
		_, err = registered(key)
		Expect(errors.Is(err, ledger.ErrNotFound)).To(BeTrue(), "still registered: %v", err)
		Expect(rcv.count()).To(BeZero())
	})

	It("leaves the RetryPolicy's count of endpoints working", func() {
		ns := newNamespace()
		p := fastPolicy(ns, "shared", 3)
		a := newEndpoint(ns, "a", "http://127.0.0.1:1/", func(s *hookv1.WebhookEndpointSpec) {
			s.RetryPolicyRef = &hookv1.LocalObjectReference{Name: "shared"}
		})
		newEndpoint(ns, "b", "http://127.0.0.1:1/", func(s *hookv1.WebhookEndpointSpec) {
			s.RetryPolicyRef = &hookv1.LocalObjectReference{Name: "shared"}
		})
		pkey := client.ObjectKeyFromObject(p)
		Eventually(reconciled(pkey)).WithTimeout(20 * time.Second).Should(HaveField("Status.Endpoints", int32(2)))
		expectReady(client.ObjectKeyFromObject(a))
		Expect(k8sClient.Delete(ctx, a)).To(Succeed())
		Eventually(reconciled(pkey)).WithTimeout(20 * time.Second).Should(HaveField("Status.Endpoints", int32(1)))
	})
})

func toJSON(v any) string {
	b, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

// serverTable is the endpoint as the API server prints it for kubectl get:
// every column of the CRD, with its priority (1 = only with -o wide).
func serverTable(key client.ObjectKey) *metav1.Table {
	GinkgoHelper()
	httpClient, err := rest.HTTPClientFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	url := fmt.Sprintf("%s/apis/hookkeeper.dev/v1alpha1/namespaces/%s/webhookendpoints/%s", strings.TrimSuffix(cfg.Host, "/"), key.Namespace, key.Name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := httpClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	var table metav1.Table
	Expect(json.NewDecoder(resp.Body).Decode(&table)).To(Succeed())
	return &table
}

var _ = Describe("an endpoint in a namespace being deleted", func() {
	It("does not re-create its Secrets, and says so without logging an error", func() {
		ns := newNamespace()
		rcv := newHookReceiver(http.StatusOK)
		generated := client.ObjectKeyFromObject(newEndpoint(ns, "generated", rcv.URL))
		first, err := signing.GenerateSecret()
		Expect(err).NotTo(HaveOccurred())
		userSecret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "user-secret"},
			Data:       map[string][]byte{"signingSecret": first.Reveal()},
		}
		Expect(k8sClient.Create(ctx, userSecret)).To(Succeed())
		referenced := client.ObjectKeyFromObject(newEndpoint(ns, "referenced", rcv.URL, func(s *hookv1.WebhookEndpointSpec) {
			s.SigningSecretRef = &hookv1.SecretKeyReference{Name: "user-secret"}
		}))
		expectReady(generated)
		expectReady(referenced)

		// The bare control plane has no namespace controller: the namespace
		// stays Terminating, and the API server refuses new objects in it.
		Expect(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Eventually(func(g Gomega) {
			var n corev1.Namespace
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
			g.Expect(n.Status.Phase).To(Equal(corev1.NamespaceTerminating))
		}).Should(Succeed())

		// Each Secret the controller would create: the generated one (its
		// Secret is gone) and the one remembering a rotation's previous
		// secret (the user's Secret changes).
		Expect(k8sClient.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "generated-signing"}})).To(Succeed())
		second, err := signing.GenerateSecret()
		Expect(err).NotTo(HaveOccurred())
		userSecret.Data["signingSecret"] = second.Reveal()
		Expect(k8sClient.Update(ctx, userSecret)).To(Succeed())

		for _, key := range []client.ObjectKey{generated, referenced} {
			Eventually(func(g Gomega) {
				c := condition(g, key, hookv1.ConditionReady)
				g.Expect(c.Reason).To(Equal(hookv1.ReasonNamespaceTerminating), c.Message)
				g.Expect(c.Message).To(ContainSubstring("is being deleted"))
			}).WithTimeout(20*time.Second).Should(Succeed(), key.Name)
		}
		var secrets corev1.SecretList
		Expect(k8sClient.List(ctx, &secrets, client.InNamespace(ns))).To(Succeed())
		for _, s := range secrets.Items {
			Expect(s.Name).To(Equal("user-secret"), "a Secret was created in the terminating namespace")
		}
		Expect(errorLog.containing(ns)).To(BeEmpty(), "a terminating namespace was logged as an error")
	})
})
