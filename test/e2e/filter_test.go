package e2e

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/test/fixtures"
)

// Issue 24, section 2: a CEL filter per endpoint, on what the event says.
var _ = Describe("Filters on data", func() {
	It("sends two endpoints with different filters exactly the events they select, and refuses an invalid filter with its position", func() {
		ns := useNamespace("e2e-filters")
		big := newReceiver("big EUR orders", false, answer(http.StatusNoContent))
		usd := newReceiver("USD orders", false, answer(http.StatusNoContent))
		all := newReceiver("every order", false, answer(http.StatusNoContent))
		apply(policyYAML(ns, "fast", "200ms", 3) + "---\n" +
			endpointYAML(ns, "big-eur", big.URL("/hooks"), "[order.created]", "fast",
				"  filter: 'has(data.amount) && data.amount > 1000 && data.currency == \"EUR\"'\n") + "---\n" +
			endpointYAML(ns, "usd", usd.URL("/hooks"), "[order.*]", "fast",
				"  filter: 'data.currency == \"USD\" && publisherNamespace == \""+ns+"\"'\n") + "---\n" +
			endpointYAML(ns, "all", all.URL("/hooks"), "[order.*]", "fast", ""))
		for _, ep := range []string{"big-eur", "usd", "all"} {
			kubectlWait("webhookendpoint/"+ep, "--for=condition=Ready", 30*time.Second)
		}

		events := []struct {
			typ, data string
			want      []string
		}{
			{"order.created", `{"amount":1500,"currency":"EUR"}`, []string{"all", "big-eur"}},
			{"order.created", `{"amount":1500.5,"currency":"EUR"}`, []string{"all", "big-eur"}},
			{"order.created", `{"amount":999,"currency":"EUR"}`, []string{"all"}},
			{"order.created", `{"amount":5000,"currency":"USD"}`, []string{"all", "usd"}},
			{"order.refunded", `{"amount":5000,"currency":"EUR"}`, []string{"all"}},
			{"order.created", `{"currency":"EUR"}`, []string{"all"}}, // no amount: has() guards it
			{"order.updated", `{"amount":3}`, []string{"all"}},       // no currency: an error, no match
		}
		ids := make([]string, len(events))
		for i, e := range events {
			a := api.publish(ns, fmt.Sprintf("f-%d", i), fmt.Sprintf(`{"type":%q,"data":%s}`, e.typ, e.data))
			var got []string
			for _, d := range a.Deliveries {
				got = append(got, d.Endpoint)
			}
			Expect(got).To(ConsistOf(e.want), "the publish answer of %s %s lists the deliveries made", e.typ, e.data)
			ids[i] = a.ID
		}
		for i, e := range events {
			for name, r := range map[string]*receiver{"big-eur": big, "usd": usd, "all": all} {
				if slices.Contains(e.want, name) {
					Eventually(func() int { return len(r.of(ids[i])) }).Should(Equal(1), "%s gets %s %s", name, e.typ, e.data)
				}
			}
		}
		// Every delivery made has arrived; nothing else was made, so
		// nothing else can arrive.
		Expect(big.received()).To(HaveLen(2))
		Expect(usd.received()).To(HaveLen(1))
		Expect(all.received()).To(HaveLen(len(events)))
		Expect(metricsText()).To(MatchRegexp(`hookkeeper_filter_evaluation_errors_total\{[^}]*\} [1-9]`))

		By("an invalid filter: not Ready with the position, and it receives nothing")
		apply(endpointYAML(ns, "big-eur", big.URL("/hooks"), "[order.created]", "fast", "  filter: 'data.amount > 1000 && data.currency = \"EUR\"'\n"))
		kubectlWait("webhookendpoint/big-eur", `--for=jsonpath={.status.conditions[?(@.type=="Ready")].reason}=FilterInvalid`, 30*time.Second)
		Expect(jsonpath("webhookendpoint/big-eur", `{.status.conditions[?(@.type=="Ready")].message}`)).To(MatchRegexp(`spec\.filter: 1:\d+: `))
		a := api.publish(ns, "f-invalid", `{"type":"order.created","data":{"amount":2000,"currency":"EUR"}}`)
		Expect(a.Deliveries).To(HaveLen(1), "only the unfiltered endpoint")
		Expect(a.Deliveries[0].Endpoint).To(Equal("all"))

		By("fixed: it receives again")
		apply(endpointYAML(ns, "big-eur", big.URL("/hooks"), "[order.created]", "fast", "  filter: 'data.amount > 1000'\n"))
		kubectlWait("webhookendpoint/big-eur", "--for=condition=Ready", 30*time.Second)
		a = api.publish(ns, "f-fixed", `{"type":"order.created","data":{"amount":2000}}`)
		Expect(a.Deliveries).To(HaveLen(2))
	})
})

