package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

var _ = Describe("Delivery history in kubectl", func() {
	It("tells the reissue story with kubectl get/describe through kube-apiserver and the APIService", func() {
		ns := useNamespace("e2e-delivery-api")
		By("the suite's kubeconfig names kube-apiserver, which routes the group to the manager")
		Expect(kubectl("get", "apiservice", testenv.DeliveryAPIServiceAPI, "-o",
			`jsonpath={.spec.service.namespace}/{.spec.service.name} {.status.conditions[?(@.type=="Available")].status}`)).
			To(Equal(testenv.DeliveryAPINamespace + "/" + testenv.DeliveryAPIService + " True"))
		var accept atomic.Bool
		rcv := newReceiver("billing (503 until accepting)", false, func(int, *received) int {
			if accept.Load() {
				return http.StatusNoContent
			}
			return http.StatusServiceUnavailable
		})
		apply(policyYAML(ns, "fast", "200ms", 2) + "---\n" +
			endpointYAML(ns, "billing", rcv.URL("/billing"), "[order.paid]", "fast", ""))
		kubectlWait("webhookendpoint/billing", "--for=condition=Ready", 30*time.Second)
		secret := string(signingSecret("billing").Reveal())

		By("an event exhausting its delivery, seen with kubectl get deliveries")
		orig := api.publish(ns, "paid-1", `{"type":"order.paid","data":{"order":1}}`)
		var exhausted string
		Eventually(func(g Gomega) {
			out, err := runKubectl("", "get", "deliveries", "-n", ns,
				"--field-selector", "spec.endpoint=billing,status.state=Exhausted", "-o", "jsonpath={.items[*].metadata.name}")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strings.Fields(out)).To(HaveLen(1))
			exhausted = strings.TrimSpace(out)
		}).WithTimeout(60 * time.Second).Should(Succeed())
		table := kubectl("get", "deliveries", "-n", ns)
		Expect(table).To(ContainSubstring("LAST STATUS"))
		Expect(table).To(MatchRegexp(exhausted + `\s+order.paid\s+billing\s+Exhausted\s+2\s+503\s+MaxAttempts\s+Unresolved`))
		desc := kubectl("describe", "delivery", exhausted, "-n", ns)
		Expect(desc).To(MatchRegexp(`Status Code:\s+503`))
		Expect(strings.Count(desc, "Number:")).To(Equal(2), desc)

		By("a Reissue recovery, after which the receiver accepts")
		accept.Store(true)
		apply(fmt.Sprintf(`apiVersion: hookkeeper.dev/v1alpha1
kind: DeliveryRecovery
metadata:
  name: reissue-billing
  namespace: %s
spec:
  endpointRef:
    name: billing
  action: Reissue
`, ns))
		kubectlWait("deliveryrecovery/reissue-billing", "--for=condition=Complete", 30*time.Second)

		By("the story with kubectl alone: what replaced it, the new event and its delivery")
		var newEvent string
		Eventually(func(g Gomega) {
			out, err := runKubectl("", "get", "delivery", exhausted, "-n", ns,
				"-o", "jsonpath={.status.resolution} {.status.replacedBy.event}")
			g.Expect(err).NotTo(HaveOccurred())
			f := strings.Fields(out)
			g.Expect(f).To(HaveLen(2))
			g.Expect(f[0]).To(Equal("Reissued"))
			newEvent = f[1]
		}).Should(Succeed())
		Expect(newEvent).NotTo(Equal(orig.ID))
		Expect(kubectl("get", "deliveries", "-n", ns)).To(MatchRegexp(exhausted + `.*Reissued\s+event/` + newEvent))
		Eventually(func(g Gomega) {
			out, err := runKubectl("", "get", "deliveries", "-n", ns,
				"--field-selector", "spec.event="+newEvent, "-o", "jsonpath={.items[*].status.state}")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(Equal("Delivered"))
		}).Should(Succeed())
		Expect(kubectl("get", "webhookevent", newEvent, "-n", ns, "-o", "jsonpath={.spec.reissueOf}")).To(Equal(orig.ID))
		events := kubectl("get", "webhookevents", "-n", ns, "-o", "yaml")
		Expect(events).To(ContainSubstring(orig.ID))

		By("no secret in any answer")
		for _, out := range []string{table, desc, events, kubectl("get", "deliveries", "-n", ns, "-o", "yaml")} {
			Expect(strings.Contains(out, secret)).To(BeFalse(), "the endpoint's signing secret appears in kubectl output")
		}
	})
})
