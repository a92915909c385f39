package webhookendpoint

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

// TestRecoveryWakesItsEndpoint: which recovery changes reconcile which
// endpoint.
func TestRecoveryWakesItsEndpoint(t *testing.T) {
	rec := func(st hookv1.DeliveryRecoveryStatus) *hookv1.DeliveryRecovery {
		return &hookv1.DeliveryRecovery{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "dismiss-1"},
			Spec:       hookv1.DeliveryRecoverySpec{EndpointRef: hookv1.LocalObjectReference{Name: "orders"}, Action: hookv1.RecoveryModeDismiss},
			Status:     st,
		}
	}
	running := hookv1.DeliveryRecoveryStatus{State: hookv1.RecoveryRunning, Counts: hookv1.RecoveryCounts{Matched: 3, Retried: 3}}
	oneDelivered := running
	oneDelivered.Counts.Delivered = 1
	complete := hookv1.DeliveryRecoveryStatus{State: hookv1.RecoveryComplete, Counts: hookv1.RecoveryCounts{Matched: 3, Dismissed: 3}}
	sameProgress := running
	sameProgress.Conditions = []metav1.Condition{{Type: hookv1.ConditionComplete, Status: metav1.ConditionFalse, Reason: hookv1.ReasonBudgetExhausted}}

	tests := []struct {
		name       string
		old, new   hookv1.DeliveryRecoveryStatus
		wantWakeUp bool
	}{
		{"started and applied", hookv1.DeliveryRecoveryStatus{}, running, true},
		{"an item delivered", running, oneDelivered, true},
		{"completed at once (Dismiss)", hookv1.DeliveryRecoveryStatus{}, complete, true},
		{"only a condition's message", running, sameProgress, false},
		{"nothing", complete, complete, false},
	}
	p := recoveryProgressed()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.Update(event.UpdateEvent{ObjectOld: rec(tt.old), ObjectNew: rec(tt.new)}); got != tt.wantWakeUp {
				t.Errorf("update passes: %t, want %t", got, tt.wantWakeUp)
			}
		})
	}
	if p.Create(event.CreateEvent{Object: rec(complete)}) || p.Delete(event.DeleteEvent{Object: rec(complete)}) {
		t.Error("a created or deleted recovery wakes its endpoint")
	}
	reqs := endpointOfRecovery(context.Background(), rec(complete))
	if want := (types.NamespacedName{Namespace: "shop", Name: "orders"}); len(reqs) != 1 || reqs[0].NamespacedName != want {
		t.Errorf("requests %v, want one for %v", reqs, want)
	}
	if reqs := endpointOfRecovery(context.Background(), &hookv1.WebhookEndpoint{}); len(reqs) != 0 {
		t.Errorf("another kind mapped to %v", reqs)
	}
}

var _ = Describe("A WebhookEndpoint whose DeliveryRecovery settles", func() {
	It("drops DeliveriesExhausted as soon as a Dismiss recovery completes, not at its next refresh", func() {
		// Its endpoint controller refreshes it once an hour: within the
		// spec, only what happens to the endpoint reconciles it.
		ep, _, _ := exhaustOne(slowRefreshNamespace, nil)
		key := client.ObjectKeyFromObject(ep)
		Eventually(func(g Gomega) {
			c := condition(g, key, hookv1.ConditionDeliveriesExhausted)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "the engine's exhaustion notice shows it: %s", c.Message)
		}).Should(Succeed())

		done := completed(client.ObjectKeyFromObject(newRecovery(slowRefreshNamespace, "dismiss", "orders", hookv1.RecoveryModeDismiss)))
		Expect(done.Status.Counts).To(Equal(hookv1.RecoveryCounts{Matched: 1, Dismissed: 1}))
		Eventually(func(g Gomega) {
			ep := getEndpoint(g, key)
			c := condition(g, key, hookv1.ConditionDeliveriesExhausted)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse), c.Message)
			g.Expect(ep.Status.Deliveries.ExhaustedUnresolved).To(BeZero())
		}).WithTimeout(10*time.Second).Should(Succeed(), "well before the refresh after %s", slowRefresh)
	})
})