// Issue 42: what a tenant writes in a filter cannot crash, stall or leak.
var _ = Describe("Hostile filters", func() {
	It("are refused at reconcile or bounded while they run: the manager stays up within 64 MiB more memory while they are published to with data up to the body limit, the owner sees FilterOverBudget, and another namespace's publishes are delivered", func() {
		const calmNS = "e2e-calm"
		apply(fixtures.Namespace(calmNS))
		ns := useNamespace("e2e-hostile")
		hostile := newReceiver("hostile filters", false, answer(http.StatusNoContent))
		calm := newReceiver("another team", false, answer(http.StatusNoContent))
		apply(policyYAML(ns, "fast", "200ms", 3) + "---\n" +
			endpointYAML(ns, "replace", hostile.URL("/replace"), "[hostile.*]", "fast",
				"  filter: 'has(data.s) && data.s.replace(\"a\", data.s).replace(\"a\", data.s).size() > 0'\n") + "---\n" +
			endpointYAML(ns, "loop", hostile.URL("/loop"), "[hostile.*]", "fast",
				"  filter: 'lists.range(1000).all(i, lists.range(1000).all(j, i + j >= 0))'\n") + "---\n" +
			policyYAML(calmNS, "fast", "200ms", 3) + "---\n" +
			endpointYAML(calmNS, "orders", calm.URL("/orders"), "[order.*]", "fast", ""))
		kubectlWait("webhookendpoint/replace", `--for=jsonpath={.status.conditions[?(@.type=="Ready")].reason}=FilterInvalid`, 30*time.Second)
		Expect(jsonpath("webhookendpoint/replace", `{.status.conditions[?(@.type=="Ready")].message}`)).To(ContainSubstring("estimated cost"))
		kubectlWait("webhookendpoint/loop", "--for=condition=Ready", 30*time.Second)
		kubectl("wait", "-n", calmNS, "webhookendpoint/orders", "--for=condition=Ready", "--timeout=30s")

		publishCalm := func(key string) string {
			a := api.publish(calmNS, key, `{"type":"order.created","data":{"amount":1}}`)
			Expect(a.Deliveries).To(HaveLen(1))
			return a.ID
		}
		// Warm: the first publish of each kind loads what it loads once.
		publishCalm("calm-warm")
		api.publish(ns, "hostile-warm", `{"type":"hostile.s","data":{"s":"a"}}`)
		baseline := managerRSS()
		peak := baseline
		var calmIDs []string
		for i, size := range []int{400, 5_000, 64 << 10, 250 << 10} {
			body := fmt.Sprintf(`{"type":"hostile.s","data":{"s":%q}}`, strings.Repeat("a", size))
			a := api.publish(ns, fmt.Sprintf("hostile-%d", i), body)
			Expect(a.Deliveries).To(BeEmpty(), "data.s of %d bytes: neither hostile filter matches (refused, or over budget)", size)
			calmIDs = append(calmIDs, publishCalm(fmt.Sprintf("calm-%d", i)))
			peak = max(peak, managerRSS())
		}
		AddReportEntry("manager RSS", fmt.Sprintf("%d MiB before the hostile publishes, %d MiB at most during them", baseline>>20, peak>>20))
		Expect(managerRunning()).To(BeTrue(), "the manager is still running")
		Expect(peak-baseline).To(BeNumerically("<=", 64<<20), "RSS rose from %d MiB to %d MiB", baseline>>20, peak>>20)
		for _, id := range calmIDs {
			Eventually(func() int { return len(calm.of(id)) }).Should(Equal(1), "the other namespace's event %s is delivered", id)
		}
		Expect(hostile.received()).To(BeEmpty())

		By("the owner sees the loop over budget")
		kubectlWait("webhookendpoint/loop", `--for=jsonpath={.status.conditions[?(@.type=="Ready")].reason}=FilterOverBudget`, 30*time.Second)
		Expect(kubectl("get", "events", "-n", ns, "--field-selector", "reason=FilterOverBudget", "-o", "name")).NotTo(BeEmpty())
		Expect(metricsText()).To(MatchRegexp(`hookkeeper_filter_evaluation_errors_total\{[^}]*reason="timeout"[^}]*\} [1-9]`))
	})
})

// managerRSS is the manager process's resident set, in bytes.
func managerRSS() int64 {
	GinkgoHelper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", manager.Process.Pid))
	Expect(err).NotTo(HaveOccurred())
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			Expect(err).NotTo(HaveOccurred())
			return kb << 10
		}
	}
	Fail("no VmRSS in the manager's /proc status")
	return 0
}

// managerRunning reports whether the manager process has not exited.
func managerRunning() bool {
	select {
	case <-managerDone:
		return false
	default:
		return true
	}
}
