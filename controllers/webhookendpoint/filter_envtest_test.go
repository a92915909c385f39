package webhookendpoint

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/eventfilter"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

var _ = Describe("WebhookEndpoint filter over budget", func() {
	It("tells the owner with one Warning Event, turns Ready=False FilterOverBudget after repeated overruns, and is Ready again once the spec changes", func() {
		ns := newNamespace()
		const slow = `lists.range(1000).all(i, lists.range(1000).all(j, i + j >= 0))`
		rcv := newHookReceiver(0)
		ep := newEndpoint(ns, "slow", rcv.URL, func(s *hookv1.WebhookEndpointSpec) {
			s.Filter = slow
			s.Owner = "team-search"
		})
		key := client.ObjectKeyFromObject(ep)
		expectReady(key)

		// The suite's engine as the publish core's committer, with an
		// evaluation budget every run of this filter exceeds (it reads
		// the clock every 64 calls and makes a million).
		core, err := publish.New(publish.Config{Committer: eng, SecretsHashKey: []byte("k"), FilterEvalTimeout: time.Nanosecond})
		Expect(err).NotTo(HaveOccurred())
		publishOne := func() {
			res, err := core.Publish(ctx, &publish.Request{Namespace: ns, Type: "order.created", Data: []byte(`{"n":1}`)})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Deliveries).To(BeEmpty(), "an evaluation over budget is no match")
		}

		By("one overrun: a Warning Event naming the owner, Ready stays True")
		publishOne()
		Eventually(func(g Gomega) []eventsv1.Event { return eventsOf(g, key, hookv1.ReasonFilterOverBudget) }).Should(HaveLen(1))
		evs := eventsOf(Default, key, hookv1.ReasonFilterOverBudget)
		Expect(evs[0].Type).To(Equal(corev1.EventTypeWarning))
		Expect(evs[0].Note).To(ContainSubstring("spec.filter exceeded its evaluation budget once"))
		Expect(evs[0].Note).To(ContainSubstring("(" + eventfilter.ReasonTimeout + ")"))
		Expect(evs[0].Note).To(HaveSuffix("Owner: team-search"))
		Expect(condition(Default, key, hookv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))

		By("three: Ready=False FilterOverBudget, and no second Event within the interval")
		publishOne()
		publishOne()
		Eventually(func(g Gomega) {
			c := condition(g, key, hookv1.ConditionReady)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(hookv1.ReasonFilterOverBudget))
			g.Expect(c.Message).To(ContainSubstring("exceeded its evaluation budget 3 times"))
			g.Expect(c.Message).To(HaveSuffix(readyOverBudgetSuffix))
		}).Should(Succeed())
		Expect(eventsOf(Default, key, hookv1.ReasonFilterOverBudget)).To(HaveLen(1))
		registered, err := eng.Endpoint(ctx, ledger.EndpointID(ns, "slow"))
		Expect(err).NotTo(HaveOccurred())
		Expect(registered.Filter).To(Equal(slow), "the filter stays registered as it is")

		By("a changed spec starts afresh")
		Eventually(func(g Gomega) {
			cur := getEndpoint(g, key)
			cur.Spec.Filter = strings.Replace(slow, "1000", "10", 2)
			g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			c := condition(g, key, hookv1.ConditionReady)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		}).Should(Succeed())
	})
})
