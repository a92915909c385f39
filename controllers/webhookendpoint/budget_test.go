package webhookendpoint

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func TestRetryBudgetCondition(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	budget := &ledger.RetryBudget{RatioPercent: 10, MinPerMinute: 5}
	for _, tc := range []struct {
		name     string
		d        ledger.DeferralStreak
		budget   *ledger.RetryBudget
		status   metav1.ConditionStatus
		reason   string
		mentions []string
	}{
		{"never deferred", ledger.DeferralStreak{}, budget, metav1.ConditionFalse, hookv1.ReasonWithinBudget, []string{"no retry was deferred"}},
		{"no budget", ledger.DeferralStreak{}, nil, metav1.ConditionFalse, hookv1.ReasonWithinBudget, []string{"sets no retry budget"}},
		{"deferring now", ledger.DeferralStreak{Count: 42, First: now.Add(-5 * time.Minute), Last: now.Add(-10 * time.Second)}, budget,
			metav1.ConditionTrue, hookv1.ReasonRetriesDeferred, []string{"42 retries deferred", "since 2026-12-01T09:55:00Z", "10% of the minute's first attempts plus 5 retries per minute", "never dropped"}},
		{"last deferral at the window's edge", ledger.DeferralStreak{Count: 1, First: now.Add(-ledger.DeferralWindow), Last: now.Add(-ledger.DeferralWindow)}, budget,
			metav1.ConditionTrue, hookv1.ReasonRetriesDeferred, nil},
		{"deferrals stopped", ledger.DeferralStreak{Count: 42, First: now.Add(-time.Hour), Last: now.Add(-ledger.DeferralWindow - time.Second)}, budget,
			metav1.ConditionFalse, hookv1.ReasonWithinBudget, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := retryBudgetCondition(tc.d, tc.budget, 3, now)
			if c.Type != hookv1.ConditionRetryBudgetLimited || c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 3 {
				t.Fatalf("condition %+v, want %s/%s", c, tc.status, tc.reason)
			}
			for _, m := range tc.mentions {
				if !strings.Contains(c.Message, m) {
					t.Errorf("message %q does not mention %q", c.Message, m)
				}
			}
		})
	}
}

var _ = Describe("RetryBudgetLimited", func() {
	It("says so, with one Warning Event, while the retry budget defers retries", func() {
		ns := newNamespace()
		p := fastPolicy(ns, "nobudget", 3)
		Eventually(func(g Gomega) {
			var cur hookv1.RetryPolicy
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &cur)).To(Succeed())
			cur.Spec.RetryBudget = &hookv1.RetryBudget{RatioPercent: 0, MinRetriesPerMinute: ptr.To[int32](0)}
			g.Expect(k8sClient.Update(ctx, &cur)).To(Succeed())
		}).Should(Succeed())
		rcv := newHookReceiver(503)
		ep := newEndpoint(ns, "limited", rcv.URL, func(s *hookv1.WebhookEndpointSpec) {
			s.RetryPolicyRef = &hookv1.LocalObjectReference{Name: "nobudget"}
			s.Owner = "team-payments"
		})
		key := client.ObjectKeyFromObject(ep)
		Eventually(func(g Gomega) {
			cur := getEndpoint(g, key)
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, hookv1.ConditionReady)).To(BeTrue())
			c := meta.FindStatusCondition(cur.Status.Conditions, hookv1.ConditionRetryBudgetLimited)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		// The engine registered the budget before anything is published.
		Eventually(func(g Gomega) {
			reg, err := eng.Endpoint(ctx, ledger.EndpointID(ns, "limited"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(reg.Policy.Budget).NotTo(BeNil())
		}).WithTimeout(30 * time.Second).Should(Succeed())

		for range 3 {
			publishEvent(ns, "order.created", nil)
		}
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(getEndpoint(g, key).Status.Conditions, hookv1.ConditionRetryBudgetLimited)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(hookv1.ReasonRetriesDeferred))
			g.Expect(c.Message).To(ContainSubstring("0% of the minute's first attempts plus 0 retries per minute"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		budgetEvents := func(g Gomega) []string {
			var list eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			var notes []string
			for _, e := range list.Items {
				if e.Regarding.Name == key.Name && e.Reason == hookv1.ReasonRetriesDeferred {
					g.Expect(e.Type).To(Equal(corev1.EventTypeWarning))
					notes = append(notes, e.Note)
				}
			}
			return notes
		}
		Eventually(budgetEvents).Should(ConsistOf(HaveSuffix("Owner: team-payments")))
		// Deferrals go on (each minute's budget is 0): still one Event.
		Consistently(budgetEvents).WithTimeout(2 * suiteResync).WithPolling(500 * time.Millisecond).Should(HaveLen(1))
	})
})
