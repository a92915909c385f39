package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/test/fixtures"
)

// Issue 43: one namespace's hanging receivers do not starve another's.
// hangingEndpoints is how many endpoints of the noisy namespace hang.
const hangingEndpoints = 20

var _ = Describe("Fair share between namespaces", func() {
	It("delivers every event of one namespace while another's receivers hang with a backlog of many times the workers", func() {
		const quietNS = "e2e-fair-quiet"
		apply(fixtures.Namespace(quietNS))
		ns := useNamespace("e2e-fair-noisy")
		release := make(chan struct{})
		var hanging atomic.Int64
		hang := newReceiver("hanging receivers", false, func(int, *received) int {
			hanging.Add(1)
			<-release
			return http.StatusServiceUnavailable
		})
		quiet := newReceiver("the quiet team", false, answer(http.StatusNoContent))
		// Cleanups run last-registered first: the noisy endpoints go
		// (their pending deliveries cancelled), then the hanging
		// attempts are answered, then the receivers close.
		DeferCleanup(func() { close(release) })
		DeferCleanup(func() { kubectl("delete", "webhookendpoints", "--all", "-n", ns, "--wait=true") })

		// Attempts that hang for the whole spec: without fair shares they
		// hold every worker until their 5 minutes are up.
		slow := strings.Replace(policyYAML(ns, "slow", "200ms", 3), "attemptTimeout: 5s", "attemptTimeout: 5m", 1)
		manifests := slow
		// One event type per endpoint (the suite's --max-fan-out is 3), and
		// enough endpoints that their connections (a sender keeps 10 per
		// endpoint) could hold every worker.
		for i := range hangingEndpoints {
			manifests += "---\n" + endpointYAML(ns, fmt.Sprintf("hang-%d", i), hang.URL(fmt.Sprintf("/%d", i)), fmt.Sprintf("[load.%d]", i), "slow", "")
		}
		manifests += "---\n" + policyYAML(quietNS, "fast", "200ms", 3) + "---\n" +
			endpointYAML(quietNS, "orders", quiet.URL("/orders"), "[order.*]", "fast", "")
		apply(manifests)
		for i := range hangingEndpoints {
			kubectlWait(fmt.Sprintf("webhookendpoint/hang-%d", i), "--for=condition=Ready", 30*time.Second)
		}
		kubectl("wait", "-n", quietNS, "webhookendpoint/orders", "--for=condition=Ready", "--timeout=30s")

		// 600 deliveries, nearly five times the manager's 128 workers.
		for i := range 30 * hangingEndpoints {
			api.publish(ns, fmt.Sprintf("load-%d", i), fmt.Sprintf(`{"type":"load.%d","data":{}}`, i%hangingEndpoints))
		}
		Eventually(hanging.Load).Should(BeNumerically(">=", 60), "the noisy namespace's attempts hang")

		var ids []string
		for i := range 20 {
			ids = append(ids, api.publish(quietNS, fmt.Sprintf("quiet-%d", i), `{"type":"order.created","data":{"n":1}}`).ID)
		}
		for _, id := range ids {
			Eventually(func() int { return len(quiet.of(id)) }).Should(Equal(1), "the quiet namespace's event %s arrives while the other's attempts hang", id)
		}
		Expect(hanging.Load()).To(BeNumerically("<=", 64), "the noisy namespace held at most its share (half of 128 workers while alone)")
		AddReportEntry("hanging attempts", fmt.Sprintf("%d of 128 workers", hanging.Load()))
	})
})
