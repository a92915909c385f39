package webhookendpoint

import (
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/deliveryrecovery"
	"github.com/hookkeeper/hookkeeper/controllers/internal/testutil"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// exhaustOne sets up an endpoint whose receiver fails until fixed, publishes
// one event (with secrets when given) and waits for its delivery to be
// exhausted. It returns the endpoint, the receiver's switch and the event.
func exhaustOne(ns string, secrets map[string]string) (*hookv1.WebhookEndpoint, *atomic.Bool, string) {
	var up atomic.Bool
	rcv := newHookReceiver(0)
	rcv.status = func() int {
		if up.Load() {
			return 204
		}
		return 503
	}
	policy := fastPolicy(ns, "fast", 2)
	policy.Spec.Retention = &hookv1.Retention{SecretGracePeriod: testutil.Dur("0s"), Payloads: testutil.Dur("168h"), Evidence: testutil.Dur("720h")}
	ep := newEndpoint(ns, "orders", rcv.URL, func(s *hookv1.WebhookEndpointSpec) {
		s.RetryPolicyRef = &hookv1.LocalObjectReference{Name: "fast"}
	})
	key := client.ObjectKeyFromObject(ep)
	expectReady(key)
	event := publishEvent(ns, "order.created", secrets)
	Eventually(func(g Gomega) {
		g.Expect(stats(key).ExhaustedUnresolved).To(BeEquivalentTo(1))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return ep, &up, event
}

func newRecovery(ns, name, endpoint string, action hookv1.RecoveryMode, mutate ...func(*hookv1.DeliveryRecoverySpec)) *hookv1.DeliveryRecovery {
	r := &hookv1.DeliveryRecovery{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       hookv1.DeliveryRecoverySpec{EndpointRef: hookv1.LocalObjectReference{Name: endpoint}, Action: action},
	}
	for _, m := range mutate {
		m(&r.Spec)
	}
	Expect(k8sClient.Create(ctx, r)).To(Succeed())
	return r
}

func completed(key client.ObjectKey) *hookv1.DeliveryRecovery {
	var r hookv1.DeliveryRecovery
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, key, &r)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(r.Status.Conditions, hookv1.ConditionComplete)).To(BeTrue(), "conditions: %v", r.Status.Conditions)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return &r
}

func deliveriesOf(eventID string) []ledger.Delivery {
	vs, err := store.DeliveryBrowse(ctx, &ledger.DeliveryBrowseParams{EventID: eventID})
	Expect(err).NotTo(HaveOccurred())
	ds := make([]ledger.Delivery, 0, len(vs))
	for _, v := range vs {
		ds = append(ds, v.Delivery)
	}
	return ds
}

var _ = Describe("DeliveryRecovery controller", func() {
	It("retries a replayable event once, follows it to delivered, and never twice across restarts", func() {
		ns := newNamespace()
		_, up, event := exhaustOne(ns, nil)
		up.Store(true)

		rec := newRecovery(ns, "retry", "orders", hookv1.RecoveryModeRetry)
		key := client.ObjectKeyFromObject(rec)
		done := completed(key)
		Expect(done.Status.Counts).To(Equal(hookv1.RecoveryCounts{Matched: 1, Retried: 1, Delivered: 1}))
		Expect(done.Status.StartTime).NotTo(BeNil())
		Expect(done.Status.CompletionTime).NotTo(BeNil())
		Expect(done.Status.Items).To(HaveLen(1))
		Expect(done.Status.Items[0].Outcome).To(Equal(hookv1.ItemDelivered))
		Expect(deliveriesOf(event)).To(HaveLen(2), "the original and one retry")

		// A restarted controller that lost the status runs the operation
		// again: every effect is keyed by the UID, so nothing is resent.
		fresh := &deliveryrecovery.DeliveryRecoveryReconciler{Client: k8sClient, Engine: eng, Ledger: store}
		var cur hookv1.DeliveryRecovery
		Expect(k8sClient.Get(ctx, key, &cur)).To(Succeed())
		lost := cur.DeepCopy()
		lost.Status = hookv1.DeliveryRecoveryStatus{StartTime: cur.Status.StartTime}
		Expect(k8sClient.Status().Update(ctx, lost)).To(Succeed())
		for range 3 {
			_, err := fresh.Reconcile(ctx, ctrl.Request{NamespacedName: key})
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(deliveriesOf(event)).To(HaveLen(2), "a repeated reconcile retried again")
		Expect(completed(key).Status.Counts.Retried).To(BeEquivalentTo(1))

		original := deliveriesOf(event)[0]
		Expect(original.State).To(Equal(ledger.StateExhausted))
		Expect(original.Resolution).To(Equal(ledger.ResolutionRetried))
	})

	It("refuses to retry an event whose one-time secrets were scrubbed, with ReissueRequired", func() {
		ns := newNamespace()
		_, up, event := exhaustOne(ns, map[string]string{"claimToken": "tok_claim_7f3e"})
		up.Store(true)

		done := completed(client.ObjectKeyFromObject(newRecovery(ns, "retry", "orders", hookv1.RecoveryModeRetry)))
		Expect(done.Status.Counts).To(Equal(hookv1.RecoveryCounts{Matched: 1, Refused: 1}))
		rr := meta.FindStatusCondition(done.Status.Conditions, hookv1.ConditionReissueRequired)
		Expect(rr).NotTo(BeNil())
		Expect(rr.Status).To(Equal(metav1.ConditionTrue))
		Expect(rr.Message).To(ContainSubstring("Reissue or Auto"))
		Expect(done.Status.Items[0].Reason).To(Equal(hookv1.RefusedReissueRequired))
		Expect(deliveriesOf(event)).To(HaveLen(1), "a refused retry must not create a delivery")
		Expect(toJSON(done.Status)).NotTo(ContainSubstring("tok_claim_7f3e"))
	})

	It("dismisses, and deletes itself after ttlSecondsAfterFinished", func() {
		ns := newNamespace()
		ep, _, event := exhaustOne(ns, nil)
		rec := newRecovery(ns, "dismiss", "orders", hookv1.RecoveryModeDismiss, func(s *hookv1.DeliveryRecoverySpec) {
			s.TTLSecondsAfterFinished = ptr.To[int32](0)
		})
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(rec), &hookv1.DeliveryRecovery{}))
		}).WithTimeout(30*time.Second).Should(BeTrue(), "a finished recovery with a TTL of 0 is deleted")
		Expect(deliveriesOf(event)[0].Resolution).To(Equal(ledger.ResolutionDismissed))
		Eventually(func(g Gomega) {
			g.Expect(stats(client.ObjectKeyFromObject(ep)).ExhaustedUnresolved).To(BeZero())
		}).Should(Succeed())
	})

	It("waits for an endpoint that does not exist yet, and runs when it is registered", func() {
		ns := newNamespace()
		rec := newRecovery(ns, "early", "orders", hookv1.RecoveryModeDismiss)
		key := client.ObjectKeyFromObject(rec)
		var cur hookv1.DeliveryRecovery
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, &cur)).To(Succeed())
			g.Expect(cur.Status.State).To(Equal(hookv1.RecoveryWaiting))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
		c := meta.FindStatusCondition(cur.Status.Conditions, hookv1.ConditionComplete)
		Expect(c.Status).To(Equal(metav1.ConditionFalse))
		Expect(c.Reason).To(Equal(hookv1.ReasonWaitingForEndpoint))
		Expect(c.Message).To(ContainSubstring(`"orders": it does not exist`))
		Expect(meta.IsStatusConditionFalse(cur.Status.Conditions, hookv1.ConditionFailed)).To(BeTrue())
		Expect(cur.Status.StartTime).To(BeNil(), "a waiting recovery has not started")

		// The endpoint appears: the watch wakes the recovery (the fallback
		// recheck is a minute away, past this Eventually).
		newEndpoint(ns, "orders", newHookReceiver(204).URL)
		done := completed(key)
		Expect(done.Status.State).To(Equal(hookv1.RecoveryComplete))
		Expect(meta.FindStatusCondition(done.Status.Conditions, hookv1.ConditionComplete).Reason).To(Equal(hookv1.ReasonNothingMatched))
		Expect(meta.IsStatusConditionFalse(done.Status.Conditions, hookv1.ConditionFailed)).To(BeTrue())
	})

	It("applied again under its name after deletion, acts no second time, reports the earlier outcome, and refuses another spec", func() {
		ns := newNamespace()
		ep, up, first := exhaustOne(ns, nil)
		up.Store(true)
		rec := newRecovery(ns, "retry", "orders", hookv1.RecoveryModeRetry)
		key := client.ObjectKeyFromObject(rec)
		earlier := completed(key)
		Expect(earlier.Status.Counts).To(Equal(hookv1.RecoveryCounts{Matched: 1, Retried: 1, Delivered: 1}))
		Expect(deliveriesOf(first)).To(HaveLen(2))

		// Another delivery is exhausted after the recovery ran.
		up.Store(false)
		second := publishEvent(ns, "order.created", nil)
		Eventually(func(g Gomega) {
			g.Expect(deliveriesOf(second)[0].State).To(Equal(ledger.StateExhausted))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		up.Store(true)

		recreate := func(action hookv1.RecoveryMode) client.ObjectKey {
			Expect(k8sClient.Delete(ctx, &hookv1.DeliveryRecovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "retry"}})).To(Succeed())
			Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, key, &hookv1.DeliveryRecovery{}))
			}).Should(BeTrue())
			return client.ObjectKeyFromObject(newRecovery(ns, "retry", "orders", action))
		}

		// The same manifest again (a GitOps sync after a TTL): the earlier
		// operation's outcome, and nothing new retried.
		again := completed(recreate(hookv1.RecoveryModeRetry))
		Expect(again.UID).NotTo(Equal(earlier.UID))
		Expect(again.Status.Counts).To(Equal(earlier.Status.Counts))
		Expect(again.Status.Items).To(Equal(earlier.Status.Items))
		Expect(again.Status.StartTime.Time).To(BeTemporally("==", earlier.Status.StartTime.Time))
		Expect(meta.FindStatusCondition(again.Status.Conditions, hookv1.ConditionComplete).Message).To(ContainSubstring("does not act again"))
		Expect(deliveriesOf(first)).To(HaveLen(2), "the earlier retry was made again")
		Expect(deliveriesOf(second)).To(HaveLen(1), "a delivery exhausted after the operation's start was retried")
		Expect(stats(client.ObjectKeyFromObject(ep)).ExhaustedUnresolved).To(BeEquivalentTo(1))

		// Another spec under the same name fails for good, and does nothing.
		conflictKey := recreate(hookv1.RecoveryModeDismiss)
		var failed hookv1.DeliveryRecovery
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, conflictKey, &failed)).To(Succeed())
			g.Expect(failed.Status.State).To(Equal(hookv1.RecoveryFailed))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		f := meta.FindStatusCondition(failed.Status.Conditions, hookv1.ConditionFailed)
		Expect(f.Status).To(Equal(metav1.ConditionTrue))
		Expect(f.Reason).To(Equal(hookv1.ReasonSpecConflict))
		Expect(f.Message).To(ContainSubstring("generateName"))
		c := meta.FindStatusCondition(failed.Status.Conditions, hookv1.ConditionComplete)
		Expect(c.Status).To(Equal(metav1.ConditionFalse))
		Expect(c.Reason).To(Equal(hookv1.ReasonFailed))
		Expect(failed.Status.ObservedGeneration).To(Equal(failed.Generation))
		Expect(failed.Status.CompletionTime).NotTo(BeNil())
		Expect(deliveriesOf(second)[0].Resolution).To(Equal(ledger.ResolutionUnresolved))
	})
})
