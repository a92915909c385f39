package e2e

import (
	"fmt"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("Endpoint removal", func() {
	It("deletes a paused endpoint with pending deliveries once the engine cancelled them", func() {
		ns := useNamespace("e2e-removal")
		rcv := newReceiver("paused endpoint (must receive nothing)", false, answer(http.StatusNoContent))
		apply(policyYAML(ns, "fast", "200ms", 3) + "---\n" +
			endpointYAML(ns, "paused", rcv.URL("/hooks"), `["*"]`, "fast", "  paused: true\n"))
		kubectlWait("webhookendpoint/paused", "--for=condition=Ready", 30*time.Second)
		Expect(jsonpath("webhookendpoint/paused", "{.metadata.finalizers}")).To(ContainSubstring("hookkeeper.dev/endpoint"))

		By("deliveries accumulating while the endpoint is paused")
		var events []string
		for i := range 2 {
			a := api.publish(ns, fmt.Sprintf("shipment-%d", i), fmt.Sprintf(`{"type":"shipment.sent","data":{"shipment":%d}}`, i))
			Expect(a.Deliveries).To(HaveLen(1))
			Expect(a.Deliveries[0].Endpoint).To(Equal("paused"))
			events = append(events, a.ID)
		}
		for _, id := range events {
			d := api.deliveryOf(Default, ns, id)
			Expect(d.State).To(Equal("scheduled"))
			Expect(d.Attempts).To(BeZero())
		}

		By("kubectl delete returning once the finalizer completed")
		kubectl("delete", "-n", ns, "webhookendpoint", "paused", "--timeout=30s")
		out, err := runKubectl("", "get", "-n", ns, "webhookendpoint", "paused")
		Expect(err).To(MatchError(ContainSubstring("NotFound")), "kubectl get after the delete printed %q", out)

		By("its deliveries cancelled, per the API, and none sent")
		for _, id := range events {
			d := api.deliveryOf(Default, ns, id)
			Expect(d.State).To(Equal("cancelled"))
			Expect(d.Endpoint).To(Equal("paused"))
			Expect(d.Attempts).To(BeZero())
		}
		Expect(rcv.received()).To(BeEmpty())
	})
})
