package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The incident behind lessons 2 and 3 of docs/design.md, as `make demo`
// tells it: a confirmation carrying a one-time token cannot be delivered
// before the horizon; the token is scrubbed; a Retry would deliver a dead
// token and is refused with ReissueRequired; an Auto recovery asks the
// producer, which mints a fresh token and publishes a replacement under a
// new event identity, while the original keeps its history.
var _ = Describe("Recovery of a secret-bearing event", func() {
	It("refuses a Retry once the one-time token is scrubbed, and reissues through the producer", func() {
		ns := useNamespace("e2e-incident")
		const originalToken = "tok_original_0001"

		var outage atomic.Bool
		outage.Store(true)
		confirmations := newReceiver("confirmations (503 during the outage; verifies signatures)", true, func(int, *received) int {
			if outage.Load() {
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		})

		// The producer's reissue handler: it mints a fresh token and
		// publishes the replacement, linked by reissueOf, through the API.
		var (
			mintedMu sync.Mutex
			minted   = map[string]string{} // original event ID -> fresh token
		)
		producer := newReceiver("producer (reissue handler; verifies signatures)", true, func(_ int, rc *received) int {
			if rc.Type != "hookkeeper.reissue.requested" {
				return http.StatusNoContent
			}
			orig, _ := rc.Data["originalEventID"].(string)
			var b [8]byte
			_, _ = rand.Read(b[:])
			token := "tok_" + hex.EncodeToString(b[:])
			body := fmt.Sprintf(`{"type":"fan.confirmation_requested","data":{"fan":7},"secrets":{"confirmToken":%q},"reissueOf":%q}`, token, orig)
			status, answer, err := api.do(http.MethodPost, "/v1/namespaces/"+ns+"/events", body, "reissue-of-"+orig)
			if err != nil || (status != http.StatusCreated && status != http.StatusOK) {
				GinkgoWriter.Printf("producer: publishing the replacement of %s: %d %s %v\n", orig, status, answer, err)
				return http.StatusBadGateway
			}
			mintedMu.Lock()
			if _, ok := minted[orig]; !ok { // a redelivered request replays the first publish
				minted[orig] = token
			}
			mintedMu.Unlock()
			return http.StatusNoContent
		})

		apply(policyYAML(ns, "fast", "200ms", 3) + "---\n" +
			endpointYAML(ns, "fan-confirmations", confirmations.URL("/confirmations"), "[fan.confirmation_requested]", "fast", "") + "---\n" +
			endpointYAML(ns, "producer", producer.URL("/producer"), "[hookkeeper.reissue.requested]", "fast", ""))
		kubectl("wait", "-n", ns, "webhookendpoint", "--all", "--for=condition=Ready", "--timeout=30s")
		confirmations.useSecret(signingSecret("fan-confirmations"))
		producer.useSecret(signingSecret("producer"))

		By("a confirmation with a one-time token meeting a receiver that is down until the horizon")
		published := api.publish(ns, "confirm-fan-7",
			fmt.Sprintf(`{"type":"fan.confirmation_requested","data":{"fan":7},"secrets":{"confirmToken":%q}}`, originalToken))
		Expect(published.SecretNames).To(ConsistOf("confirmToken"))
		original := published.ID
		kubectlWait("webhookendpoint/fan-confirmations", "--for=condition=DeliveriesExhausted", 30*time.Second)
		ep := "webhookendpoint/fan-confirmations"
		Expect(jsonpath(ep, `{.status.deliveries.exhaustedUnresolved}`)).To(Equal("1"))
		Expect(jsonpath(ep, `{.status.recentExhausted[0].eventID}`)).To(Equal(original))
		Expect(jsonpath(ep, `{.status.recentExhausted[0].reason}`)).To(Equal("MaxAttempts"))
		Expect(jsonpath(ep, `{.status.recentExhausted[0].recovery}`)).To(Equal("Reissue"), "the token is gone: only a reissue can help")
		attemptsSeen := confirmations.of(original)
		Expect(attemptsSeen).To(HaveLen(3))
		for _, rc := range attemptsSeen {
			Expect(rc.Verified).To(BeTrue())
			Expect(rc.Data).To(HaveKeyWithValue("confirmToken", originalToken), "secrets are merged into data on the wire")
		}

		By("the token scrubbed, per the read API")
		ev, raw := api.event(Default, ns, original)
		Expect(ev.SecretsScrubbed).To(BeTrue())
		Expect(ev.SecretNames).To(ConsistOf("confirmToken"))
		Expect(string(raw)).NotTo(ContainSubstring(originalToken))
		d := api.deliveryOf(Default, ns, original)
		Expect(d.State).To(Equal("exhausted"))
		attempts, rawAttempts := api.attempts(Default, ns, d.ID)
		Expect(attempts).To(HaveLen(3))
		Expect(string(rawAttempts)).NotTo(ContainSubstring(originalToken))
		outage.Store(false)

		By("a Retry refused with ReissueRequired: it could only deliver a token that no longer exists")
		apply(fmt.Sprintf(`apiVersion: hookkeeper.dev/v1alpha1
kind: DeliveryRecovery
metadata:
  name: retry-confirmations
  namespace: %s
spec:
  endpointRef:
    name: fan-confirmations
  action: Retry
`, ns))
		kubectlWait("deliveryrecovery/retry-confirmations", "--for=condition=Complete", 30*time.Second)
		rec := "deliveryrecovery/retry-confirmations"
		Expect(jsonpath(rec, `{.status.conditions[?(@.type=="ReissueRequired")].status}`)).To(Equal("True"))
		Expect(jsonpath(rec, `{.status.counts.matched} {.status.counts.refused} {.status.counts.retried}`)).To(Equal("1 1 0"))
		Expect(jsonpath(rec, `{.status.items[0].outcome} {.status.items[0].reason}`)).To(Equal("Refused ReissueRequired"))
		Expect(confirmations.of(original)).To(HaveLen(3), "nothing was resent")

		By("an Auto recovery asking the producer, which publishes a replacement with a fresh token")
		apply(fmt.Sprintf(`apiVersion: hookkeeper.dev/v1alpha1
kind: DeliveryRecovery
metadata:
  name: recover-confirmations
  namespace: %s
spec:
  endpointRef:
    name: fan-confirmations
  action: Auto
`, ns))
		kubectlWait("deliveryrecovery/recover-confirmations", "--for=condition=Complete", 30*time.Second)
		rec = "deliveryrecovery/recover-confirmations"
		Expect(jsonpath(rec, `{.status.counts.reissued} {.status.counts.delivered} {.status.counts.refused}`)).To(Equal("1 1 0"))
		replacement := jsonpath(rec, `{.status.items[0].newEventID}`)
		Expect(replacement).NotTo(BeEmpty())
		Expect(replacement).NotTo(Equal(original), "a reissue is a new event identity")

		By("the replacement arriving under the new webhook-id, with the new token")
		mintedMu.Lock()
		fresh := minted[original]
		mintedMu.Unlock()
		Expect(fresh).To(HavePrefix("tok_"))
		Expect(fresh).NotTo(Equal(originalToken))
		got := confirmations.of(replacement)
		Expect(got).NotTo(BeEmpty())
		last := got[len(got)-1]
		Expect(last.Status).To(Equal(http.StatusNoContent))
		Expect(last.Verified).To(BeTrue())
		Expect(last.Data).To(HaveKeyWithValue("confirmToken", fresh))
		Expect(confirmations.of(original)).To(HaveLen(3), "the original identity was never sent again")
		for _, rc := range producer.received() {
			if rc.Type == "hookkeeper.reissue.requested" {
				Expect(rc.Verified).To(BeTrue())
				Expect(rc.Data).To(HaveKeyWithValue("originalEventID", original))
				Expect(fmt.Sprint(rc.Data)).NotTo(ContainSubstring("tok_"), "a reissue request carries no secret")
			}
		}

		newEv, _ := api.event(Default, ns, replacement)
		Expect(newEv.ReissueOf).To(Equal(original))
		Expect(api.deliveryOf(Default, ns, replacement).State).To(Equal("delivered"))

		By("the original keeping its history and gaining a resolution")
		d = api.deliveryOf(Default, ns, original)
		Expect(d.State).To(Equal("exhausted"))
		Expect(d.Attempts).To(Equal(3))
		Expect(d.Resolution).To(Equal("reissued"))
		attempts, _ = api.attempts(Default, ns, d.ID)
		Expect(attempts).To(HaveLen(3))
		oldEv, raw := api.event(Default, ns, original)
		Expect(oldEv.SecretsScrubbed).To(BeTrue())
		Expect(string(raw)).NotTo(ContainSubstring(fresh))
	})
})
