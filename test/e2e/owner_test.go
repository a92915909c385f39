package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("Owners and ceilings", func() {
	It("names the endpoint's owner in the dead-letter event, the delivery reads, the Event and the metrics", func() {
		ns := useNamespace("e2e-owner")
		never := newReceiver("never (always 503)", false, answer(http.StatusServiceUnavailable))
		dlq := newReceiver("dead letters", false, answer(http.StatusNoContent))
		apply(policyYAML(ns, "fast", "200ms", 2) + "---\n" +
			endpointYAML(ns, "dlq", dlq.URL("/dlq"), "[nothing.matches]", "fast", "") + "---\n" +
			endpointYAML(ns, "orders", never.URL("/hooks"), "[order.created]", "fast",
				"  owner: team-orders\n  deadLetterRef:\n    name: dlq\n"))
		for _, ep := range []string{"dlq", "orders"} {
			kubectlWait("webhookendpoint/"+ep, "--for=condition=Ready", 30*time.Second)
		}

		By("an exhausted delivery")
		id := api.publish(ns, "order-1", `{"type":"order.created","data":{"order":1}}`).ID
		var exhausted deliveryView
		Eventually(func(g Gomega) {
			exhausted = api.deliveryOf(g, ns, id)
			g.Expect(exhausted.State).To(Equal("exhausted"))
		}).WithTimeout(30 * time.Second).Should(Succeed())

		By("the HTTP API's delivery naming the owner")
		Expect(exhausted.Owner).To(Equal("team-orders"))

		By("the dead-letter event, as the dead-letter endpoint receives it, naming the owner")
		Eventually(func() []received { return dlq.received() }).WithTimeout(30 * time.Second).Should(HaveLen(1))
		dl := dlq.received()[0]
		Expect(dl.Type).To(Equal("hookkeeper.delivery.exhausted"))
		raw, err := json.Marshal(dl.Data)
		Expect(err).NotTo(HaveOccurred())
		var data struct {
			DeliveryID, EventID, Endpoint, Owner, Reason string
			Attempts                                     int
		}
		Expect(json.Unmarshal(raw, &data)).To(Succeed())
		Expect(data).To(Equal(struct {
			DeliveryID, EventID, Endpoint, Owner, Reason string
			Attempts                                     int
		}{exhausted.ID, id, ns + "/orders", "team-orders", "MaxAttempts", 2}), "dead-letter data %s", raw)

		By("kubectl get deliveries -o wide (the aggregated API) showing the OWNER")
		Expect(kubectl("get", "delivery", exhausted.ID, "-n", ns, "-o", "wide")).To(
			MatchRegexp(`(?s)OWNER.*\n` + exhausted.ID + `\s.*\steam-orders\s`))

		By("the DeliveriesExhausted Event naming the owner")
		Eventually(func() string {
			return kubectlOutput("get", "-n", ns, "events.events.k8s.io", "--field-selector", "reason=DeliveriesExhausted,regarding.name=orders", "-o", "jsonpath={.items[*].note}")
		}).WithTimeout(60 * time.Second).Should(HaveSuffix("Owner: team-orders"))

		By("the exhaustion metrics carrying the owner label")
		Eventually(func() []string {
			return metricSamples(`hookkeeper_deliveries_exhausted_total{owner="team-orders",reason="MaxAttempts"}`,
				`hookkeeper_deliveries_exhausted_unresolved{endpoint="`+ns+`/orders",owner="team-orders"}`)
		}).Should(Equal([]string{"1", "1"}))

		By("a new owner, shown from then on")
		apply(endpointYAML(ns, "orders", never.URL("/hooks"), "[order.created]", "fast",
			"  owner: team-billing\n  deadLetterRef:\n    name: dlq\n"))
		Eventually(func(g Gomega) {
			g.Expect(api.deliveryOf(g, ns, id).Owner).To(Equal("team-billing"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Eventually(func() []string {
			return metricSamples(`hookkeeper_deliveries_exhausted_unresolved{endpoint="`+ns+`/orders",owner="team-orders"}`,
				`hookkeeper_deliveries_exhausted_unresolved{endpoint="`+ns+`/orders",owner="team-billing"}`)
		}).Should(Equal([]string{"", "1"}))
	})

	It("shows RetryBudgetLimited while the retry budget defers retries, and clears it once they stop", func() {
		ns := useNamespace("e2e-budget")
		var up atomic.Bool
		rcv := newReceiver("limited (503 until up)", false, func(int, *received) int {
			if up.Load() {
				return http.StatusNoContent
			}
			return http.StatusServiceUnavailable
		})
		// A budget of no retries at all: every retry is deferred, minute
		// after minute, until the budget goes.
		apply(policyYAML(ns, "budget", "200ms", 5) + "  retryBudget:\n    ratioPercent: 0\n    minRetriesPerMinute: 0\n---\n" +
			endpointYAML(ns, "limited", rcv.URL("/hooks"), "[order.created]", "budget", "  owner: team-budget\n"))
		kubectlWait("webhookendpoint/limited", "--for=condition=Ready", 30*time.Second)
		kubectlWait("webhookendpoint/limited", "--for=condition=RetryBudgetLimited=False", 30*time.Second)

		By("retries over the budget: RetryBudgetLimited=True, in -o wide, with one Warning Event naming the owner")
		ids := []string{
			api.publish(ns, "order-1", `{"type":"order.created","data":{"order":1}}`).ID,
			api.publish(ns, "order-2", `{"type":"order.created","data":{"order":2}}`).ID,
		}
		kubectlWait("webhookendpoint/limited", "--for=condition=RetryBudgetLimited", 60*time.Second)
		Expect(jsonpath("webhookendpoint/limited", `{.status.conditions[?(@.type=="RetryBudgetLimited")].reason}`)).To(Equal("RetriesDeferred"))
		Expect(jsonpath("webhookendpoint/limited", `{.status.conditions[?(@.type=="RetryBudgetLimited")].message}`)).To(
			ContainSubstring("0% of the minute's first attempts plus 0 retries per minute"))
		Expect(kubectl("get", "-n", ns, "whep", "limited", "-o", "wide")).To(MatchRegexp(`(?s)BUDGET LIMITED.*\nlimited\s.*\sTrue\s+budget\s`))
		Eventually(func() string {
			return kubectlOutput("get", "-n", ns, "events.events.k8s.io", "--field-selector", "reason=RetriesDeferred,regarding.name=limited", "-o", "jsonpath={.items[*].note}")
		}).WithTimeout(30 * time.Second).Should(HaveSuffix("Owner: team-budget"))
		for _, id := range ids {
			Expect(api.deliveryOf(Default, ns, id).State).To(BeElementOf("scheduled", "in_flight"), "a deferred retry waits, it is not dropped")
		}

		By("the budget removed and the receiver up: the deferred retries go through")
		up.Store(true)
		kubectl("patch", "-n", ns, "retrypolicy", "budget", "--type=json", "-p", `[{"op":"remove","path":"/spec/retryBudget"}]`)
		Eventually(func(g Gomega) {
			for _, id := range ids {
				g.Expect(api.deliveryOf(g, ns, id).State).To(Equal("delivered"))
			}
		}).WithTimeout(2 * time.Minute).Should(Succeed())

		By("no deferral for the condition's window (2m): RetryBudgetLimited=False again")
		kubectlWait("webhookendpoint/limited", "--for=condition=RetryBudgetLimited=False", 4*time.Minute)
		Expect(jsonpath("webhookendpoint/limited", `{.status.conditions[?(@.type=="RetryBudgetLimited")].reason}`)).To(Equal("WithinBudget"))
		Expect(kubectl("get", "-n", ns, "whep", "limited", "-o", "wide")).To(MatchRegexp(`(?s)BUDGET LIMITED.*\nlimited\s.*\sFalse\s+budget\s`))
	})
})

// metricSamples returns the value of each series (exactly as /metrics
// writes it: name and sorted labels) in the manager's metrics, "" for a
// series it does not export.
func metricSamples(series ...string) []string {
	GinkgoHelper()
	values := map[string]string{}
	for _, line := range strings.Split(metricsText(), "\n") {
		if i := strings.LastIndexByte(line, ' '); i > 0 && !strings.HasPrefix(line, "#") {
			values[line[:i]] = line[i+1:]
		}
	}
	out := make([]string, len(series))
	for i, s := range series {
		out[i] = values[s]
	}
	return out
}
