package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// knownToken is a one-time token the hygiene spec can search for: a
// distinctive prefix and random hex, so that a hit can only be a leak.
func knownToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "tok_hygiene_" + hex.EncodeToString(b[:])
}

// Issue 6, item 4: the whole story runs with known secret values (the
// one-time tokens of the events and the generated whsec_ signing secrets),
// then the manager's log, the Events, the hookkeeper objects, the metrics
// and every API answer the spec received are searched for them. The
// receivers must have seen the tokens (so the search is over values that
// really went through the system), and every corpus must be non-empty.
var _ = Describe("Secrets hygiene", func() {
	It("keeps one-time tokens and signing secrets out of logs, Events, status, metrics and API answers", func() {
		ns := useNamespace("e2e-hygiene")
		originalToken, callbackToken := knownToken(), knownToken()

		// Every API answer this spec receives, the producer's included.
		var (
			answersMu sync.Mutex
			answers   []string
		)
		call := func(method, path, body, key string) (int, []byte, error) {
			status, data, err := api.do(method, path, body, key)
			answersMu.Lock()
			answers = append(answers, fmt.Sprintf("%s %s -> %d %s", method, path, status, data))
			answersMu.Unlock()
			return status, data, err
		}
		get := func(g Gomega, path string, out any) {
			status, data, err := call(http.MethodGet, path, "", "")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(http.StatusOK), "GET %s: %s", path, data)
			g.Expect(json.Unmarshal(data, out)).To(Succeed())
		}
		publish := func(key, body string) publishAnswer {
			GinkgoHelper()
			status, data, err := call(http.MethodPost, "/v1/namespaces/"+ns+"/events", body, key)
			Expect(err).NotTo(HaveOccurred())
			Expect(status).To(Equal(http.StatusCreated), "publishing: %s", data)
			var a publishAnswer
			Expect(json.Unmarshal(data, &a)).To(Succeed())
			return a
		}
		event := func(g Gomega, id string) eventView {
			var ev eventView
			get(g, "/v1/namespaces/"+ns+"/events/"+id, &ev)
			return ev
		}
		deliveryOf := func(g Gomega, eventID string) deliveryView {
			var list struct {
				Items []deliveryView `json:"items"`
			}
			get(g, "/v1/namespaces/"+ns+"/deliveries?event="+eventID, &list)
			g.Expect(list.Items).To(HaveLen(1), "deliveries of event %s", eventID)
			return list.Items[0]
		}
		attempts := func(g Gomega, deliveryID string) []attemptView {
			var list struct {
				Items []attemptView `json:"items"`
			}
			get(g, "/v1/namespaces/"+ns+"/deliveries/"+deliveryID+"/attempts", &list)
			return list.Items
		}

		var outage atomic.Bool
		outage.Store(true)
		confirmations := newReceiver("confirmations (503 during the outage; verifies signatures)", true, func(int, *received) int {
			if outage.Load() {
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		})
		var (
			mintedMu sync.Mutex
			minted   = map[string]string{} // original event ID -> fresh token
		)
		producer := newReceiver("producer (reissue handler; verifies signatures)", true, func(_ int, rc *received) int {
			if rc.Type != "hookkeeper.reissue.requested" {
				return http.StatusNoContent
			}
			orig, _ := rc.Data["originalEventID"].(string)
			mintedMu.Lock()
			token, ok := minted[orig]
			if !ok {
				token = knownToken()
				minted[orig] = token
			}
			mintedMu.Unlock()
			body := fmt.Sprintf(`{"type":"fan.confirmation_requested","data":{"fan":7},"secrets":{"confirmToken":%q},"reissueOf":%q}`, token, orig)
			status, answer, err := call(http.MethodPost, "/v1/namespaces/"+ns+"/events", body, "reissue-of-"+orig)
			if err != nil || (status != http.StatusCreated && status != http.StatusOK) {
				GinkgoWriter.Printf("producer: publishing the replacement of %s: %d %s %v\n", orig, status, answer, err)
				return http.StatusBadGateway
			}
			return http.StatusNoContent
		})
		reviews := newReceiver("reviews (Callback: 202, then a signed rejection)", true, answer(http.StatusAccepted))

		apply(policyYAML(ns, "fast", "200ms", 3) + "---\n" +
			endpointYAML(ns, "fan-confirmations", confirmations.URL("/confirmations"), "[fan.confirmation_requested]", "fast", "") + "---\n" +
			endpointYAML(ns, "producer", producer.URL("/producer"), "[hookkeeper.reissue.requested]", "fast", "") + "---\n" +
			endpointYAML(ns, "reviews", reviews.URL("/reviews"), "[fan.review_requested]", "fast",
				"  acknowledgement:\n    mode: Callback\n    timeout: 30s\n"))
		kubectl("wait", "-n", ns, "webhookendpoint", "--all", "--for=condition=Ready", "--timeout=30s")
		confirmationsSecret := signingSecret("fan-confirmations")
		producerSecret := signingSecret("producer")
		reviewsSecret := signingSecret("reviews")
		confirmations.useSecret(confirmationsSecret)
		producer.useSecret(producerSecret)
		reviews.useSecret(reviewsSecret)

		By("a confirmation with a known one-time token, to a receiver that is down until the horizon")
		original := publish("confirm-fan-7",
			fmt.Sprintf(`{"type":"fan.confirmation_requested","data":{"fan":7},"secrets":{"confirmToken":%q}}`, originalToken)).ID

		By("a review request with a known token, accepted with 202 and then rejected with a signed acknowledgement")
		review := publish("review-fan-7",
			fmt.Sprintf(`{"type":"fan.review_requested","data":{"fan":7},"secrets":{"reviewToken":%q}}`, callbackToken)).ID
		var reviewDelivery string
		Eventually(func(g Gomega) {
			got := reviews.of(review)
			g.Expect(got).NotTo(BeEmpty())
			g.Expect(got[0].Verified).To(BeTrue())
			g.Expect(got[0].Status).To(Equal(http.StatusAccepted))
			reviewDelivery = got[0].DeliveryID
		}).Should(Succeed())
		Expect(reviewDelivery).NotTo(BeEmpty())
		Eventually(func(g Gomega) {
			// 409 NotAwaitingAck until the engine has recorded the 202.
			status, data := postAck(reviewsSecret, reviewDelivery,
				fmt.Sprintf(`{"deliveryID":%q,"outcome":"rejected","reason":"review declined"}`, reviewDelivery))
			answersMu.Lock()
			answers = append(answers, fmt.Sprintf("POST /v1/acks/%s -> %d %s", reviewDelivery, status, data))
			answersMu.Unlock()
			g.Expect(status).To(Equal(http.StatusOK), "ack: %s", data)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			d := deliveryOf(g, review)
			g.Expect(d.State).To(Equal("exhausted"))
			g.Expect(d.ExhaustReason).To(Equal("AckRejected"))
			g.Expect(event(g, review).SecretsScrubbed).To(BeTrue())
			attempts(g, d.ID)
		}).Should(Succeed())

		By("the confirmation exhausted and its token scrubbed")
		kubectlWait("webhookendpoint/fan-confirmations", "--for=condition=DeliveriesExhausted", 30*time.Second)
		Expect(confirmations.of(original)).To(HaveLen(3))
		var d deliveryView
		Eventually(func(g Gomega) {
			g.Expect(event(g, original).SecretsScrubbed).To(BeTrue())
			d = deliveryOf(g, original)
			g.Expect(d.State).To(Equal("exhausted"))
			g.Expect(attempts(g, d.ID)).To(HaveLen(3))
		}).Should(Succeed())
		outage.Store(false)

		By("a Retry refused with ReissueRequired")
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
		Expect(jsonpath("deliveryrecovery/retry-confirmations", `{.status.counts.refused} {.status.counts.retried}`)).To(Equal("1 0"))

		By("an Auto recovery: the producer publishes a replacement with a second known token")
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
		replacement := jsonpath("deliveryrecovery/recover-confirmations", `{.status.items[0].newEventID}`)
		Expect(replacement).NotTo(BeEmpty())
		mintedMu.Lock()
		freshToken := minted[original]
		mintedMu.Unlock()
		Expect(freshToken).To(HavePrefix("tok_hygiene_"))
		Eventually(func(g Gomega) {
			rd := deliveryOf(g, replacement)
			g.Expect(rd.State).To(Equal("delivered"))
			g.Expect(event(g, replacement).ReissueOf).To(Equal(original))
			attempts(g, rd.ID)
		}).Should(Succeed())
		// Read everything once more, now that the story is over.
		event(Default, original)
		attempts(Default, deliveryOf(Default, original).ID)
		event(Default, review)
		attempts(Default, deliveryOf(Default, review).ID)

		By("the Events of the exhaustions having been recorded")
		Eventually(func() (string, error) {
			return runKubectl("", "get", "events", "-n", ns, "--field-selector", "reason=DeliveriesExhausted",
				"-o", "jsonpath={range .items[*]}{.involvedObject.name}{\"\\n\"}{end}")
		}).Should(And(ContainSubstring("fan-confirmations"), ContainSubstring("reviews")))

		By("the tokens and the signing secrets having really gone through: the receivers saw them")
		tokens := map[string]string{"original token": originalToken, "replacement token": freshToken, "callback token": callbackToken}
		secrets := map[string]sensitive.Bytes{"fan-confirmations": confirmationsSecret, "producer": producerSecret, "reviews": reviewsSecret}
		for _, rc := range confirmations.of(original) {
			Expect(rc.Verified).To(BeTrue())
			Expect(rc.Data).To(HaveKeyWithValue("confirmToken", originalToken))
		}
		got := confirmations.of(replacement)
		Expect(got).NotTo(BeEmpty())
		Expect(got[len(got)-1].Verified).To(BeTrue())
		Expect(got[len(got)-1].Data).To(HaveKeyWithValue("confirmToken", freshToken))
		Expect(reviews.of(review)[0].Data).To(HaveKeyWithValue("reviewToken", callbackToken))
		verifiedReissue := false
		for _, rc := range producer.received() {
			verifiedReissue = verifiedReissue || (rc.Type == "hookkeeper.reissue.requested" && rc.Verified)
		}
		Expect(verifiedReissue).To(BeTrue(), "the producer verified a reissue request with its signing secret")

		By("collecting the corpora: manager log, Events, hookkeeper objects, metrics, API answers")
		logData, err := os.ReadFile(managerLog)
		Expect(err).NotTo(HaveOccurred())
		eventsYAML := kubectl("get", "events", "-A", "-o", "yaml")
		objectsYAML := kubectl("get", "hookkeeper", "-A", "-o", "yaml")
		metricsData := metricsText()
		answersMu.Lock()
		apiAnswers := strings.Join(answers, "\n")
		answerCount := len(answers)
		answersMu.Unlock()

		corpora := map[string]string{
			"manager log":                              string(logData),
			"kubectl get events -A -o yaml":            eventsYAML,
			"kubectl get hookkeeper -A -o yaml":        objectsYAML,
			"metrics":                                  metricsData,
			fmt.Sprintf("%d API answers", answerCount): apiAnswers,
		}
		// Non-empty, and about this story: a search over nothing cannot pass.
		Expect(strings.Count(string(logData), "\n")).To(BeNumerically(">", 10), "the manager log")
		Expect(eventsYAML).To(ContainSubstring("namespace: " + ns))
		Expect(eventsYAML).To(ContainSubstring("DeliveriesExhausted"))
		Expect(objectsYAML).To(ContainSubstring(original), "the endpoint status names the exhausted event")
		Expect(objectsYAML).To(ContainSubstring(replacement), "the recovery status names the replacement")
		Expect(metricsData).To(ContainSubstring("hookkeeper_delivery_attempts_total"))
		Expect(metricsData).To(ContainSubstring("hookkeeper_secrets_scrubbed_total"))
		Expect(answerCount).To(BeNumerically(">=", 15))
		for _, id := range []string{original, replacement, review, reviewDelivery} {
			Expect(apiAnswers).To(ContainSubstring(id))
		}

		By("searching every corpus for every known secret value")
		var leaks []string
		search := func(what, value string) {
			for name, corpus := range corpora {
				if strings.Contains(corpus, value) {
					leaks = append(leaks, fmt.Sprintf("%s appears in the %s", what, name))
				}
			}
		}
		for what, token := range tokens {
			Expect(token).To(HavePrefix("tok_hygiene_"))
			search(what, token)
		}
		for endpoint, s := range secrets {
			Expect(string(s)).To(HavePrefix("whsec_"))
			// The key without its prefix: a leak of either form is caught.
			key := strings.TrimPrefix(string(s), "whsec_")
			Expect(len(key)).To(BeNumerically(">=", 24))
			search("the signing secret of "+endpoint, key)
		}
		// The search itself finds what is there.
		Expect(strings.Contains(fmt.Sprint(reviews.of(review)[0].Data), callbackToken)).To(BeTrue())
		Expect(leaks).To(BeEmpty())
	})
})

// postAck posts a Callback acknowledgement signed with the endpoint's
// secret, as a receiver would (the signature alone authenticates it).
func postAck(secret sensitive.Bytes, deliveryID, body string) (int, []byte) {
	GinkgoHelper()
	msgID := "ack_" + deliveryID
	now := time.Now()
	sig, err := signing.Sign(secret, msgID, now, []byte(body))
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequest(http.MethodPost, api.base+"/v1/acks/"+deliveryID, strings.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(signing.HeaderID, msgID)
	req.Header.Set(signing.HeaderTimestamp, fmt.Sprint(now.Unix()))
	req.Header.Set(signing.HeaderSignature, sig)
	resp, err := api.client.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, data
}
