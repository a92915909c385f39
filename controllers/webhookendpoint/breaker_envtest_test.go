package webhookendpoint

import (
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/internal/testutil"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// tinyBreakerPolicy retries every 100ms and opens the breaker on 3
// failures in a row, probing after 1s, then every 2s.
func tinyBreakerPolicy(ns, name string) *hookv1.RetryPolicy {
	p := &hookv1.RetryPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: hookv1.RetryPolicySpec{
			Backoff:        hookv1.Backoff{Strategy: hookv1.BackoffFixed, InitialDelay: testutil.Dur("100ms"), JitterPercent: ptr.To[int32](0)},
			Horizon:        hookv1.Horizon{MaxAttempts: ptr.To[int32](1000)},
			AttemptTimeout: testutil.Dur("5s"),
			ReplayWindow:   *testutil.Dur("24h"),
			CircuitBreaker: &hookv1.CircuitBreaker{Failures: ptr.To[int32](3), MinDuration: testutil.Dur("0s"), ProbeInterval: testutil.Dur("1s"),
				MaxProbeInterval: testutil.Dur("2s"), Ramp: testutil.Dur("0s")},
		},
	}
	Expect(k8sClient.Create(ctx, p)).To(Succeed())
	return p
}

// eventsOf lists an endpoint's Events with reason.
func eventsOf(g Gomega, key client.ObjectKey, reason string) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(k8sClient.List(ctx, &list, client.InNamespace(key.Namespace))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == key.Name && e.Regarding.Kind == "WebhookEndpoint" && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// circuitSeries returns the endpoint's hookkeeper_endpoint_circuit_open
// series (its labels and value) and the openings counted for owner and
// reason, as the suite's registry holds them.
func circuitSeries(g Gomega, key client.ObjectKey, owner, reason string) (labels map[string]string, open float64, openings float64) {
	families, err := breakerRegistry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	labelsOf := func(m *dto.Metric) map[string]string {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		return l
	}
	series := 0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			l := labelsOf(m)
			switch f.GetName() {
			case "hookkeeper_endpoint_circuit_open":
				if l["endpoint"] == ledger.EndpointID(key.Namespace, key.Name) {
					labels, open = l, m.GetGauge().GetValue()
					series++
				}
			case "hookkeeper_endpoint_circuit_openings_total":
				if l["owner"] == owner && l["reason"] == reason {
					openings = m.GetCounter().GetValue()
				}
			}
		}
	}
	g.Expect(series).To(Equal(1), "the endpoint has one circuit series")
	return labels, open, openings
}

