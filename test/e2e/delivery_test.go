package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/internal/signing"
)

var _ = Describe("Delivery", func() {
	It("delivers to a healthy endpoint, signed with its generated secret, and counts the deliveries on its status", func() {
		ns := useNamespace("e2e-healthy")
		rcv := newReceiver("orders (verifies signatures, else 401)", true, answer(http.StatusNoContent))
		apply(policyYAML(ns, "fast", "200ms", 3) + "---\n" +
			endpointYAML(ns, "orders", rcv.URL("/orders"), "[order.created]", "fast", ""))
		kubectlWait("webhookendpoint/orders", "--for=condition=Ready", 30*time.Second)
		rcv.useSecret(signingSecret("orders"))

		By("the receiver refusing a message signed with another secret, so that a 204 below means verified")
		other, err := signing.GenerateSecret()
		Expect(err).NotTo(HaveOccurred())
		body := `{"id":"msg_forged","type":"order.created","timestamp":"2026-01-01T00:00:00Z","data":{}}`
		sig, err := signing.Sign(other, "msg_forged", time.Now(), []byte(body))
		Expect(err).NotTo(HaveOccurred())
		req, _ := http.NewRequest(http.MethodPost, rcv.URL("/orders"), strings.NewReader(body))
		req.Header.Set(signing.HeaderID, "msg_forged")
		req.Header.Set(signing.HeaderTimestamp, fmt.Sprint(time.Now().Unix()))
		req.Header.Set(signing.HeaderSignature, sig)
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))

		By("publishing three events through the API")
		const n = 3
		var ids []string
		for i := range n {
			a := api.publish(ns, fmt.Sprintf("order-%d", i), fmt.Sprintf(`{"type":"order.created","data":{"order":%d}}`, i))
			Expect(a.Deliveries).To(HaveLen(1))
			Expect(a.Deliveries[0].Endpoint).To(Equal("orders"))
			ids = append(ids, a.ID)
		}

		By("each arriving once, verified, under its event id, and delivered in the ledger")
		Eventually(func(g Gomega) {
			for _, id := range ids {
				got := rcv.of(id)
				g.Expect(got).To(HaveLen(1), "requests for %s", id)
				g.Expect(got[0].Verified).To(BeTrue())
				g.Expect(got[0].Status).To(Equal(http.StatusNoContent))
				d := api.deliveryOf(g, ns, id)
				g.Expect(d.State).To(Equal("delivered"))
				g.Expect(d.Attempts).To(Equal(1))
				g.Expect(got[0].DeliveryID).To(Equal(d.ID))
			}
		}).Should(Succeed())

		By("the status counting them (refreshed every 30-60s: the engine announces exhaustions, not successes)")
		kubectlWait("webhookendpoint/orders", fmt.Sprintf("--for=jsonpath={.status.deliveries.delivered}=%d", n), 90*time.Second)
		Expect(jsonpath("webhookendpoint/orders", `{.status.conditions[?(@.type=="Healthy")].status}`)).To(Equal("True"))
		Expect(jsonpath("webhookendpoint/orders", `{.status.conditions[?(@.type=="DeliveriesExhausted")].status}`)).To(Equal("False"))
		Expect(jsonpath("webhookendpoint/orders", `{.status.deliveries.exhaustedUnresolved} {.status.deliveries.pending}`)).To(Equal("0 0"))
		Expect(jsonpath("webhookendpoint/orders", `{.status.lastSuccessTime}`)).NotTo(BeEmpty())
	})

	It("retries a flaky endpoint under the same event identity until it accepts", func() {
		ns := useNamespace("e2e-flaky")
		rcv := newReceiver("flaky (503 twice, then 204)", false, func(n int, _ *received) int {
			if n <= 2 {
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		})
		apply(policyYAML(ns, "fast", "200ms", 3) + "---\n" +
			endpointYAML(ns, "flaky", rcv.URL("/hooks"), "[order.created]", "fast", ""))
		kubectlWait("webhookendpoint/flaky", "--for=condition=Ready", 30*time.Second)

		a := api.publish(ns, "order-1", `{"type":"order.created","data":{"order":1}}`)
		Expect(a.Deliveries).To(HaveLen(1))

		var d deliveryView
		Eventually(func(g Gomega) {
			d = api.deliveryOf(g, ns, a.ID)
			g.Expect(d.State).To(Equal("delivered"))
		}).Should(Succeed())
		Expect(d.ID).To(Equal(a.Deliveries[0].ID))
		Expect(d.Attempts).To(Equal(3), "attempts of the delivery, as the API lists them")
		Expect(d.LastStatus).To(Equal(http.StatusNoContent))

		attempts, _ := api.attempts(Default, ns, d.ID)
		Expect(attempts).To(HaveLen(3))
		for i, want := range []int{503, 503, 204} {
			Expect(attempts[i].Number).To(Equal(i + 1))
			Expect(attempts[i].StatusCode).To(Equal(want), "attempt %d", i+1)
		}

		got := rcv.of(a.ID)
		Expect(got).To(HaveLen(3), "a retry resends the same webhook-id")
		for _, rc := range got {
			Expect(rc.DeliveryID).To(Equal(d.ID))
		}
	})

	It("exhausts a delivery to an endpoint that always fails, after maxAttempts, and says so on the endpoint", func() {
		ns := useNamespace("e2e-failing")
		rcv := newReceiver("billing (always 503)", false, answer(http.StatusServiceUnavailable))
		apply(policyYAML(ns, "fast", "200ms", 3) + "---\n" +
			endpointYAML(ns, "billing", rcv.URL("/hooks"), "[invoice.*]", "fast", ""))
		kubectlWait("webhookendpoint/billing", "--for=condition=Ready", 30*time.Second)

		a := api.publish(ns, "invoice-1", `{"type":"invoice.paid","data":{"invoice":1}}`)
		kubectlWait("webhookendpoint/billing", "--for=condition=DeliveriesExhausted", 30*time.Second)

		ep := "webhookendpoint/billing"
		Expect(jsonpath(ep, `{.status.deliveries.exhaustedUnresolved}`)).To(Equal("1"))
		Expect(jsonpath(ep, `{.status.recentExhausted[0].reason}`)).To(Equal("MaxAttempts"))
		Expect(jsonpath(ep, `{.status.recentExhausted[0].eventID}`)).To(Equal(a.ID))
		Expect(jsonpath(ep, `{.status.recentExhausted[0].deliveryID}`)).To(Equal(a.Deliveries[0].ID))
		Expect(jsonpath(ep, `{.status.recentExhausted[0].attempts}`)).To(Equal("3"))
		// No secrets and within the replay window: a Retry can still resolve it.
		Expect(jsonpath(ep, `{.status.recentExhausted[0].recovery}`)).To(Equal("Retry"))
		Expect(jsonpath(ep, `{.status.conditions[?(@.type=="Healthy")].status}`)).To(Equal("False"))
		Expect(jsonpath(ep, `{.status.deliveries.delivered}`)).To(Equal("0"))
		Expect(kubectl("get", "-n", ns, "webhookendpoint", "billing")).To(MatchRegexp(`(?m)^billing\s+http://\S+\s+True\s+Closed\s+0\s+1\s`),
			"kubectl get shows the exhausted delivery")

		d := api.deliveryOf(Default, ns, a.ID)
		Expect(d.State).To(Equal("exhausted"))
		Expect(d.ExhaustReason).To(Equal("MaxAttempts"))
		Expect(d.Resolution).To(Equal("unresolved"))
		Expect(d.Attempts).To(Equal(3))
		Expect(rcv.of(a.ID)).To(HaveLen(3))

		By("a DeliveriesExhausted Warning Event on the endpoint")
		Eventually(func() (string, error) {
			return runKubectl("", "get", "events", "-n", ns, "--field-selector", "reason=DeliveriesExhausted",
				"-o", "jsonpath={range .items[*]}{.type} {.involvedObject.kind}/{.involvedObject.name}{\"\\n\"}{end}")
		}).Should(ContainSubstring("Warning WebhookEndpoint/billing"))
	})

	It("exhausts a Callback delivery that is accepted but never acknowledged, with reason AckTimeout", func() {
		ns := useNamespace("e2e-callback")
		rcv := newReceiver("workflow (202, never acknowledges)", false, answer(http.StatusAccepted))
		apply(policyYAML(ns, "fast", "200ms", 2) + "---\n" +
			endpointYAML(ns, "workflow", rcv.URL("/hooks"), "[order.created]", "fast",
				"  acknowledgement:\n    mode: Callback\n    timeout: 1s\n"))
		kubectlWait("webhookendpoint/workflow", "--for=condition=Ready", 30*time.Second)

		a := api.publish(ns, "order-1", `{"type":"order.created","data":{"order":1}}`)
		kubectlWait("webhookendpoint/workflow", "--for=condition=DeliveriesExhausted", 30*time.Second)

		ep := "webhookendpoint/workflow"
		Expect(jsonpath(ep, `{.status.recentExhausted[0].reason}`)).To(Equal("AckTimeout"))
		Expect(jsonpath(ep, `{.status.recentExhausted[0].attempts}`)).To(Equal("2"))
		Expect(jsonpath(ep, `{.status.deliveries.delivered} {.status.deliveries.awaitingAck} {.status.deliveries.exhaustedUnresolved}`)).
			To(Equal("0 0 1"), "a 202 without an acknowledgement is not delivered")

		d := api.deliveryOf(Default, ns, a.ID)
		Expect(d.State).To(Equal("exhausted"))
		Expect(d.ExhaustReason).To(Equal("AckTimeout"))
		got := rcv.of(a.ID)
		Expect(got).To(HaveLen(2), "the missing acknowledgement failed the attempt, which was retried")
		for _, rc := range got {
			Expect(rc.DeliveryID).To(Equal(d.ID), "the receiver learns which delivery to acknowledge")
		}
	})
})
