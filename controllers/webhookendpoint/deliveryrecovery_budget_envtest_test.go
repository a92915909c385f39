package webhookendpoint

import (
	"sync/atomic"
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

var _ = Describe("A DeliveryRecovery over its endpoint's retry budget", func() {
	It("sends what the budget allows, and says that the rest waits for it", func() {
		ns := newNamespace()
		var up atomic.Bool
		rcv := newHookReceiver(0)
		rcv.status = func() int {
			if up.Load() {
				return 204
			}
			return 503
		}
		// One attempt each, so that the originals exhaust without retries;
		// one retry or re-send per minute.
		policy := &hookv1.RetryPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "budgeted"},
			Spec: hookv1.RetryPolicySpec{
				Backoff:        hookv1.Backoff{Strategy: hookv1.BackoffFixed, InitialDelay: testutil.Dur("100ms"), JitterPercent: ptr.To[int32](0)},
				Horizon:        hookv1.Horizon{MaxAttempts: ptr.To[int32](1)},
				AttemptTimeout: testutil.Dur("5s"),
				ReplayWindow:   *testutil.Dur("1h"),
				RetryBudget:    &hookv1.RetryBudget{RatioPercent: 0, MinRetriesPerMinute: ptr.To[int32](1)},
				// The budget, not a breaker, is what holds the re-sends back.
				CircuitBreaker: &hookv1.CircuitBreaker{Disabled: true},
			},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		ep := newEndpoint(ns, "orders", rcv.URL, func(s *hookv1.WebhookEndpointSpec) {
			s.RetryPolicyRef = &hookv1.LocalObjectReference{Name: "budgeted"}
		})
		key := client.ObjectKeyFromObject(ep)
		expectReady(key)
		for range 3 {
			publishEvent(ns, "order.created", nil)
		}
		Eventually(func(g Gomega) {
			g.Expect(stats(key).ExhaustedUnresolved).To(BeEquivalentTo(3))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		lost := rcv.count()
		up.Store(true)

		rec := newRecovery(ns, "retry", "orders", hookv1.RecoveryModeRetry)
		var cur hookv1.DeliveryRecovery
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(rec), &cur)).To(Succeed())
			g.Expect(cur.Status.State).To(Equal(hookv1.RecoveryRunning))
			c := meta.FindStatusCondition(cur.Status.Conditions, hookv1.ConditionComplete)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(hookv1.ReasonBudgetExhausted), c.Message)
			g.Expect(c.Message).To(ContainSubstring("re-sends wait for the endpoint's retry budget (1 retries per minute"))
			// kstatus (and `kubectl wait`) read the same reason.
			r := meta.FindStatusCondition(cur.Status.Conditions, hookv1.ConditionReconciling)
			g.Expect(r).NotTo(BeNil())
			g.Expect(r.Reason).To(Equal(hookv1.ReasonBudgetExhausted))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(cur.Status.Counts.Retried).To(BeEquivalentTo(3))
		// One re-send a minute: this spec may straddle one minute's end.
		Expect(rcv.count()-lost).To(BeNumerically("<=", 2), "re-sends received")
	})
})
