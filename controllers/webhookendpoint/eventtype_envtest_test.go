package webhookendpoint

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

func eventType(ns, name, typ, schema string, mutate ...func(*hookv1.WebhookEventTypeSpec)) *hookv1.WebhookEventType {
	GinkgoHelper()
	et := &hookv1.WebhookEventType{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: hookv1.WebhookEventTypeSpec{Type: typ}}
	if schema != "" {
		et.Spec.Schema = &apiextensionsv1.JSON{Raw: []byte(schema)}
	}
	for _, m := range mutate {
		m(&et.Spec)
	}
	Expect(k8sClient.Create(ctx, et)).To(Succeed())
	return et
}

func eventTypeReady(g Gomega, key client.ObjectKey) *metav1.Condition {
	var et hookv1.WebhookEventType
	g.Expect(k8sClient.Get(ctx, key, &et)).To(Succeed())
	for i := range et.Status.Conditions {
		if et.Status.Conditions[i].Type == hookv1.ConditionReady {
			return &et.Status.Conditions[i]
		}
	}
	return &metav1.Condition{}
}

var _ = Describe("WebhookEventType", func() {
	const orderSchema = `{"type":"object","required":["amount"],"properties":{"amount":{"type":"number","minimum":0},"currency":{"type":"string","enum":["EUR","USD"]}}}`

	It("is Ready with a schema that compiles, counts its endpoints, and its contract holds publishes on the cache", func() {
		ns := newNamespace()
		newEndpoint(ns, "orders", "https://hooks.example.com/orders", func(s *hookv1.WebhookEndpointSpec) { s.EventTypes = []hookv1.EventTypePattern{"order.*"} })
		newEndpoint(ns, "other", "https://hooks.example.com/other", func(s *hookv1.WebhookEndpointSpec) { s.EventTypes = []hookv1.EventTypePattern{"invoice.*"} })
		fastPolicyObj := fastPolicy(ns, "typed", 2)
		et := eventType(ns, "order-created", "order.created", orderSchema, func(s *hookv1.WebhookEventTypeSpec) {
			s.RequiredSecrets = []string{"token"}
			s.Replay = hookv1.ReplayReissueOnly
			s.ValidFor = &metav1.Duration{Duration: 15 * time.Minute}
			s.RetryPolicyRef = &hookv1.LocalObjectReference{Name: fastPolicyObj.Name}
		})
		key := client.ObjectKeyFromObject(et)
		Eventually(func(g Gomega) {
			c := eventTypeReady(g, key)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			var got hookv1.WebhookEventType
			g.Expect(k8sClient.Get(ctx, key, &got)).To(Succeed())
			g.Expect(got.Status.Schema).To(Equal("Valid"))
			g.Expect(got.Status.Endpoints).To(Equal(int32(1)))
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		}).WithTimeout(20 * time.Second).Should(Succeed())

		var contract *publish.Contract
		Eventually(func(g Gomega) {
			var err error
			contract, _, err = contracts.Contract(ns, "order.created")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(contract).NotTo(BeNil())
		}).Should(Succeed())
		Expect(contract.NotReady).To(BeEmpty())
		Expect(contract.RequiredSecrets).To(Equal([]string{"token"}))
		Expect(contract.Replay).To(Equal(ledger.ReplayReissueOnly))
		Expect(contract.ValidFor).To(Equal(15 * time.Minute))
		Expect(contract.Policy).NotTo(BeNil())
		Expect(contract.Policy.Backoff.MaxAttempts).To(BeEquivalentTo(2))
		field, rule := contract.Validate([]byte(`{"amount": -3, "currency": "EUR"}`))
		Expect(field).To(Equal("data.amount"))
		Expect(rule).To(ContainSubstring("Invalid value"))
		field, _ = contract.Validate([]byte(`{"amount": 3, "currency": "EUR"}`))
		Expect(field).To(BeEmpty())

		By("a second object for the same type: TypeConflict, and the first keeps holding it")
		second := eventType(ns, "order-created-again", "order.created", "")
		Eventually(func(g Gomega) {
			c := eventTypeReady(g, client.ObjectKeyFromObject(second))
			g.Expect(c.Reason).To(Equal(hookv1.ReasonTypeConflict))
			g.Expect(c.Message).To(ContainSubstring(`"order-created", older, holds type "order.created"`))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		c, _, err := contracts.Contract(ns, "order.created")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Name).To(Equal("order-created"))
	})

	It("refuses every publish of a type whose schema does not compile, and says so", func() {
		ns := newNamespace()
		et := eventType(ns, "broken", "order.created", `{"type":"object","properties":{"amount":{}}}`)
		Eventually(func(g Gomega) {
			c := eventTypeReady(g, client.ObjectKeyFromObject(et))
			g.Expect(c.Reason).To(Equal(hookv1.ReasonSchemaInvalid))
			g.Expect(c.Message).To(ContainSubstring("spec.schema.properties[amount].type: Required value"))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			c, _, err := contracts.Contract(ns, "order.created")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.NotReady).To(HavePrefix("SchemaInvalid: spec.schema.properties[amount].type"))
		}).Should(Succeed())
	})

	It("makes a namespace strict with its label", func() {
		ns := newNamespace()
		Eventually(func(g Gomega) {
			_, strict, err := contracts.Contract(ns, "anything")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strict).To(BeFalse())
		}).Should(Succeed())
		var n corev1.Namespace
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
		n.Labels = map[string]string{hookv1.StrictEventTypesLabel: "true"}
		Expect(k8sClient.Update(ctx, &n)).To(Succeed())
		Eventually(func(g Gomega) {
			c, strict, err := contracts.Contract(ns, "anything")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strict).To(BeTrue())
			g.Expect(c).To(BeNil())
		}).WithTimeout(10*time.Second).Should(Succeed(), "a label change applies as the namespace informer tells of it")
	})
})
