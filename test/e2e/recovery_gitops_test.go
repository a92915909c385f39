package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// A DeliveryRecovery that GitOps can own: applied in one go with the
// endpoint it names, it waits for the endpoint instead of failing; deleted
// and applied again from the same manifest, it reports its first outcome
// and resends nothing (docs/adr/0007-recovery-identity.md).
var _ = Describe("DeliveryRecovery under GitOps", func() {
	It("applied with the samples in one kubectl apply, waits for its endpoint and then runs", func() {
		ns := useNamespace("e2e-recovery-samples")
		rcv := newReceiver("sample endpoints", false, answer(http.StatusNoContent))

		// Every sample in one apply, as a GitOps tool syncs a directory.
		// The URLs are rewritten to loopback (no traffic leaves the
		// machine); n8n-ingress, the recovery's endpoint, gets ::1, which
		// the manager's allow-list (127.0.0.0/8) refuses, so that it stays
		// unregistered until its URL is fixed below.
		files, err := filepath.Glob("../../config/samples/*.yaml")
		Expect(err).NotTo(HaveOccurred())
		Expect(files).NotTo(BeEmpty())
		url := regexp.MustCompile(`(?m)^  url: .*$`)
		var docs []string
		for _, f := range files {
			b, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			doc := string(b)
			target := loopbackURL(doc, rcv, "/"+strings.TrimSuffix(filepath.Base(f), ".yaml"))
			if strings.Contains(doc, "name: n8n-ingress\n") && strings.Contains(doc, "kind: WebhookEndpoint") {
				target = strings.Replace(rcv.URL("/n8n"), "127.0.0.1", "[::1]", 1)
			}
			docs = append(docs, url.ReplaceAllString(doc, "  url: "+target))
		}
		Expect(strings.Join(docs, "")).To(ContainSubstring("kind: DeliveryRecovery"))
		out, err := runKubectl(strings.Join(docs, "---\n"), "apply", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)

		rec := "deliveryrecovery/n8n-outage-2026-11-28"
		kubectlWait(rec, "--for=jsonpath={.status.state}=Waiting", 30*time.Second)
		Expect(jsonpath(rec, `{.status.conditions[?(@.type=="Complete")].status} {.status.conditions[?(@.type=="Complete")].reason}`)).
			To(Equal("False WaitingForEndpoint"))
		// First, perhaps, "not reconciled yet"; then the endpoint's reason.
		Eventually(func() string { return jsonpath(rec, `{.status.conditions[?(@.type=="Complete")].message}`) }).
			WithTimeout(30 * time.Second).
			Should(ContainSubstring(`"n8n-ingress" to be registered with the delivery engine: it is not Ready (DestinationForbidden`))
		Expect(jsonpath(rec, `{.status.conditions[?(@.type=="Failed")].status}`)).To(Equal("False"))
		Expect(jsonpath(rec, `{.status.observedGeneration}`)).To(Equal(jsonpath(rec, `{.metadata.generation}`)))
		Expect(kubectl("get", "-n", ns, rec)).To(MatchRegexp(`n8n-outage-2026-11-28\s+n8n-ingress\s+Auto\s+Waiting`))

		By("the endpoint's URL fixed: the endpoint registers and the recovery runs")
		kubectl("patch", "-n", ns, "webhookendpoint/n8n-ingress", "--type=merge", "-p", fmt.Sprintf(`{"spec":{"url":%q}}`, rcv.URL("/n8n")))
		kubectlWait(rec, "--for=condition=Complete", 30*time.Second)
		Expect(jsonpath(rec, `{.status.state} {.status.conditions[?(@.type=="Complete")].reason} {.status.conditions[?(@.type=="Failed")].status}`)).
			To(Equal("Complete NothingMatched False"))
		Expect(kubectl("get", "-n", ns, rec)).To(MatchRegexp(`n8n-outage-2026-11-28\s+n8n-ingress\s+Auto\s+Complete\s+0`))
	})

	It("deleted and applied again from the same manifest, resends nothing and reports its first outcome", func() {
		ns := useNamespace("e2e-recovery-reapply")
		var outage atomic.Bool
		outage.Store(true)
		orders := newReceiver("orders (503 during outages)", false, func(int, *received) int {
			if outage.Load() {
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		})
		apply(policyYAML(ns, "fast", "200ms", 3) + "---\n" + endpointYAML(ns, "orders", orders.URL("/orders"), "[order.created]", "fast", ""))
		kubectlWait("webhookendpoint/orders", "--for=condition=Ready", 30*time.Second)

		exhaust := func(key string) string {
			GinkgoHelper()
			id := api.publish(ns, key, `{"type":"order.created","data":{"order":1}}`).ID
			Eventually(func() int { return len(orders.of(id)) }).WithTimeout(30 * time.Second).Should(Equal(3))
			Eventually(func(g Gomega) {
				g.Expect(api.deliveryOf(g, ns, id).State).To(Equal("exhausted"))
			}).WithTimeout(30 * time.Second).Should(Succeed())
			return id
		}
		first := exhaust("order-1")
		outage.Store(false)

		manifest := fmt.Sprintf(`apiVersion: hookkeeper.dev/v1alpha1
kind: DeliveryRecovery
metadata:
  name: retry-orders
  namespace: %s
spec:
  endpointRef:
    name: orders
  action: Retry
`, ns)
		rec := "deliveryrecovery/retry-orders"
		apply(manifest)
		kubectlWait(rec, "--for=condition=Complete", 30*time.Second)
		const outcome = `{.status.state} {.status.counts.matched} {.status.counts.retried} {.status.counts.delivered} {.status.items[0].eventID} {.status.startTime}`
		earlier := jsonpath(rec, outcome)
		Expect(earlier).To(HavePrefix("Complete 1 1 1 " + first + " "))
		Expect(orders.of(first)).To(HaveLen(4), "three failed attempts and one retry")

		By("another delivery exhausted after the recovery ran")
		outage.Store(true)
		second := exhaust("order-2")
		outage.Store(false)

		By("the recovery deleted (as its TTL would) and the same manifest applied again (as a GitOps sync would)")
		uid := jsonpath(rec, `{.metadata.uid}`)
		kubectl("delete", "-n", ns, rec, "--wait=true")
		apply(manifest)
		Expect(jsonpath(rec, `{.metadata.uid}`)).NotTo(Equal(uid))
		kubectlWait(rec, "--for=condition=Complete", 30*time.Second)
		Expect(jsonpath(rec, outcome)).To(Equal(earlier), "the first outcome, from the first start")
		Expect(jsonpath(rec, `{.status.conditions[?(@.type=="Complete")].message}`)).To(ContainSubstring("does not act again"))
		Consistently(func() []int { return []int{len(orders.of(first)), len(orders.of(second))} }).
			WithTimeout(2*time.Second).Should(Equal([]int{4, 3}), "nothing was resent")
		Expect(api.deliveryOf(Default, ns, second).Resolution).To(Equal("unresolved"))

		By("another spec under the same name: refused for good, nothing done")
		kubectl("delete", "-n", ns, rec, "--wait=true")
		apply(strings.Replace(manifest, "action: Retry", "action: Dismiss", 1))
		kubectlWait(rec, "--for=condition=Failed", 30*time.Second)
		Expect(jsonpath(rec, `{.status.state} {.status.conditions[?(@.type=="Failed")].reason} {.status.conditions[?(@.type=="Complete")].status} {.status.conditions[?(@.type=="Complete")].reason}`)).
			To(Equal("Failed SpecConflict False Failed"))
		Expect(kubectl("get", "-n", ns, rec)).To(MatchRegexp(`retry-orders\s+orders\s+Dismiss\s+Failed`))
		Expect(api.deliveryOf(Default, ns, second).Resolution).To(Equal("unresolved"))
	})
})
