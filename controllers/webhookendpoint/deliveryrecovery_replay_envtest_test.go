package webhookendpoint

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// replayOf returns a mutation that makes a recovery a Replay of types
// since since.
func replayOf(since time.Time, fallback hookv1.ReplayFallback, types ...hookv1.EventTypePattern) func(*hookv1.DeliveryRecoverySpec) {
	return func(s *hookv1.DeliveryRecoverySpec) {
		s.Replay = &hookv1.ReplaySpec{Since: metav1.NewTime(since), EventTypes: types, OnUnreplayable: fallback}
	}
}

// publishAt ingests an event created at at, through the engine.
func publishAt(ns, typ string, at time.Time) string {
	res, err := eng.Publish(ctx, &ledger.EventInsertParams{
		ID: ledger.NewID("evt", at), Namespace: ns, Type: typ, Data: []byte(`{"order":42}`), Now: at,
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(res.Err).NotTo(HaveOccurred())
	return res.Event.ID
}

// deliveriesTo returns the deliveries of event to the endpoint key.
func deliveriesTo(event string, key client.ObjectKey) []ledger.Delivery {
	var out []ledger.Delivery
	for _, d := range deliveriesOf(event) {
		if d.EndpointID == ledger.EndpointID(key.Namespace, key.Name) {
			out = append(out, d)
		}
	}
	return out
}

var _ = Describe("DeliveryRecovery controller, action Replay", func() {
	It("sends a window's events of the types asked to an endpoint created after them, under their own identity, once", func() {
		ns := newNamespace()
		orders := newHookReceiver(204)
		ordersKey := client.ObjectKeyFromObject(newEndpoint(ns, "orders", orders.URL, func(s *hookv1.WebhookEndpointSpec) {
			s.EventTypes = []hookv1.EventTypePattern{"order.*"}
		}))
		expectReady(ordersKey)
		// A window on a whole second, as metav1.Time keeps it, and
		// events around its start.
		since := time.Now().Truncate(time.Second).Add(-time.Second)
		before := publishAt(ns, "order.created", since.Add(-time.Millisecond))
		created := publishAt(ns, "order.created", since)
		paid := publishAt(ns, "order.paid", since.Add(time.Millisecond))
		invoice := publishAt(ns, "invoice.sent", since.Add(2*time.Millisecond)) // no subscriber, another type
		Eventually(func(g Gomega) {
			g.Expect(stats(ordersKey).Delivered).To(BeEquivalentTo(3))
		}).WithTimeout(30 * time.Second).Should(Succeed())

		billing := newHookReceiver(204)
		billingKey := client.ObjectKeyFromObject(newEndpoint(ns, "billing", billing.URL, func(s *hookv1.WebhookEndpointSpec) {
			s.EventTypes = []hookv1.EventTypePattern{"order.*", "invoice.*"}
		}))
		rec := newRecovery(ns, "billing-orders", "billing", hookv1.RecoveryModeReplay, replayOf(since, hookv1.ReplayFallbackRefuse, "order.*"))
		key := client.ObjectKeyFromObject(rec)
		done := completed(key)
		Expect(done.Status.Counts).To(Equal(hookv1.RecoveryCounts{Matched: 2, Replayed: 2, Delivered: 2}))
		Expect(done.Status.Items).To(HaveLen(2))
		Expect([]string{done.Status.Items[0].EventID, done.Status.Items[1].EventID}).To(Equal([]string{created, paid}), "oldest first")
		for _, it := range done.Status.Items {
			Expect(it.Action).To(Equal(hookv1.RecoveryReplay))
			Expect(it.Outcome).To(Equal(hookv1.ItemDelivered))
			Expect(it.DeliveryID).To(BeEmpty())
			Expect(it.NewDeliveryID).NotTo(BeEmpty())
		}
		// The receiver got the events under their own webhook-id.
		for _, ev := range []string{created, paid} {
			_, ok := billing.hook(ev)
			Expect(ok).To(BeTrue(), "billing did not receive %s", ev)
		}
		Expect(billing.count()).To(Equal(2))
		for _, ev := range []string{before, invoice} {
			Expect(deliveriesTo(ev, billingKey)).To(BeEmpty(), "outside the window or the types: %s", ev)
		}
		Eventually(func(g Gomega) { g.Expect(stats(billingKey).Delivered).To(BeEquivalentTo(2)) }).Should(Succeed())

		// Applied again under its name after deletion (a GitOps sync after
		// a TTL): the earlier outcome, and nothing sent again, not even
		// the event published since.
		later := publishEvent(ns, "order.created", nil) // billing gets it by its subscription
		Expect(k8sClient.Delete(ctx, rec)).To(Succeed())
		Eventually(func() bool { return apierrors.IsNotFound(k8sClient.Get(ctx, key, &hookv1.DeliveryRecovery{})) }).Should(BeTrue())
		again := completed(client.ObjectKeyFromObject(newRecovery(ns, "billing-orders", "billing", hookv1.RecoveryModeReplay,
			replayOf(since, hookv1.ReplayFallbackRefuse, "order.*"))))
		Expect(again.UID).NotTo(Equal(done.UID))
		Expect(again.Status.Counts).To(Equal(done.Status.Counts))
		Expect(again.Status.StartTime.Time).To(BeTemporally("==", done.Status.StartTime.Time))
		Expect(meta.FindStatusCondition(again.Status.Conditions, hookv1.ConditionComplete).Message).
			To(ContainSubstring("does not act again"))
		for _, ev := range []string{created, paid, later} {
			Expect(deliveriesTo(ev, billingKey)).To(HaveLen(1), "sent to billing twice: %s", ev)
		}
		Eventually(func(g Gomega) { g.Expect(stats(billingKey).Delivered).To(BeEquivalentTo(3)) }).Should(Succeed())
		Expect(billing.count()).To(Equal(3))
	})

	It("refuses an event whose one-time secrets were scrubbed, and reissues it with onUnreplayable Reissue", func() {
		ns := newNamespace()
		orders := newHookReceiver(204)
		ordersKey := client.ObjectKeyFromObject(newEndpoint(ns, "orders", orders.URL, func(s *hookv1.WebhookEndpointSpec) {
			s.EventTypes = []hookv1.EventTypePattern{"order.*"}
		}))
		expectReady(ordersKey)
		since := time.Now().Add(-time.Second) // metav1.Time keeps seconds
		secret := publishEvent(ns, "order.created", map[string]string{"claimToken": "tok_claim_91ab"})
		Eventually(func(g Gomega) { g.Expect(stats(ordersKey).Delivered).To(BeEquivalentTo(1)) }).WithTimeout(30 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			ev, err := store.EventGet(ctx, secret)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ev.SecretsScrubbed()).To(BeTrue())
		}).WithTimeout(30 * time.Second).Should(Succeed())

		billing := newHookReceiver(204)
		billingKey := client.ObjectKeyFromObject(newEndpoint(ns, "billing", billing.URL))
		refused := completed(client.ObjectKeyFromObject(newRecovery(ns, "refuse", "billing", hookv1.RecoveryModeReplay,
			replayOf(since, hookv1.ReplayFallbackRefuse, "order.*"))))
		Expect(refused.Status.Counts).To(Equal(hookv1.RecoveryCounts{Matched: 1, Refused: 1}))
		Expect(refused.Status.Items[0].Reason).To(Equal(hookv1.RefusedReissueRequired))
		rr := meta.FindStatusCondition(refused.Status.Conditions, hookv1.ConditionReissueRequired)
		Expect(rr.Status).To(Equal(metav1.ConditionTrue))
		Expect(rr.Message).To(ContainSubstring("onUnreplayable: Reissue"))
		Expect(deliveriesTo(secret, billingKey)).To(BeEmpty())
		Expect(toJSON(refused.Status)).NotTo(ContainSubstring("tok_claim_91ab"))

		// With Reissue, the producer is asked; its replacement, addressed
		// to billing, completes the item.
		producer := newHookReceiver(204)
		producerKey := client.ObjectKeyFromObject(newEndpoint(ns, "producer", producer.URL, func(s *hookv1.WebhookEndpointSpec) {
			s.EventTypes = []hookv1.EventTypePattern{ledger.ReissueRequestedEventType}
		}))
		expectReady(producerKey)
		key := client.ObjectKeyFromObject(newRecovery(ns, "reissue", "billing", hookv1.RecoveryModeReplay,
			replayOf(since, hookv1.ReplayFallbackReissue, "order.*"), func(s *hookv1.DeliveryRecoverySpec) {
				s.TTLSecondsAfterFinished = ptr.To[int32](3600)
			}))
		var cur hookv1.DeliveryRecovery
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, &cur)).To(Succeed())
			g.Expect(cur.Status.Counts.AwaitingReissue).To(BeEquivalentTo(1))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(cur.Status.State).To(Equal(hookv1.RecoveryRunning))
		request := cur.Status.Items[0].NewEventID
		Eventually(func() bool { _, ok := producer.hook(request); return ok }).WithTimeout(30 * time.Second).Should(BeTrue())

		now := time.Now()
		res, err := eng.Publish(ctx, &ledger.EventInsertParams{
			ID: ledger.NewID("evt", now), Namespace: ns, Type: "order.created", Data: []byte(`{"order":42}`),
			ReissueOf: secret, Endpoint: ledger.EndpointID(ns, "billing"), Now: now,
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Err).NotTo(HaveOccurred())
		done := completed(key)
		Expect(done.Status.Counts).To(Equal(hookv1.RecoveryCounts{Matched: 1, Reissued: 1, Delivered: 1}))
		Expect(done.Status.Items[0].NewEventID).To(Equal(res.Event.ID))
		_, ok := billing.hook(res.Event.ID)
		Expect(ok).To(BeTrue())
		Expect(orders.count()).To(Equal(1), "the replacement went to billing alone")
	})
})
