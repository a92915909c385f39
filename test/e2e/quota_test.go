package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// Issue 43, section 3: a namespace's WebhookQuota, applied with kubectl,
// refuses what is over it at both doors with its own code, and kubectl
// shows what is used.
var _ = Describe("WebhookQuota", func() {
	It("holds a namespace to its events per day at both doors and shows the usage in kubectl", func() {
		ns := useNamespace("e2e-quota")
		rcv := newReceiver("quota", false, answer(http.StatusNoContent))
		apply(policyYAML(ns, "once", "100ms", 1) + "---\n" +
			endpointYAML(ns, "orders", rcv.URL("/orders"), "[order.*]", "once", "") + "---\n" +
			fmt.Sprintf("apiVersion: hookkeeper.dev/v1alpha1\nkind: WebhookQuota\nmetadata:\n  name: default\n  namespace: %s\nspec:\n  hard:\n    eventsPerDay: 3\n", ns))
		kubectlWait("webhookendpoint/orders", "--for=condition=Ready", 30*time.Second)
		kubectlWait("webhookquota/default", "--for=condition=Ready", 30*time.Second)

		By("three events are accepted and delivered")
		for i := range 3 {
			a := api.publish(ns, fmt.Sprintf("q-%d", i), `{"type":"order.created","data":{}}`)
			Eventually(func() int { return len(rcv.of(a.ID)) }).Should(Equal(1))
		}

		By("HTTP: the fourth is 429 QuotaExceeded naming the limit (its Retry-After: internal/httpapi/quota_test.go)")
		status, data, err := api.do(http.MethodPost, "/v1/namespaces/"+ns+"/events", `{"type":"order.created","data":{}}`, "q-3")
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusTooManyRequests), "%s", data)
		var refused struct {
			Error struct {
				Code  string `json:"code"`
				Limit string `json:"limit"`
			} `json:"error"`
		}
		Expect(json.Unmarshal(data, &refused)).To(Succeed())
		Expect([]string{refused.Error.Code, refused.Error.Limit}).To(Equal([]string{"QuotaExceeded", "eventsPerDay"}), "%s", data)

		By("HTTP: a retry of an accepted event is answered as before, not refused")
		status, data, err = api.do(http.MethodPost, "/v1/namespaces/"+ns+"/events", `{"type":"order.created","data":{}}`, "q-0")
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusOK), "%s", data)

		By("kubectl create webhookevent: 429 TooManyRequests, the message naming the limit")
		manifest := fmt.Sprintf("apiVersion: delivery.hookkeeper.dev/v1alpha1\nkind: WebhookEvent\nmetadata:\n  namespace: %s\nspec:\n  type: order.created\n  idempotencyKey: q-kube\n  data: {}\n", ns)
		_, stderr, err := kubectlAt(kubeconfig, manifest, "create", "-f", "-", "-v=6")
		Expect(err).To(HaveOccurred())
		Expect(createStatus(stderr)).To(Equal("429 Too Many Requests"))
		Expect(stderr).To(ContainSubstring("spec.hard.eventsPerDay is 3"))

		By("kubectl get webhookquotas shows what is used and what was refused")
		Eventually(func() string {
			return jsonpath("webhookquota/default", "{.status.used.eventsPerDay}/{.status.used.refusedToday}")
		}, 30*time.Second).Should(Equal("3/2"))
		Expect(kubectl("get", "webhookquotas", "-n", ns)).To(MatchRegexp(`default\s+True\s+`))
	})
})
