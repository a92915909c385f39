package webhookendpoint

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/internal/testutil"
)

var _ = Describe("RetryPolicy evidence", func() {
	It("shows what the schedule achieved, the advice, and writes nothing when nothing changed", func() {
		ns := newNamespace()
		p := &hookv1.RetryPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evid"},
			Spec: hookv1.RetryPolicySpec{
				Backoff:      hookv1.Backoff{Strategy: hookv1.BackoffFixed, InitialDelay: testutil.Dur("1s")},
				Horizon:      hookv1.Horizon{MaxAttempts: ptr.To[int32](3)},
				ReplayWindow: *testutil.Dur("1h"),
			},
		}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Eventually(reconciled(client.ObjectKeyFromObject(p))).Should(HaveField("Status.ObservedGeneration", p.Generation))
		rcv := newHookReceiver(200)
		ep := newEndpoint(ns, "ok", rcv.URL, func(s *hookv1.WebhookEndpointSpec) {
			s.RetryPolicyRef = &hookv1.LocalObjectReference{Name: "evid"}
		})
		Eventually(func(g Gomega) {
			var cur hookv1.WebhookEndpoint
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ep), &cur)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, hookv1.ConditionReady)).To(BeTrue())
		}).Should(Succeed())
		for range 3 {
			publishEvent(ns, "order.created", nil)
		}

		var policy hookv1.RetryPolicy
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &policy)).To(Succeed())
			g.Expect(policy.Status.Evidence).NotTo(BeNil())
			g.Expect(policy.Status.Evidence.Last24h.Settled).To(Equal(int64(3)))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		w := policy.Status.Evidence.Last24h
		Expect(w.FirstTry).To(Equal("100%"))
		Expect(w.Recovered).To(BeZero())
		Expect(w.P50TimeToDelivery).NotTo(BeEmpty())
		fit := meta.FindStatusCondition(policy.Status.Conditions, hookv1.ConditionHorizonFit)
		Expect(fit).NotTo(BeNil())
		Expect(fit.Status).To(Equal(metav1.ConditionUnknown))
		Expect(fit.Reason).To(Equal("InsufficientEvidence"))
		Expect(fit.Message).To(ContainSubstring("3 deliveries settled"))

		Eventually(func(g Gomega) {
			var cur hookv1.WebhookEndpoint
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ep), &cur)).To(Succeed())
			g.Expect(cur.Status.Evidence).NotTo(BeNil())
			g.Expect(cur.Status.Evidence.Last7d.Settled).To(Equal(int64(3)))
			g.Expect(cur.Status.Evidence.Last7d.FirstTry).To(Equal("100%"))
		}).WithTimeout(30 * time.Second).Should(Succeed())

		// Two resyncs later nothing changed, so nothing was written.
		rv := policy.ResourceVersion
		Consistently(func(g Gomega) {
			var cur hookv1.RetryPolicy
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &cur)).To(Succeed())
			g.Expect(cur.ResourceVersion).To(Equal(rv))
		}).WithTimeout(2 * suiteResync).WithPolling(500 * time.Millisecond).Should(Succeed())
	})
})
