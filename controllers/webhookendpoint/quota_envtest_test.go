package webhookendpoint

import (
	"encoding/json"
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// publishDirect inserts n events of ns into the suite's ledger and returns
// how many its quota accepted.
func publishDirect(ns string, n int) int {
	GinkgoHelper()
	params := make([]*ledger.EventInsertParams, n)
	now := time.Now()
	for i := range params {
		id := ledger.NewID("evt", now)
		data := json.RawMessage(`{"id":"` + id + `"}`)
		params[i] = &ledger.EventInsertParams{ID: id, Namespace: ns, Type: "quota.test", Data: data, Now: now}
	}
	res, err := store.EventInsertMany(ctx, params)
	Expect(err).NotTo(HaveOccurred())
	accepted := 0
	for _, r := range res {
		if r.Err == nil {
			accepted++
		} else {
			Expect(errors.Is(r.Err, ledger.ErrQuotaExceeded)).To(BeTrue(), "%v", r.Err)
		}
	}
	return accepted
}

var _ = Describe("WebhookQuota", func() {
	It("registers the namespace's limits in the ledger, shows what is used, and lets them go when deleted", func() {
		ns := newNamespace()
		q := &hookv1.WebhookQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hookv1.WebhookQuotaName},
			Spec: hookv1.WebhookQuotaSpec{Hard: hookv1.WebhookQuotaHard{EventsPerDay: ptr.To[int64](2),
				PayloadBytesRetained: ptr.To(resource.MustParse("1Mi"))}}}
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		key := client.ObjectKeyFromObject(q)
		Eventually(func(g Gomega) {
			var got hookv1.WebhookQuota
			g.Expect(k8sClient.Get(ctx, key, &got)).To(Succeed())
			c := ready(got.Status.Conditions)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			g.Expect(got.Finalizers).To(ContainElement("hookkeeper.dev/quota"))
			g.Expect(got.Status.Used).NotTo(BeNil())
		}).Should(Succeed())
		held, err := store.QuotaGet(ctx, ns, time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(held.Hard).To(Equal(ledger.QuotaHard{EventsPerDay: 2, PayloadBytesRetained: 1 << 20}))

		Expect(publishDirect(ns, 3)).To(Equal(2))
		Eventually(func(g Gomega) {
			var got hookv1.WebhookQuota
			g.Expect(k8sClient.Get(ctx, key, &got)).To(Succeed())
			g.Expect(got.Status.Used).NotTo(BeNil())
			g.Expect(got.Status.Used.EventsPerDay).To(Equal(int64(2)))
			g.Expect(got.Status.Used.RefusedToday).To(Equal(int64(1)))
			g.Expect(got.Status.Used.PayloadBytesRetained.Value()).To(BeNumerically(">", 0))
			g.Expect(got.Status.UpdatedAt).NotTo(BeNil())
		}).Should(Succeed())

		// Raised by its admin: the ledger holds the new limit, the usage
		// stays.
		Eventually(func() error {
			var got hookv1.WebhookQuota
			if err := k8sClient.Get(ctx, key, &got); err != nil {
				return err
			}
			got.Spec.Hard.EventsPerDay = ptr.To[int64](3)
			return k8sClient.Update(ctx, &got)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			held, err := store.QuotaGet(ctx, ns, time.Now())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(held.Hard.EventsPerDay).To(Equal(int64(3)))
			g.Expect(held.Used.EventsToday).To(Equal(int64(2)))
		}).Should(Succeed())
		Expect(publishDirect(ns, 2)).To(Equal(1))

		Expect(k8sClient.Delete(ctx, q)).To(Succeed())
		Eventually(func(g Gomega) {
			_, err := store.QuotaGet(ctx, ns, time.Now())
			g.Expect(errors.Is(err, ledger.ErrNotFound)).To(BeTrue(), "%v", err)
			g.Expect(k8sClient.Get(ctx, key, &hookv1.WebhookQuota{})).NotTo(Succeed())
		}).Should(Succeed())
		Expect(publishDirect(ns, 5)).To(Equal(5))
	})

	It("refuses a quota not named default, or one without a limit", func() {
		ns := newNamespace()
		other := &hookv1.WebhookQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "more"},
			Spec: hookv1.WebhookQuotaSpec{Hard: hookv1.WebhookQuotaHard{EventsPerDay: ptr.To[int64](1)}}}
		Expect(k8sClient.Create(ctx, other)).To(MatchError(ContainSubstring("a namespace has one WebhookQuota, named default")))
		empty := &hookv1.WebhookQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hookv1.WebhookQuotaName}}
		Expect(k8sClient.Create(ctx, empty)).To(MatchError(ContainSubstring("hard must set at least one of")))
		burstOnly := &hookv1.WebhookQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hookv1.WebhookQuotaName},
			Spec: hookv1.WebhookQuotaSpec{Hard: hookv1.WebhookQuotaHard{PublishBurst: ptr.To[int32](5), EventsPerDay: ptr.To[int64](1)}}}
		Expect(k8sClient.Create(ctx, burstOnly)).To(MatchError(ContainSubstring("publishBurst goes with publishesPerSecond")))
		zeroBytes := &hookv1.WebhookQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hookv1.WebhookQuotaName},
			Spec: hookv1.WebhookQuotaSpec{Hard: hookv1.WebhookQuotaHard{PayloadBytesRetained: ptr.To(resource.MustParse("0"))}}}
		Expect(k8sClient.Create(ctx, zeroBytes)).To(Succeed())
		Eventually(func(g Gomega) {
			var got hookv1.WebhookQuota
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(zeroBytes), &got)).To(Succeed())
			c := ready(got.Status.Conditions)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(hookv1.ReasonInvalidSpec))
			g.Expect(c.Message).To(ContainSubstring("at least 1 byte"))
		}).Should(Succeed())
		_, err := store.QuotaGet(ctx, ns, time.Now())
		Expect(errors.Is(err, ledger.ErrNotFound)).To(BeTrue(), "%v", err)
	})
})

// ready is the Ready condition of conditions, or an empty one.
func ready(conditions []metav1.Condition) metav1.Condition {
	for _, c := range conditions {
		if c.Type == hookv1.ConditionReady {
			return c
		}
	}
	return metav1.Condition{}
}