var _ = Describe("WebhookEndpoint circuit breaker", func() {
	It("opens on a failing receiver (CircuitOpen, one Warning Event naming the owner, the metric, kubectl wait), probes on request once, and closes when a probe succeeds", func() {
		ns := newNamespace()
		var up atomic.Bool
		rcv := newHookReceiver(0)
		rcv.status = func() int {
			if up.Load() {
				return 204
			}
			return 503
		}
		tinyBreakerPolicy(ns, "tiny")
		ep := newEndpoint(ns, "billing", rcv.URL, func(s *hookv1.WebhookEndpointSpec) {
			s.RetryPolicyRef = &hookv1.LocalObjectReference{Name: "tiny"}
			s.Owner = "team-payments"
		})
		key := client.ObjectKeyFromObject(ep)
		expectReady(key)
		Eventually(func(g Gomega) {
			c := condition(g, key, hookv1.ConditionCircuitOpen)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(hookv1.ReasonCircuitClosed))
			g.Expect(getEndpoint(g, key).Status.Breaker).To(Equal(&hookv1.CircuitBreakerStatus{State: hookv1.CircuitClosed}))
			labels, open, _ := circuitSeries(g, key, "team-payments", "Failing")
			g.Expect(open).To(BeZero())
			g.Expect(labels).To(Equal(map[string]string{"namespace": ns, "endpoint": ns + "/billing", "owner": "team-payments", "reason": ""}))
		}).Should(Succeed())

		kubectl, err := testenv.Kubectl()
		Expect(err).NotTo(HaveOccurred())
		kubeconfig, err := testenv.Kubeconfig(env, GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		wait := func(condition string) chan error {
			done := make(chan error, 1)
			go func() {
				_, err := testenv.RunKubectl(kubectl, kubeconfig, "", "-n", ns, "wait", "webhookendpoint/billing", "--for="+condition, "--timeout=60s")
				done <- err
			}()
			return done
		}
		opened := wait("condition=CircuitOpen")

		By("three failures in a row open it")
		publishEvent(ns, "invoice.paid", nil)
		var openedAt time.Time
		Eventually(func(g Gomega) {
			c := condition(g, key, hookv1.ConditionCircuitOpen)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(c.Reason).To(Equal(hookv1.ReasonCircuitFailing))
			g.Expect(c.Message).To(ContainSubstring("after 3 failed attempts in a row, the last: HTTP 503"))
			g.Expect(c.Message).To(ContainSubstring("kubectl hookkeeper probe billing -n " + ns))
			g.Expect(c.Message).To(HaveSuffix(". Owner: team-payments"))
			b := getEndpoint(g, key).Status.Breaker
			g.Expect(b.State).To(Equal(hookv1.CircuitOpen))
			g.Expect(b.Reason).To(Equal("Failing"))
			g.Expect(b.Openings).To(BeEquivalentTo(1))
			g.Expect(b.Failures).To(BeEquivalentTo(3))
			g.Expect(b.LastFailure).To(Equal("HTTP 503"))
			g.Expect(b.OpenedAt).NotTo(BeNil())
			openedAt = b.OpenedAt.Time
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Eventually(opened).WithTimeout(30*time.Second).Should(Receive(BeNil()), "kubectl wait --for=condition=CircuitOpen")

		Eventually(func(g Gomega) []eventsv1.Event { return eventsOf(g, key, hookv1.ReasonCircuitOpened) }).Should(HaveLen(1))
		e := eventsOf(Default, key, hookv1.ReasonCircuitOpened)[0]
		Expect(e.Type).To(Equal(corev1.EventTypeWarning))
		Expect(e.Note).To(ContainSubstring("after 3 failed attempts in a row"))
		Expect(e.Note).To(ContainSubstring("Owner: team-payments"))
		Eventually(func(g Gomega) {
			labels, open, openings := circuitSeries(g, key, "team-payments", "Failing")
			g.Expect(open).To(BeEquivalentTo(1))
			g.Expect(labels).To(Equal(map[string]string{"namespace": ns, "endpoint": ns + "/billing", "owner": "team-payments", "reason": "Failing"}))
			g.Expect(openings).To(BeEquivalentTo(1))
		}).Should(Succeed())

		By("failed probes and resyncs announce nothing more")
		Eventually(func(g Gomega) {
			g.Expect(getEndpoint(g, key).Status.Breaker.Probes).To(BeNumerically(">=", 2))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(eventsOf(g, key, hookv1.ReasonCircuitOpened)).To(HaveLen(1))
			_, _, openings := circuitSeries(g, key, "team-payments", "Failing")
			g.Expect(openings).To(BeEquivalentTo(1))
		}).WithTimeout(2 * suiteResync).Should(Succeed())
		b := getEndpoint(Default, key).Status.Breaker
		Expect(b.LastProbeResult).To(Equal("HTTP 503"))
		Expect(b.OpenedAt.Time).To(Equal(openedAt))

		By("a probe request is acted on once")
		requested := time.Now().UTC().Format(time.RFC3339Nano)
		patch := []byte(`{"metadata":{"annotations":{"` + hookv1.AnnotationProbeRequestedAt + `":"` + requested + `"}}}`)
		Expect(k8sClient.Patch(ctx, &hookv1.WebhookEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "billing"}},
			client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getEndpoint(g, key).Status.Breaker.ProbeRequest).To(Equal(requested))
			g.Expect(eventsOf(g, key, hookv1.ReasonProbeRequested)).To(HaveLen(1))
		}).Should(Succeed())
		Expect(eventsOf(Default, key, hookv1.ReasonProbeRequested)[0].Note).To(ContainSubstring("the next probe is due now"))
		// The same value again (a GitOps re-apply that carries it) asks
		// for nothing.
		Expect(k8sClient.Patch(ctx, &hookv1.WebhookEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "billing"}},
			client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		Consistently(func(g Gomega) []eventsv1.Event { return eventsOf(g, key, hookv1.ReasonProbeRequested) }).
			WithTimeout(2 * time.Second).Should(HaveLen(1))

		By("the receiver recovers: a probe succeeds and closes it")
		closed := wait("condition=CircuitOpen=false")
		up.Store(true)
		Eventually(func(g Gomega) {
			c := condition(g, key, hookv1.ConditionCircuitOpen)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse), c.Message)
			g.Expect(c.Reason).To(Equal(hookv1.ReasonProbeSucceeded))
			g.Expect(getEndpoint(g, key).Status.Breaker.State).To(Equal(hookv1.CircuitClosed))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Eventually(closed).WithTimeout(30*time.Second).Should(Receive(BeNil()), "kubectl wait --for=condition=CircuitOpen=false")
		Eventually(func(g Gomega) []eventsv1.Event { return eventsOf(g, key, hookv1.ReasonCircuitClosedEvent) }).Should(HaveLen(1))
		Expect(eventsOf(Default, key, hookv1.ReasonCircuitClosedEvent)[0].Type).To(Equal(corev1.EventTypeNormal))
		Eventually(func(g Gomega) {
			labels, open, openings := circuitSeries(g, key, "team-payments", "Failing")
			g.Expect(open).To(BeZero())
			g.Expect(labels["reason"]).To(BeEmpty())
			g.Expect(openings).To(BeEquivalentTo(1))
			g.Expect(stats(key).Delivered).To(BeEquivalentTo(1))
		}).Should(Succeed())

		// While it was open the receiver got nothing but the probes.
		got := getEndpoint(Default, key)
		Expect(rcv.count()).To(Equal(3+int(got.Status.Breaker.Probes)), "3 failures, then only probes (%d)", got.Status.Breaker.Probes)
		Expect(eventsOf(Default, key, hookv1.ReasonCircuitOpened)).To(HaveLen(1))
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, hookv1.ConditionReady)).To(BeTrue())

		By("deleting the endpoint drops its series")
		Expect(k8sClient.Delete(ctx, got)).To(Succeed())
		Eventually(func(g Gomega) {
			families, err := breakerRegistry.Gather()
			g.Expect(err).NotTo(HaveOccurred())
			for _, f := range families {
				for _, m := range f.GetMetric() {
					for _, l := range m.GetLabel() {
						g.Expect(l.GetValue()).NotTo(Equal(ns+"/billing"), "a series of the deleted endpoint")
					}
				}
			}
		}).Should(Succeed())
	})
})
