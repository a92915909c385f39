package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// breakerPolicyYAML is a RetryPolicy whose circuit breaker is scaled down
// from the defaults (10 failures over 1m, probes from 30s to 10m) to
// seconds: 5 failures over 2s, probes from 2s to 4s, a 2s ramp.
func breakerPolicyYAML(ns, name string) string {
	return fmt.Sprintf(`apiVersion: hookkeeper.dev/v1alpha1
kind: RetryPolicy
metadata:
  name: %s
  namespace: %s
spec:
  backoff:
    strategy: Fixed
    initialDelay: 200ms
    jitterPercent: 0
  horizon:
    maxAge: 30m
  attemptTimeout: 5s
  replayWindow: 1h
  circuitBreaker:
    failures: 5
    minDuration: 2s
    probeInterval: 2s
    maxProbeInterval: 4s
    ramp: 2s
`, name, ns)
}

var _ = Describe("Circuit breaker", func() {
	It("holds a receiver that is down to probes under steady publishing, tells its owner once, then delivers everything once", func() {
		ns := useNamespace("e2e-breaker")
		var up, open atomic.Bool
		var whileOpen atomic.Int64
		rcv := newReceiver("down until up", false, func(int, *received) int {
			if up.Load() {
				return http.StatusNoContent
			}
			if open.Load() {
				whileOpen.Add(1)
			}
			return http.StatusServiceUnavailable
		})
		// One attempt at a time: none is in flight besides the probe once
		// the breaker is open.
		apply(breakerPolicyYAML(ns, "guarded") + "---\n" +
			endpointYAML(ns, "billing", rcv.URL("/hooks"), "[order.created]", "guarded", "  owner: team-billing\n  maxInFlight: 1\n"))
		kubectlWait("webhookendpoint/billing", "--for=condition=Ready", 30*time.Second)

		By("publishing steadily, every 100ms, until the receiver is back and the breaker closed")
		var mu sync.Mutex
		var ids []string
		stop := make(chan struct{})
		publishing := make(chan struct{})
		stopPublishing := sync.OnceFunc(func() { close(stop); <-publishing })
		DeferCleanup(stopPublishing) // also when the spec fails early
		go func() {
			defer GinkgoRecover()
			defer close(publishing)
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				id := api.publish(ns, "steady-"+strconv.Itoa(n), fmt.Sprintf(`{"type":"order.created","data":{"n":%d}}`, n)).ID
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		}()

		By("the breaker opening: kubectl wait on CircuitOpen")
		kubectlWait("webhookendpoint/billing", "--for=condition=CircuitOpen", 2*time.Minute)
		open.Store(true)
		Expect(jsonpath("webhookendpoint/billing", "{.status.breaker.state}/{.status.breaker.reason}")).To(Equal("Open/Failing"))
		Expect(kubectl("get", "-n", ns, "webhookendpoint", "billing")).To(MatchRegexp(`(?m)^NAME.*BREAKER.*\nbilling\s.*\sOpen\s`))

		By("a while of probes only")
		probesNow := func() int {
			n, _ := strconv.Atoi(jsonpath("webhookendpoint/billing", "{.status.breaker.probes}"))
			return n
		}
		// Three more than the status showed once counting began: the
		// ledger may be one ahead of the status, so at least two of them
		// were sent after it (and failed).
		p0 := probesNow()
		Eventually(probesNow).WithTimeout(2 * time.Minute).Should(BeNumerically(">=", p0+3))

		By("the receiver back: the breaker closes, kubectl wait on CircuitOpen=false")
		up.Store(true)
		kubectlWait("webhookendpoint/billing", "--for=condition=CircuitOpen=false", 2*time.Minute)
		Expect(jsonpath("webhookendpoint/billing", "{.status.conditions[?(@.type=='CircuitOpen')].reason}")).To(Equal("ProbeSucceeded"))
		stopPublishing()

		By("every answer while open a failed probe: none of the retries of the held deliveries reached the receiver")
		probes, err := strconv.Atoi(jsonpath("webhookendpoint/billing", "{.status.breaker.probes}"))
		Expect(err).NotTo(HaveOccurred())
		Expect(whileOpen.Load()).To(BeNumerically("<=", probes-1), "503 answers while open vs %d probes", probes)
		Expect(whileOpen.Load()).To(BeNumerically(">=", 1))

		By("every event delivered once: 0 lost, 0 duplicates")
		mu.Lock()
		published := append([]string(nil), ids...)
		mu.Unlock()
		Expect(len(published)).To(BeNumerically(">", 20))
		Eventually(func(g Gomega) {
			for _, id := range published {
				ok := 0
				for _, r := range rcv.of(id) {
					if r.Status == http.StatusNoContent {
						ok++
					}
				}
				g.Expect(ok).To(Equal(1), "2xx answers to %s", id)
			}
		}).WithTimeout(2 * time.Minute).Should(Succeed())

		By("one Warning Event for the one opening, naming the owner; the openings metric once")
		Expect(kubectlOutput("get", "-n", ns, "events.events.k8s.io", "--field-selector", "reason=CircuitOpened,regarding.name=billing",
			"-o", "jsonpath={range .items[*]}{.type}|{.note}{\"\\n\"}{end}")).To(SatisfyAll(
			HavePrefix("Warning|"), ContainSubstring("team-billing"), WithTransform(func(s string) int { return strings.Count(s, "\n") }, Equal(1))))
		Eventually(func() []string {
			return metricSamples(`hookkeeper_endpoint_circuit_openings_total{owner="team-billing",reason="Failing"}`,
				`hookkeeper_endpoint_circuit_open{endpoint="`+ns+`/billing",namespace="`+ns+`",owner="team-billing",reason="Failing"}`)
		}).WithTimeout(30 * time.Second).Should(Equal([]string{"1", ""}))
	})

	It("stops at one 410: the next 100 events wait, none exhausted, until an admin's probe finds the receiver back", func() {
		ns := useNamespace("e2e-gone")
		var back atomic.Bool
		rcv := newReceiver("gone until back", false, func(int, *received) int {
			if back.Load() {
				return http.StatusNoContent
			}
			return http.StatusGone
		})
		control := newReceiver("control", false, answer(http.StatusNoContent))
		apply(breakerPolicyYAML(ns, "guarded") + "---\n" +
			endpointYAML(ns, "gone", rcv.URL("/hooks"), "[order.created]", "guarded", "  owner: team-gone\n") + "---\n" +
			endpointYAML(ns, "control", control.URL("/hooks"), "[order.created]", "guarded", ""))
		kubectlWait("webhookendpoint/gone", "--for=condition=Ready", 30*time.Second)
		kubectlWait("webhookendpoint/control", "--for=condition=Ready", 30*time.Second)

		api.publish(ns, "gone-0", `{"type":"order.created","data":{"n":0}}`)
		kubectlWait("webhookendpoint/gone", "--for=condition=CircuitOpen", time.Minute)
		Expect(jsonpath("webhookendpoint/gone", "{.status.conditions[?(@.type=='CircuitOpen')].reason}")).To(Equal("Gone"))
		for n := 1; n <= 100; n++ {
			api.publish(ns, "gone-"+strconv.Itoa(n), fmt.Sprintf(`{"type":"order.created","data":{"n":%d}}`, n))
		}
		By("the control endpoint got all 101: the manager had every event in hand")
		Eventually(func() int { return len(control.received()) }).WithTimeout(time.Minute).Should(Equal(101))
		Expect(rcv.received()).To(HaveLen(1))
		Eventually(func() string {
			return jsonpath("webhookendpoint/gone", "{.status.deliveries.pending}/{.status.deliveries.exhaustedUnresolved}")
		}).WithTimeout(30 * time.Second).Should(Equal("101/0"))

		By("kubectl hookkeeper probe, once the receiver is back")
		back.Store(true)
		out, stderr, err := runPlugin(kubeconfig, "probe", "gone", "-n", ns)
		Expect(err).NotTo(HaveOccurred(), "stdout %s, stderr %s", out, stderr)
		kubectlWait("webhookendpoint/gone", "--for=condition=CircuitOpen=false", time.Minute)
		Eventually(func() int { return len(rcv.received()) }).WithTimeout(time.Minute).Should(Equal(102))
	})
})
