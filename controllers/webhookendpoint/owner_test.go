package webhookendpoint

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func TestOwnedMessage(t *testing.T) {
	for _, tc := range []struct{ msg, owner, want string }{
		{"3 deliveries exhausted", "", "3 deliveries exhausted"},
		{"3 deliveries exhausted", "team-payments", "3 deliveries exhausted. Owner: team-payments"},
	} {
		if got := ownedMessage(tc.msg, tc.owner); got != tc.want {
			t.Errorf("ownedMessage(%q, %q) = %q, want %q", tc.msg, tc.owner, got, tc.want)
		}
	}
}

// TestOwnerOnlyOnExhaustion: the owner is named while work is unresolved,
// not on the condition that says none is.
func TestOwnerOnlyOnExhaustion(t *testing.T) {
	ep := &hookv1.WebhookEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", Generation: 1}}
	ep.Spec.Owner = "team-payments"
	for n, want := range map[int64]bool{0: false, 2: true} {
		st := webhookEndpointStatus(ep, &endpointFacts{Registered: true, Deliveries: &deliveryFacts{Stats: ledger.EndpointStats{ExhaustedUnresolved: n}}}, time.Now())
		c := meta.FindStatusCondition(st.Conditions, hookv1.ConditionDeliveriesExhausted)
		if c == nil || strings.Contains(c.Message, "Owner: team-payments") != want {
			t.Errorf("%d unresolved: condition %+v, want owner named: %v", n, c, want)
		}
	}
}

var _ = Describe("WebhookEndpoint owner", func() {
	It("names the owner in the DeliveriesExhausted condition and Event", func() {
		ns := newNamespace()
		fastPolicy(ns, "once", 1)
		rcv := newHookReceiver(503)
		ep := newEndpoint(ns, "owned", rcv.URL, func(s *hookv1.WebhookEndpointSpec) {
			s.Owner = "team-payments"
			s.RetryPolicyRef = &hookv1.LocalObjectReference{Name: "once"}
		})
		key := client.ObjectKeyFromObject(ep)
		Eventually(func(g Gomega) {
			var cur hookv1.WebhookEndpoint
			g.Expect(k8sClient.Get(ctx, key, &cur)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, hookv1.ConditionReady)).To(BeTrue())
		}).Should(Succeed())
		publishEvent(ns, "order.created", nil)
		Eventually(func(g Gomega) {
			var cur hookv1.WebhookEndpoint
			g.Expect(k8sClient.Get(ctx, key, &cur)).To(Succeed())
			c := meta.FindStatusCondition(cur.Status.Conditions, hookv1.ConditionDeliveriesExhausted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Message).To(HaveSuffix("Owner: team-payments"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			evs := exhaustionEventsOf(g, key)
			g.Expect(evs).NotTo(BeEmpty())
			g.Expect(evs[0].Note).To(HaveSuffix("Owner: team-payments"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})
})
