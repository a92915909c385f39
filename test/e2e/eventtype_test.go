package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// Issue 25, section 1: event types as contracts.
var _ = Describe("Event types as contracts", func() {
	// publishRaw publishes through the HTTP API and returns the status and
	// the decoded error answer.
	publishRaw := func(ns, key, body string) (int, map[string]any) {
		GinkgoHelper()
		status, data, err := api.do(http.MethodPost, "/v1/namespaces/"+ns+"/events", body, key)
		Expect(err).NotTo(HaveOccurred())
		var answer map[string]any
		_ = json.Unmarshal(data, &answer)
		return status, answer
	}
	// refusal is the error object of an answer.
	refusal := func(answer map[string]any) (code, field, message string) {
		e, _ := answer["error"].(map[string]any)
		if e == nil {
			e = answer
		}
		code, _ = e["code"].(string)
		field, _ = e["field"].(string)
		message, _ = e["message"].(string)
		return code, field, message
	}

	It("refuses data that breaks the schema with the path at both doors, a missing required secret, an unknown type in a strict namespace, and shows the catalog", func() {
		ns := useNamespace("e2e-contracts")
		rcv := newReceiver("orders", false, answer(http.StatusNoContent))
		apply(policyYAML(ns, "fast", "200ms", 3) + "---\n" +
			endpointYAML(ns, "orders", rcv.URL("/orders"), "[order.*]", "fast", "") + "---\n" +
			fmt.Sprintf(`apiVersion: hookkeeper.dev/v1alpha1
kind: WebhookEventType
metadata:
  name: order-created
  namespace: %s
spec:
  type: order.created
  description: An order was placed.
  schema:
    type: object
    required: [orderID, amount]
    properties:
      orderID: {type: string, maxLength: 16}
      amount: {type: number, minimum: 0}
      lines:
        type: array
        items: {type: object, required: [sku], properties: {sku: {type: string}}}
      email: {type: string, format: email}
      ids: {type: array, items: {type: integer}}
  requiredSecrets: [confirmToken]
  validFor: 1h
`, ns))
		kubectlWait("webhookeventtype/order-created", "--for=condition=Ready", 30*time.Second)
		kubectlWait("webhookendpoint/orders", "--for=condition=Ready", 30*time.Second)
		kubectlWait("webhookeventtype/order-created", "--for=jsonpath={.status.endpoints}=1", 30*time.Second)
		var (
			stderr string
			err    error
		)

		By("the catalog as kubectl shows it")
		Expect(kubectl("get", "webhookeventtypes", "-n", ns)).To(MatchRegexp(
			`order-created\s+order\.created\s+True\s+Valid\s+\["confirmToken"\]\s+Retryable\s+1h\s+1\s+`))

		By("HTTP: a conforming publish is accepted and records the type's generation")
		a := api.publish(ns, "ok-1", `{"type":"order.created","data":{"orderID":"o-1","amount":12.5},"secrets":{"confirmToken":"t-1"}}`)
		Expect(a.Deliveries).To(HaveLen(1))
		Eventually(func() int { return len(rcv.of(a.ID)) }).Should(Equal(1))
		gen := kubectl("get", "webhookeventtype/order-created", "-n", ns, "-o", "jsonpath={.metadata.generation}")
		Expect(kubectl("get", "webhookevent", a.ID, "-n", ns, "-o", "jsonpath={.spec.typeGeneration}")).To(Equal(gen))

		By("HTTP: 422 with the path of the first violation, never the value")
		status, answer := publishRaw(ns, "bad-1", `{"type":"order.created","data":{"orderID":"o-2","amount":1,"lines":[{"sku":"a"},{"qty":2}]},"secrets":{"confirmToken":"t"}}`)
		code, field, message := refusal(answer)
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%v", answer)
		Expect(code).To(Equal("SchemaViolation"))
		Expect(field).To(Equal("data.lines[1].sku"))
		Expect(message).To(ContainSubstring("Required value"))
		status, answer = publishRaw(ns, "bad-2", `{"type":"order.created","data":{"orderID":"way-too-long-for-the-schema","amount":1},"secrets":{"confirmToken":"t"}}`)
		code, field, message = refusal(answer)
		Expect(status).To(Equal(http.StatusUnprocessableEntity))
		Expect([]string{code, field}).To(Equal([]string{"SchemaViolation", "data.orderID"}))
		Expect(message).NotTo(ContainSubstring("way-too-long"))

		By("HTTP: a refusal never quotes the value, whatever the rule (issue #42)")
		const card = "4111111111111111"
		status, answer = publishRaw(ns, "bad-card", `{"type":"order.created","data":{"orderID":"o-c","amount":1,"email":"`+card+`\u00ad@"},"secrets":{"confirmToken":"t"}}`)
		code, field, message = refusal(answer)
		Expect(status).To(Equal(http.StatusUnprocessableEntity))
		Expect([]string{code, field}).To(Equal([]string{"SchemaViolation", "data.email"}))
		Expect(message).To(HavePrefix("Invalid value: must be of type email"))
		Expect(fmt.Sprint(answer)).NotTo(ContainSubstring(card[:6]))

		By("HTTP: 64-bit integers pass an integer schema, as in a custom resource (issue #42)")
		Expect(api.publish(ns, "ints", `{"type":"order.created","data":{"orderID":"o-i","amount":1,"ids":[9223372036854775807,-9223372036854775808]},"secrets":{"confirmToken":"t"}}`).Deliveries).To(HaveLen(1))

		By("HTTP: a required secret missing, named")
		status, answer = publishRaw(ns, "bad-3", `{"type":"order.created","data":{"orderID":"o-3","amount":1}}`)
		code, field, _ = refusal(answer)
		Expect(status).To(Equal(http.StatusUnprocessableEntity))
		Expect([]string{code, field}).To(Equal([]string{"MissingSecret", "secrets.confirmToken"}))

		By("HTTP: validUntil may shorten validFor, never lengthen it")
		status, answer = publishRaw(ns, "bad-4", fmt.Sprintf(`{"type":"order.created","data":{"orderID":"o-4","amount":1},"secrets":{"confirmToken":"t"},"validUntil":%q}`,
			time.Now().Add(3*time.Hour).UTC().Format(time.RFC3339)))
		code, field, _ = refusal(answer)
		Expect(status).To(Equal(http.StatusUnprocessableEntity))
		Expect([]string{code, field}).To(Equal([]string{"ValidUntilTooLate", "validUntil"}))

		By("kubectl create webhookevent: 422 Invalid naming the field")
		manifest := fmt.Sprintf("apiVersion: delivery.hookkeeper.dev/v1alpha1\nkind: WebhookEvent\nmetadata:\n  namespace: %s\nspec:\n  type: order.created\n  idempotencyKey: k-1\n  data: {\"orderID\": \"o-5\", \"amount\": -1}\n", ns)
		_, stderr, err = kubectlAt(kubeconfig, manifest, "create", "-f", "-", "-v=6", "--validate=false")
		Expect(err).To(HaveOccurred())
		Expect(createStatus(stderr)).To(Equal("422 Unprocessable Entity"))
		Expect(stderr).To(ContainSubstring(`The WebhookEvent "" is invalid: spec.data.amount: Invalid value: should be greater than or equal to 0 (the schema of WebhookEventType order-created) (SchemaViolation)`))
		Expect(stderr).NotTo(ContainSubstring("Invalid value: Invalid value"))
		manifest = fmt.Sprintf("apiVersion: delivery.hookkeeper.dev/v1alpha1\nkind: WebhookEvent\nmetadata:\n  namespace: %s\nspec:\n  type: order.created\n  idempotencyKey: k-card\n  data: {\"orderID\": \"o-5\", \"amount\": 1, \"email\": \"%s\\u00ad@\"}\n", ns, card)
		_, stderr, err = kubectlAt(kubeconfig, manifest, "create", "-f", "-", "--validate=false")
		Expect(err).To(HaveOccurred())
		Expect(stderr).To(ContainSubstring("is invalid: spec.data.email: Invalid value: must be of type email"))
		Expect(stderr).NotTo(ContainSubstring(card[:6]))

		By("a type without a contract is accepted, until the namespace is strict")
		Expect(api.publish(ns, "free-1", `{"type":"order.shipped","data":{}}`).Deliveries).To(HaveLen(1))
		kubectl("label", "namespace", ns, "hookkeeper.dev/strict-event-types=true")
		Eventually(func(g Gomega) {
			status, answer := publishRaw(ns, "free-2-"+fmt.Sprint(time.Now().UnixNano()), `{"type":"order.shipped","data":{}}`)
			code, field, message := refusal(answer)
			g.Expect(status).To(Equal(http.StatusUnprocessableEntity))
			g.Expect([]string{code, field}).To(Equal([]string{"UnknownEventType", "type"}))
			g.Expect(message).To(ContainSubstring(`none is for "order.shipped"`))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(api.publish(ns, "ok-2", `{"type":"order.created","data":{"orderID":"o-6","amount":1},"secrets":{"confirmToken":"t-6"}}`).Deliveries).To(HaveLen(1))

		By("a schema that does not compile: not Ready, and its publishes refused until fixed")
		kubectl("patch", "webhookeventtype/order-created", "-n", ns, "--type=json", "-p", `[{"op":"replace","path":"/spec/schema","value":{"type":"object","properties":{"amount":{}}}}]`)
		kubectlWait("webhookeventtype/order-created", `--for=jsonpath={.status.conditions[?(@.type=="Ready")].reason}=SchemaInvalid`, 30*time.Second)
		Eventually(func(g Gomega) {
			status, answer := publishRaw(ns, "nr-"+fmt.Sprint(time.Now().UnixNano()), `{"type":"order.created","data":{"amount":1},"secrets":{"confirmToken":"t"}}`)
			code, _, _ := refusal(answer)
			g.Expect(status).To(Equal(http.StatusUnprocessableEntity))
			g.Expect(code).To(Equal("EventTypeNotReady"))
		}).WithTimeout(30 * time.Second).Should(Succeed())

		By("kubectl hookkeeper catalog prints the catalog with an example body")
		kubectl("patch", "webhookeventtype/order-created", "-n", ns, "--type=json", "-p", `[{"op":"replace","path":"/spec/schema","value":{"type":"object","required":["orderID"],"properties":{"orderID":{"type":"string"}}}}]`)
		kubectlWait("webhookeventtype/order-created", "--for=condition=Ready", 30*time.Second)
		out, stderr, err := runPlugin(kubeconfig, "catalog", "-n", ns, "order.created")
		Expect(err).NotTo(HaveOccurred(), stderr)
		Expect(out).To(ContainSubstring("order.created"))
		Expect(out).To(ContainSubstring(`"orderID"`))
		Expect(out).To(ContainSubstring(`"confirmToken"`))
	})

	It("holds recoveries to the replay class, cancels what outlived validFor as Expired, and retries a type on its own policy", func() {
		ns := useNamespace("e2e-contract-replay")
		var up atomic.Bool
		rcv := newReceiver("ledger (400 while down)", false, func(int, *received) int {
			if up.Load() {
				return http.StatusNoContent
			}
			return http.StatusBadRequest // not retried: exhausted at once
		})
		slow := newReceiver("slow (503 while down)", false, func(int, *received) int {
			if up.Load() {
				return http.StatusNoContent
			}
			return http.StatusServiceUnavailable
		})
		typeYAML := func(name, typ, extra string) string {
			return fmt.Sprintf("apiVersion: hookkeeper.dev/v1alpha1\nkind: WebhookEventType\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  type: %s\n%s", name, ns, typ, extra)
		}
		apply(policyYAML(ns, "fast", "200ms", 2) + "---\n" + policyYAML(ns, "patient", "200ms", 50) + "---\n" +
			endpointYAML(ns, "ledger", rcv.URL("/ledger"), "[payment.*]", "fast", "") + "---\n" +
			endpointYAML(ns, "slow", slow.URL("/slow"), "[quote.*]", "fast", "") + "---\n" +
			typeYAML("reissue-only", "payment.reissue", "  replay: ReissueOnly\n") + "---\n" +
			typeYAML("never", "payment.never", "  replay: Never\n") + "---\n" +
			typeYAML("quote", "quote.issued", "  validFor: 4s\n  retryPolicyRef: {name: patient}\n"))
		for _, o := range []string{"webhookeventtype/reissue-only", "webhookeventtype/never", "webhookeventtype/quote", "webhookendpoint/ledger", "webhookendpoint/slow"} {
			kubectlWait(o, "--for=condition=Ready", 30*time.Second)
		}

		By("ReissueOnly and Never deliveries exhausted while the receiver refuses them")
		ro := api.publish(ns, "ro", `{"type":"payment.reissue","data":{"n":1}}`).ID
		nv := api.publish(ns, "nv", `{"type":"payment.never","data":{"n":2}}`).ID
		Eventually(func(g Gomega) {
			g.Expect(api.deliveryOf(g, ns, ro).State).To(Equal("exhausted"))
			g.Expect(api.deliveryOf(g, ns, nv).State).To(Equal("exhausted"))
		}).Should(Succeed())
		up.Store(true)

		recovery := func(name, action string) string {
			apply(fmt.Sprintf("apiVersion: hookkeeper.dev/v1alpha1\nkind: DeliveryRecovery\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  endpointRef: {name: ledger}\n  action: %s\n", name, ns, action))
			rec := "deliveryrecovery/" + name
			kubectlWait(rec, "--for=condition=Complete", 30*time.Second)
			return rec
		}
		By("a Retry: ReissueOnly refused with ReissueRequired although nothing was scrubbed, Never refused")
		rec := recovery("retry-all", "Retry")
		items := kubectl("get", rec, "-n", ns, "-o", `jsonpath={range .status.items[*]}{.eventID}={.outcome}/{.reason}{"\n"}{end}`)
		Expect(items).To(ContainSubstring(ro + "=Refused/ReissueRequired"))
		Expect(items).To(ContainSubstring(nv + "=Refused/NotReplayable"))
		By("a Reissue: ReissueOnly reissued, Never refused again")
		rec = recovery("reissue-all", "Reissue")
		items = kubectl("get", rec, "-n", ns, "-o", `jsonpath={range .status.items[*]}{.eventID}={.outcome}/{.reason}{"\n"}{end}`)
		Expect(items).To(ContainSubstring(nv + "=Refused/NotReplayable"))
		Expect(items).NotTo(ContainSubstring(ro + "=Refused"))
		Expect(rcv.of(nv)).To(HaveLen(1), "a Never event was sent again")

		By("validFor: a quote retried on the type's patient policy while the receiver is down, then cancelled Expired, never sent late")
		up.Store(false)
		q := api.publish(ns, "q", `{"type":"quote.issued","data":{"price":3}}`).ID
		Eventually(func(g Gomega) {
			d := api.deliveryOf(g, ns, q)
			g.Expect(d.State).To(Equal("cancelled"))
			g.Expect(d.ExhaustReason).To(Equal("Expired"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		attempts := len(slow.of(q))
		Expect(attempts).To(BeNumerically(">", 2), "the endpoint's policy (2 attempts) would have exhausted it: the type's policy retried it")
		up.Store(true)
		// Nothing is due any more: a publish after it arrives, the quote
		// does not.
		after := api.publish(ns, "q-after", `{"type":"quote.issued","data":{"price":4}}`).ID
		Eventually(func() int { return len(slow.of(after)) }).Should(Equal(1))
		Expect(slow.of(q)).To(HaveLen(attempts), "an expired delivery was sent late")
		for _, r := range slow.of(q) {
			Expect(r.Status).To(Equal(http.StatusServiceUnavailable))
		}
	})
})
