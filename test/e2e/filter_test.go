package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
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
