package e2e

import (
	"net/http"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("Evidence", func() {
	It("shows on the RetryPolicy what its schedule achieved, the advice, and the owner of exhausted work", func() {
		ns := useNamespace("e2e-evidence")
		flaky := newReceiver("flaky (503 twice, then 204)", false, func(n int, _ *received) int {
			if n <= 2 {
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		})
		never := newReceiver("never (always 503)", false, answer(http.StatusServiceUnavailable))
		// Down for the first event's three attempts, up again after the
		// horizon: the second event goes through on its first attempt.
		var lateRequests atomic.Int32
		late := newReceiver("late (503 to its first three requests, then 204)", false, func(int, *received) int {
			if lateRequests.Add(1) <= 3 {
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		})
		apply(policyYAML(ns, "fast", "200ms", 3) + "---\n" +
			endpointYAML(ns, "flaky", flaky.URL("/hooks"), "[flaky.created]", "fast", "") + "---\n" +
			endpointYAML(ns, "never", never.URL("/hooks"), "[never.created]", "fast", "  owner: team-payments\n") + "---\n" +
			endpointYAML(ns, "late", late.URL("/hooks"), "[late.created]", "fast", ""))
		for _, ep := range []string{"flaky", "never", "late"} {
			kubectlWait("webhookendpoint/"+ep, "--for=condition=Ready", 30*time.Second)
		}

		By("three deliveries: recovered by the third attempt, exhausted, exhausted")
		ids := map[string]string{}
		for _, typ := range []string{"flaky", "never", "late"} {
			ids[typ] = api.publish(ns, typ+"-1", `{"type":"`+typ+`.created","data":{}}`).ID
		}
		Eventually(func(g Gomega) {
			g.Expect(api.deliveryOf(g, ns, ids["flaky"]).State).To(Equal("delivered"))
			g.Expect(api.deliveryOf(g, ns, ids["never"]).State).To(Equal("exhausted"))
			g.Expect(api.deliveryOf(g, ns, ids["late"]).State).To(Equal("exhausted"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		By("the late endpoint delivering the next event on its first attempt")
		next := api.publish(ns, "late-2", `{"type":"late.created","data":{}}`).ID
		Eventually(func(g Gomega) {
			g.Expect(api.deliveryOf(g, ns, next).State).To(Equal("delivered"))
		}).WithTimeout(30 * time.Second).Should(Succeed())

		By("kubectl get rtp: 4 settled, 1 of 4 on the first try, 1 recovered, 2 exhausted")
		kubectlWait("retrypolicy/fast", "--for=jsonpath={.status.evidence.last24h.settled}=4", 60*time.Second)
		Expect(kubectl("get", "-n", ns, "rtp", "fast")).To(MatchRegexp(`(?m)^NAME\s+STRATEGY\s+ATTEMPTS\s+HORIZON\s+READY\s+FIRST TRY\s+RECOVERED\s+EXHAUSTED 24H\s+AGE\n` +
			`fast\s+Fixed\s+3\s+\S+\s+True\s+25%\s+1\s+2\s+`))
		Expect(jsonpath("retrypolicy/fast", `{.status.evidence.last24h.recoveredByAttempt[0].attempt}:{.status.evidence.last24h.recoveredByAttempt[0].count}`)).To(Equal("3:1"))
		Expect(jsonpath("retrypolicy/fast", `{.status.evidence.last24h.exhaustedByReason[0].reason}:{.status.evidence.last24h.exhaustedByReason[0].count}`)).To(Equal("MaxAttempts:2"))
		Expect(jsonpath("retrypolicy/fast", `{.status.evidence.last7d.lastRecoveringAttempt}`)).To(Equal("3"))

		By("kubectl describe rtp: the evidence and the advice (too little evidence yet)")
		describe := kubectl("describe", "-n", ns, "rtp", "fast")
		Expect(describe).To(MatchRegexp(`Type:\s+HorizonFit`))
		Expect(describe).To(MatchRegexp(`Reason:\s+InsufficientEvidence`))
		Expect(describe).To(MatchRegexp(`First Try:\s+25%`))

		By("each endpoint showing its own evidence")
		kubectlWait("webhookendpoint/late", "--for=jsonpath={.status.evidence.last24h.settled}=2", 60*time.Second)
		Expect(jsonpath("webhookendpoint/late", `{.status.evidence.last24h.firstTry} {.status.evidence.last24h.exhausted}`)).To(Equal("50% 1"))
		kubectlWait("webhookendpoint/flaky", "--for=jsonpath={.status.evidence.last24h.settled}=1", 60*time.Second)
		Expect(kubectl("get", "-n", ns, "whep", "flaky")).To(MatchRegexp(`flaky\s+\S+\s+True\s+Closed\s+0\s+0\s+\S+\s+0%\s+`))

		By("the owner named in the DeliveriesExhausted condition and Event")
		kubectlWait("webhookendpoint/never", "--for=condition=DeliveriesExhausted", 60*time.Second)
		Expect(jsonpath("webhookendpoint/never", `{.status.conditions[?(@.type=="DeliveriesExhausted")].message}`)).To(HaveSuffix("Owner: team-payments"))
		Eventually(func() string {
			return kubectlOutput("get", "-n", ns, "events.events.k8s.io", "--field-selector", "reason=DeliveriesExhausted,regarding.name=never", "-o", "jsonpath={.items[*].note}")
		}).WithTimeout(60 * time.Second).Should(ContainSubstring("Owner: team-payments"))
	})
})
