package e2e

import (
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("Safe destinations", func() {
	It("refuses endpoints aimed at the cloud metadata address or a private one with a clear condition, and sends them nothing", func() {
		ns := useNamespace("e2e-destinations")
		rcv := newReceiver("allowed (loopback, which --allowed-destination-cidrs allows)", false, answer(http.StatusNoContent))
		apply(policyYAML(ns, "fast", "200ms", 3) + "---\n" +
			endpointYAML(ns, "imds", "http://169.254.169.254/latest/meta-data/iam/security-credentials/", "[order.created]", "fast", "") + "---\n" +
			endpointYAML(ns, "private", "http://10.0.0.1:8080/hooks", "[order.created]", "fast", "") + "---\n" +
			endpointYAML(ns, "allowed", rcv.URL("/hooks"), "[order.created]", "fast", ""))
		kubectlWait("webhookendpoint/allowed", "--for=condition=Ready", 30*time.Second)

		By("the forbidden endpoints saying why, and how to allow them, on their Ready condition")
		ready := func(endpoint string) func() string {
			return func() string {
				return jsonpath("webhookendpoint/"+endpoint, `{.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}`)
			}
		}
		Eventually(ready("imds")).Should(Equal("False/DestinationForbidden"))
		Eventually(ready("private")).Should(Equal("False/DestinationForbidden"))
		message := func(endpoint string) string {
			return jsonpath("webhookendpoint/"+endpoint, `{.status.conditions[?(@.type=="Ready")].message}`)
		}
		Expect(message("imds")).To(HavePrefix("url resolves to 169.254.169.254, a cloud metadata address; " +
			"hookkeeper does not deliver there unless --allowed-destination-cidrs allows it"))
		Expect(message("imds")).To(ContainSubstring("not registered with the delivery engine"))
		Expect(message("private")).To(HavePrefix("url resolves to 10.0.0.1, a private address;"))

		By("an event of their type creating a delivery to the allowed endpoint only")
		a := api.publish(ns, "order-1", `{"type":"order.created","data":{"order":1}}`)
		Expect(a.Deliveries).To(HaveLen(1))
		Expect(a.Deliveries[0].Endpoint).To(Equal("allowed"))
		Eventually(func() int { return len(rcv.of(a.ID)) }).Should(Equal(1))
		Expect(jsonpath("webhookendpoint/imds", `{.status.deliveries.pending}`)).To(Or(BeEmpty(), Equal("0")))
	})
})
