package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("Fan-out limit", func() {
	It("refuses an event that matches more endpoints than --max-fan-out, records nothing, and accepts it once few enough match", func() {
		ns := useNamespace("e2e-fanout")
		rcv := newReceiver("every endpoint of the namespace", false, answer(http.StatusNoContent))
		manifests := policyYAML(ns, "fast", "200ms", 3)
		names := make([]string, maxFanOut+1)
		for i := range names {
			names[i] = fmt.Sprintf("subscriber-%d", i)
			manifests += "---\n" + endpointYAML(ns, names[i], rcv.URL("/"+names[i]), "[order.*]", "fast", "")
		}
		apply(manifests)
		for _, name := range names {
			kubectlWait("webhookendpoint/"+name, "--for=condition=Ready", 30*time.Second)
		}
		refusedBefore := publishedMetric("fan_out_limit")

		By(fmt.Sprintf("an order.created event matching %d endpoints, over the limit of %d: 422 with a JSON error naming the field", len(names), maxFanOut))
		body := `{"type":"order.created","data":{"order":1}}`
		status, data, err := api.do(http.MethodPost, "/v1/namespaces/"+ns+"/events", body, "order-1")
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", data)
		var refusal struct {
			Error struct{ Code, Message, Field string } `json:"error"`
		}
		Expect(json.Unmarshal(data, &refusal)).To(Succeed())
		Expect(refusal.Error.Code).To(Equal("FanOutLimitExceeded"))
		Expect(refusal.Error.Field).To(Equal("type"))
		Expect(refusal.Error.Message).To(ContainSubstring(fmt.Sprintf(`"order.created" matches %d WebhookEndpoints in namespace %s`, len(names), ns)))
		Expect(publishedMetric("fan_out_limit")).To(Equal(refusedBefore + 1))

		By("nothing recorded: no delivery in the namespace, no request to any receiver")
		for _, name := range names {
			var list struct {
				Items []json.RawMessage `json:"items"`
			}
			api.getJSON(Default, "/v1/namespaces/"+ns+"/deliveries?endpoint="+name, &list)
			Expect(list.Items).To(BeEmpty(), "deliveries to %s", name)
		}
		Expect(rcv.received()).To(BeEmpty())

		By("one endpoint removed: the same Idempotency-Key now publishes the event to the others")
		kubectl("delete", "-n", ns, "webhookendpoint", names[0], "--timeout=30s")
		Eventually(func(g Gomega) int {
			status, _, err := api.do(http.MethodPost, "/v1/namespaces/"+ns+"/events", body, "order-1")
			g.Expect(err).NotTo(HaveOccurred())
			return status
		}).Should(Equal(http.StatusCreated))
		Eventually(func() []string {
			var paths []string
			for _, r := range rcv.received() {
				paths = append(paths, r.Path)
			}
			return paths
		}).Should(ConsistOf("/"+names[1], "/"+names[2], "/"+names[3]))
	})
})

// publishedMetric reads hookkeeper_events_published_total{result=...} from
// the manager's metrics endpoint (0 when the series does not exist yet).
func publishedMetric(result string) int {
	GinkgoHelper()
	prefix := `hookkeeper_events_published_total{result="` + result + `"} `
	for line := range strings.Lines(metricsText()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			var n int
			_, err := fmt.Sscan(v, &n)
			Expect(err).NotTo(HaveOccurred(), line)
			return n
		}
	}
	return 0
}
