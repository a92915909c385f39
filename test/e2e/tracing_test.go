package e2e

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/hookkeeper/hookkeeper/test/receivers"
)

var _ = Describe("Traces", func() {
	It("continues the publisher's trace through every attempt to the receiver, exported to a real OTLP receiver, and shows its ID in kubectl", func() {
		ns := useNamespace("e2e-traces")
		const traceID, publisherSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"

		By("a receiver that answers 503 twice, then 204, and keeps each request's traceparent")
		var mu sync.Mutex
		var seen []string
		rcv := &receiver{name: "traced (503, 503, 204)", Receiver: receivers.New(receivers.Options{
			Respond: func(r *http.Request, rc *received) int {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, r.Header.Get("Traceparent"))
				if rc.N <= 2 {
					return http.StatusServiceUnavailable
				}
				return http.StatusNoContent
			}})}
		DeferCleanup(rcv.Close)
		specReceivers = append(specReceivers, rcv)
		apply(policyYAML(ns, "fast", "200ms", 3) + "---\n" +
			endpointYAML(ns, "orders", rcv.URL("/orders"), "[order.created]", "fast", ""))
		kubectlWait("webhookendpoint/orders", "--for=condition=Ready", 30*time.Second)

		By("publishing with the publisher's traceparent")
		req, err := http.NewRequest(http.MethodPost, api.base+"/v1/namespaces/"+ns+"/events",
			strings.NewReader(`{"type":"order.created","data":{"order":1}}`))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+api.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Traceparent", "00-"+traceID+"-"+publisherSpan+"-01")
		resp, err := api.client.Do(req)
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusCreated))

		By("three attempts, each carrying a traceparent of its own in the publisher's trace")
		Eventually(func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }).Should(Equal(3))
		mu.Lock()
		attemptSpans := map[string]bool{}
		for i, tp := range seen {
			parts := strings.Split(tp, "-")
			Expect(parts).To(HaveLen(4), "attempt %d's traceparent %q", i+1, tp)
			Expect(parts[1]).To(Equal(traceID), "attempt %d's trace", i+1)
			attemptSpans[parts[2]] = true
		}
		mu.Unlock()
		Expect(attemptSpans).To(HaveLen(3), "each attempt is a span of its own")

		By("the spans at the OTLP receiver: the publish, a child of the publisher's span; each attempt, a child of the publish and linked to it")
		var publish span
		var attempts []span
		Eventually(func(g Gomega) {
			publish, attempts = span{}, nil
			for _, s := range traces.spans() {
				if s.traceID != traceID {
					continue
				}
				switch s.name {
				case "hookkeeper.publish":
					publish = s
				case "hookkeeper.attempt":
					attempts = append(attempts, s)
				}
			}
			g.Expect(publish.spanID).NotTo(BeEmpty(), "the publish span")
			g.Expect(attempts).To(HaveLen(3))
		}).Should(Succeed())
		Expect(publish.parentSpanID).To(Equal(publisherSpan))
		Expect(publish.attrs).To(HaveKeyWithValue("hookkeeper.namespace", ns))
		Expect(publish.attrs).To(HaveKeyWithValue("http.response.status_code", int64(http.StatusCreated)))
		numbers := map[int64]ptrace.StatusCode{}
		for _, a := range attempts {
			Expect(a.parentSpanID).To(Equal(publish.spanID))
			Expect(a.links).To(Equal([]string{publish.spanID}))
			Expect(attemptSpans).To(HaveKey(a.spanID), "the span whose traceparent the receiver saw")
			Expect(a.attrs).To(HaveKeyWithValue("hookkeeper.endpoint", ns+"/orders"))
			numbers[a.attrs["hookkeeper.attempt.number"].(int64)] = a.status
		}
		Expect(numbers).To(Equal(map[int64]ptrace.StatusCode{1: ptrace.StatusCodeError, 2: ptrace.StatusCodeError, 3: ptrace.StatusCodeUnset}))

		By("the attempt duration histogram's exemplars naming the trace, in the OpenMetrics format")
		mreq, err := http.NewRequest(http.MethodGet, metricsURL, nil)
		Expect(err).NotTo(HaveOccurred())
		mreq.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
		mresp, err := http.DefaultClient.Do(mreq)
		Expect(err).NotTo(HaveOccurred())
		exposition, err := io.ReadAll(mresp.Body)
		mresp.Body.Close()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(exposition)).To(MatchRegexp(`hookkeeper_attempt_duration_seconds_bucket\{.*\} \d+ # \{trace_id="` + traceID + `"\}`))

		By("kubectl get deliveries -o wide showing the trace ID")
		Eventually(func() string { return kubectl("get", "deliveries", "-n", ns, "-o", "wide") }).Should(ContainSubstring(traceID))
		Expect(kubectl("get", "deliveries", "-n", ns, "-o", "jsonpath={.items[*].spec.traceID}")).To(Equal(traceID))
	})

	It("traces an event created with kubectl create webhookevent: its publish span, its attempt, the same trace ID in kubectl", func() {
		ns := useNamespace("e2e-traces-kube")
		rcv := newReceiver("traced through the aggregated API", false, answer(http.StatusNoContent))
		apply(policyYAML(ns, "fast", "200ms", 3) + "---\n" +
			endpointYAML(ns, "orders", rcv.URL("/orders"), "[order.created]", "fast", ""))
		kubectlWait("webhookendpoint/orders", "--for=condition=Ready", 30*time.Second)
		manifest := "apiVersion: delivery.hookkeeper.dev/v1alpha1\nkind: WebhookEvent\nmetadata:\n  namespace: " + ns +
			"\nspec:\n  type: order.created\n  data: {\"order\": 2}\n"
		out, err := runKubectl(manifest, "create", "-f", "-", "-o", "jsonpath={.metadata.name}")
		Expect(err).NotTo(HaveOccurred(), out)
		eventID := strings.TrimSpace(out)
		Eventually(func() []received { return rcv.of(eventID) }).Should(HaveLen(1))

		var traceID string
		Eventually(func() string {
			traceID = kubectl("get", "deliveries", "-n", ns, "-o", "jsonpath={.items[*].spec.traceID}")
			return traceID
		}).ShouldNot(BeEmpty())
		Eventually(func(g Gomega) {
			names := map[string]int{}
			for _, s := range traces.spans() {
				if s.traceID == traceID && s.attrs["hookkeeper.event.id"] == eventID {
					names[s.name]++
				}
			}
			g.Expect(names).To(Equal(map[string]int{"hookkeeper.publish": 1, "hookkeeper.attempt": 1}))
		}).Should(Succeed())
	})
})
