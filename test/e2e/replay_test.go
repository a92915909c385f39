package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// Issue #23's replay, end to end: "send billing everything of order.*
// since 09:00", billing being created after the events. What can be sent
// again goes under its own webhook-id; a scrubbed one-time secret and a
// pruned payload are refused per event; applied again after its TTL, the
// replay sends nothing; with onUnreplayable Reissue, the producer mints a
// replacement addressed to billing alone.
var _ = Describe("Replay of a window of events to an endpoint created after them", func() {
	It("replays what it can under the same identity, refuses the rest per event, and sends nothing when applied again", func() {
		ns := useNamespace("e2e-replay")
		ok := func(int, *received) int { return http.StatusNoContent }
		orders := newReceiver("orders", true, ok)
		audit := newReceiver("audit (payloads kept 1s)", true, ok)
		// The producer's reissue handler mints a fresh token and publishes
		// the replacement addressed to the endpoint the request names.
		producer := newReceiver("producer (reissue handler)", true, func(_ int, rc *received) int {
			if rc.Type != "hookkeeper.reissue.requested" {
				return http.StatusNoContent
			}
			orig, _ := rc.Data["originalEventID"].(string)
			endpoint, _ := rc.Data["endpoint"].(string)
			var b [8]byte
			_, _ = rand.Read(b[:])
			body := fmt.Sprintf(`{"type":"order.created","data":{"order":3},"secrets":{"claimToken":"tok_%s"},"reissueOf":%q,"endpoint":%q}`,
				hex.EncodeToString(b[:]), orig, strings.TrimPrefix(endpoint, ns+"/"))
			status, answer, err := api.do(http.MethodPost, "/v1/namespaces/"+ns+"/events", body, "reissue-of-"+orig)
			if err != nil || (status != http.StatusCreated && status != http.StatusOK) {
				GinkgoWriter.Printf("producer: publishing the replacement of %s: %d %s %v\n", orig, status, answer, err)
				return http.StatusBadGateway
			}
			return http.StatusNoContent
		})
		apply(policyYAML(ns, "fast", "200ms", 3) + "---\n" +
			policyYAML(ns, "brief", "200ms", 3) + "    payloads: 1s\n---\n" +
			endpointYAML(ns, "orders", orders.URL("/orders"), "[order.*]", "fast", "") + "---\n" +
			endpointYAML(ns, "audit", audit.URL("/audit"), "[audit.*]", "brief", "") + "---\n" +
			endpointYAML(ns, "producer", producer.URL("/producer"), "[hookkeeper.reissue.requested]", "fast", ""))
		kubectl("wait", "-n", ns, "webhookendpoint", "--all", "--for=condition=Ready", "--timeout=30s")
		orders.useSecret(signingSecret("orders"))
		audit.useSecret(signingSecret("audit"))
		producer.useSecret(signingSecret("producer"))

		By("events before and inside the window, of the types asked and others")
		before := api.publish(ns, "before", `{"type":"order.created","data":{"order":0}}`).ID
		// The window starts on the next whole second (metav1.Time keeps
		// seconds), after the event above.
		since := time.Now().Truncate(time.Second).Add(time.Second)
		Eventually(func() bool { return time.Now().After(since) }).WithTimeout(3 * time.Second).Should(BeTrue())
		created := api.publish(ns, "o1", `{"type":"order.created","data":{"order":1}}`).ID
		paid := api.publish(ns, "o2", `{"type":"order.paid","data":{"order":1}}`).ID
		invoice := api.publish(ns, "i1", `{"type":"invoice.sent","data":{"invoice":1}}`).ID
		secret := api.publish(ns, "s1", `{"type":"order.created","data":{"order":2},"secrets":{"claimToken":"tok_original_7a1"}}`).ID
		logged := api.publish(ns, "a1", `{"type":"audit.logged","data":{"who":"x"}}`).ID
		Eventually(func() []int {
			return []int{len(orders.of(before)), len(orders.of(created)), len(orders.of(paid)), len(orders.of(secret)), len(audit.of(logged))}
		}).WithTimeout(30 * time.Second).Should(Equal([]int{1, 1, 1, 1, 1}))

		By("the one-time secret scrubbed, the audit payload pruned by its 1s retention (retention runs every minute)")
		Eventually(func(g Gomega) {
			ev, _ := api.event(g, ns, secret)
			g.Expect(ev.SecretsScrubbed).To(BeTrue())
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			ev, _ := api.event(g, ns, logged)
			g.Expect(string(ev.Data)).To(Or(BeEmpty(), Equal("null")))
		}).WithTimeout(150 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("billing, created now, and a replay of order.* and audit.* since the window's start")
		billing := newReceiver("billing (created after the events)", true, ok)
		apply(endpointYAML(ns, "billing", billing.URL("/billing"), "[order.*]", "fast", ""))
		kubectlWait("webhookendpoint/billing", "--for=condition=Ready", 30*time.Second)
		billing.useSecret(signingSecret("billing"))
		manifest := fmt.Sprintf(`apiVersion: hookkeeper.dev/v1alpha1
kind: DeliveryRecovery
metadata:
  name: billing-since
  namespace: %s
spec:
  endpointRef:
    name: billing
  action: Replay
  replay:
    since: %q
    eventTypes: ["order.*", "audit.*"]
  ttlSecondsAfterFinished: 5
`, ns, since.UTC().Format(time.RFC3339))
		rec := "deliveryrecovery/billing-since"
		apply(manifest)
		kubectlWait(rec, "--for=condition=Complete", 30*time.Second)
		const outcome = `{.status.counts.matched} {.status.counts.replayed} {.status.counts.refused} {.status.counts.delivered} {.status.startTime}`
		first := jsonpath(rec, outcome)
		Expect(first).To(HavePrefix("4 2 2 2 "))
		Expect(jsonpath(rec, `{range .status.items[*]}{.eventID}={.outcome}/{.reason} {end}`)).To(Equal(fmt.Sprintf(
			"%s=Delivered/ %s=Delivered/ %s=Refused/ReissueRequired %s=Refused/PayloadExpired ", created, paid, secret, logged)),
			"oldest first; invoice.sent and the event before the window are not selected")
		Expect(jsonpath(rec, `{.status.conditions[?(@.type=="ReissueRequired")].status}`)).To(Equal("True"))
		for _, ev := range []string{created, paid} {
			got := billing.of(ev)
			Expect(got).To(HaveLen(1), "billing got %s once, under its own webhook-id:\n%s", ev, billing)
			Expect(got[0].Verified).To(BeTrue())
		}
		for _, ev := range []string{before, invoice, secret, logged} {
			Expect(billing.of(ev)).To(BeEmpty(), "billing got %s", ev)
		}
		Expect(kubectl("get", "-n", ns, rec, "-o", "wide")).To(MatchRegexp(`billing-since\s+billing\s+Replay\s+Complete\s+AllItemsSettled\s+4\s+0\s+0\s+2\s+2`))

		By("deleted by its TTL and applied again (a GitOps sync): the first outcome, nothing sent")
		uid := jsonpath(rec, `{.metadata.uid}`)
		Eventually(func() string { return kubectl("get", "-n", ns, "deliveryrecoveries", "-o", "name") }).
			WithTimeout(30 * time.Second).ShouldNot(ContainSubstring("billing-since"))
		until := time.Now().Truncate(time.Second)                                        // after every event above, before the next
		later := api.publish(ns, "o3", `{"type":"order.created","data":{"order":4}}`).ID // billing's by subscription
		apply(manifest)
		Expect(jsonpath(rec, `{.metadata.uid}`)).NotTo(Equal(uid))
		kubectlWait(rec, "--for=condition=Complete", 30*time.Second)
		Expect(jsonpath(rec, outcome)).To(Equal(first))
		Expect(jsonpath(rec, `{.status.conditions[?(@.type=="Complete")].message}`)).To(ContainSubstring("does not act again"))
		Eventually(func() int { return len(billing.of(later)) }).WithTimeout(30 * time.Second).Should(Equal(1))
		Consistently(func() []int { return []int{len(billing.of(created)), len(billing.of(paid)), len(billing.of(later))} }).
			WithTimeout(2*time.Second).Should(Equal([]int{1, 1, 1}), "nothing was replayed again")

		By("another replay, reissuing what cannot be replayed: the producer's replacement goes to billing alone")
		apply(fmt.Sprintf(`apiVersion: hookkeeper.dev/v1alpha1
kind: DeliveryRecovery
metadata:
  name: billing-reissue
  namespace: %s
spec:
  endpointRef:
    name: billing
  action: Replay
  replay:
    since: %q
    until: %q
    eventTypes: ["order.created"]
    onUnreplayable: Reissue
`, ns, since.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339)))
		rec = "deliveryrecovery/billing-reissue"
		kubectlWait(rec, "--for=condition=Complete", 60*time.Second)
		Expect(jsonpath(rec, `{.status.counts.matched} {.status.counts.replayed} {.status.counts.reissued} {.status.counts.delivered} {.status.counts.refused}`)).
			To(Equal("2 1 1 2 0"))
		replacement := jsonpath(rec, `{.status.items[1].newEventID}`)
		Expect(replacement).NotTo(BeEmpty())
		Expect(billing.of(replacement)).To(HaveLen(1))
		Expect(billing.of(replacement)[0].Data).To(HaveKey("claimToken"))
		Expect(orders.of(replacement)).To(BeEmpty(), "the replacement was addressed to billing")
		Expect(billing.of(created)).To(HaveLen(2), "a new replay sends the event again; billing de-duplicates by webhook-id")
		Expect(billing.of(secret)).To(BeEmpty(), "the scrubbed original is never sent")
	})
})
