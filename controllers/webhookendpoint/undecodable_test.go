package webhookendpoint

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

// These specs store objects the Go types cannot decode, the way an object
// stored under an older, looser CRD would be: they relax one field's schema
// of the installed CRD, store the object, and restore the CRD. Such an
// object used to fail the list and watch of its kind in every namespace, so
// that nothing of that kind was reconciled any more; now it costs only
// itself.

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// relaxField removes every validation of the field at path (property names
// from the version's openAPIV3Schema) and of the objects on the way to it
// (their rules read the field too) in the installed CRD named crd, and
// returns a function that puts the CRD's schema back.
func relaxField(crd string, path ...string) (restore func()) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(crdGVK)
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: crd}, u)).To(Succeed())
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	original := versions[0].(map[string]any)["schema"]
	relaxed := runtimeDeepCopy(original).(map[string]any)
	field := relaxed["openAPIV3Schema"].(map[string]any)
	for _, p := range path {
		field = field["properties"].(map[string]any)[p].(map[string]any)
		for _, k := range []string{"x-kubernetes-validations", "pattern", "format", "maxLength", "minimum", "maximum"} {
			delete(field, k)
		}
	}
	setSchema := func(s any) {
		Eventually(func() error {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(crdGVK)
			if err := k8sClient.Get(ctx, client.ObjectKey{Name: crd}, cur); err != nil {
				return err
			}
			vs, _, _ := unstructured.NestedSlice(cur.Object, "spec", "versions")
			vs[0].(map[string]any)["schema"] = runtimeDeepCopy(s)
			if err := unstructured.SetNestedSlice(cur.Object, vs, "spec", "versions"); err != nil {
				return err
			}
			return k8sClient.Update(ctx, cur)
		}).Should(Succeed())
	}
	setSchema(relaxed)
	return func() { setSchema(original) }
}

func runtimeDeepCopy(v any) any {
	data, err := yaml.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	var out any
	Expect(yaml.Unmarshal(data, &out)).To(Succeed())
	return out
}

// storeEventually creates the manifest once the API server serves the
// relaxed schema (a CRD update reaches the API server's handlers shortly
// after the write).
func storeEventually(manifest string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal([]byte(manifest), &u.Object)).To(Succeed())
	Eventually(func() error {
		err := k8sClient.Create(ctx, u.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}).Should(Succeed())
	return u
}

// refusedEventually waits until the API server refuses the manifest again:
// the CRD's schema is back for the specs that follow.
func refusedEventually(manifest string) {
	u := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal([]byte(manifest), &u.Object)).To(Succeed())
	Eventually(func() bool {
		err := k8sClient.Create(ctx, u.DeepCopy(), client.DryRunAll)
		return apierrors.IsInvalid(err)
	}).Should(BeTrue())
}

// invalidSpecEventsOf lists the notes of the InvalidSpec Events regarding
// one object.
func invalidSpecEventsOf(g Gomega, namespace, kind, name string) []string {
	var list eventsv1.EventList
	g.Expect(k8sClient.List(ctx, &list, client.InNamespace(namespace))).To(Succeed())
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name && e.Reason == hookv1.ReasonInvalidSpec {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

func currentReady(g Gomega, obj client.Object, conds *[]metav1.Condition) *metav1.Condition {
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	c := meta.FindStatusCondition(*conds, hookv1.ConditionReady)
	g.Expect(c).NotTo(BeNil())
	return c
}

var _ = Describe("an object the Go types cannot decode", Ordered, func() {
	It("costs only that RetryPolicy: it is not Ready and names the field, every other policy and endpoint keeps reconciling", func() {
		bad, good := newNamespace(), newNamespace()
		restore := relaxField("retrypolicies.hookkeeper.dev", "spec", "replayWindow")
		DeferCleanup(restore) // when a step below fails; restoring twice is harmless
		manifest := func(name string) string {
			return fmt.Sprintf(`
apiVersion: hookkeeper.dev/v1alpha1
kind: RetryPolicy
metadata: {name: %s, namespace: %s}
spec:
  backoff: {strategy: Fixed, initialDelay: 1s}
  horizon: {maxAttempts: 3}
  replayWindow: 9999999999h
`, name, bad)
		}
		storeEventually(manifest("overflow"))
		restore()
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &hookv1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: bad, Name: "overflow"}}))).To(Succeed())
		})
		refusedEventually(manifest("refused"))

		// The typed client lists the kind across namespaces; the poisoned
		// object comes back with the field left out and named.
		var all hookv1.RetryPolicyList
		Expect(k8sClient.List(ctx, &all)).To(Succeed())
		var found *hookv1.RetryPolicy
		for i := range all.Items {
			if all.Items[i].Namespace == bad {
				found = &all.Items[i]
			}
		}
		Expect(found).NotTo(BeNil())
		Expect(found.Undecodable).To(HaveExactElements(HavePrefix(`spec.replayWindow: time: invalid duration "9999999999h"`)))

		// Created after the poisoned one: the controller's watch still works.
		okPolicy := fastPolicy(good, "fine", 3)
		user := newEndpoint(bad, "uses-overflow", "http://127.0.0.1:1/hook", func(s *hookv1.WebhookEndpointSpec) {
			s.RetryPolicyRef = &hookv1.LocalObjectReference{Name: "overflow"}
		})

		// The refusal is announced as an Event, which the API server takes
		// whatever the object holds. Its status says so too when it could be
		// written: once the CRD is strict again the API server refuses every
		// write of this object, status included, so whether the controller
		// wrote it before restore() depends on timing and is not asserted.
		poisonedPolicy := &hookv1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: bad, Name: "overflow"}}
		Eventually(func(g Gomega) {
			g.Expect(invalidSpecEventsOf(g, bad, "RetryPolicy", "overflow")).To(ContainElement(ContainSubstring("spec.replayWindow")))
		}).Should(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(poisonedPolicy), poisonedPolicy)).To(Succeed())
		if c := meta.FindStatusCondition(poisonedPolicy.Status.Conditions, hookv1.ConditionReady); c != nil {
			Expect(c.Status).To(Equal(metav1.ConditionFalse))
			Expect(c.Reason).To(Equal(hookv1.ReasonInvalidSpec))
			Expect(c.Message).To(ContainSubstring("spec.replayWindow"))
		}
		Eventually(func(g Gomega) {
			c := currentReady(g, okPolicy, &okPolicy.Status.Conditions)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			c := currentReady(g, user, &user.Status.Conditions)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(hookv1.ReasonRetryPolicyNotReady))
			g.Expect(c.Message).To(ContainSubstring("spec.replayWindow"))
		}).Should(Succeed())
	})

	It("costs only that DeliveryRecovery: it fails without selecting anything, the next one runs", func() {
		ns := newNamespace()
		restore := relaxField("deliveryrecoveries.hookkeeper.dev", "spec", "selector", "exhaustedAfter")
		DeferCleanup(restore)
		// A lowercase t and z: the API server's date-time format takes them,
		// Go's RFC 3339 parser does not.
		manifest := func(name string) string {
			return fmt.Sprintf(`
apiVersion: hookkeeper.dev/v1alpha1
kind: DeliveryRecovery
metadata: {name: %s, namespace: %s}
spec:
  endpointRef: {name: nowhere}
  action: Dismiss
  selector: {exhaustedAfter: "2024-01-01t00:00:00z"}
`, name, ns)
		}
		storeEventually(manifest("lowercase"))
		restore()
		refusedEventually(manifest("refused"))

		next := &hookv1.DeliveryRecovery{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "next"},
			Spec:       hookv1.DeliveryRecoverySpec{EndpointRef: hookv1.LocalObjectReference{Name: "nowhere"}, Action: hookv1.RecoveryModeDismiss},
		}
		Expect(k8sClient.Create(ctx, next)).To(Succeed())

		poisoned := &hookv1.DeliveryRecovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lowercase"}}
		Eventually(func(g Gomega) {
			g.Expect(invalidSpecEventsOf(g, ns, "DeliveryRecovery", "lowercase")).To(ContainElement(ContainSubstring("spec.selector.exhaustedAfter")))
		}).Should(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(poisoned), poisoned)).To(Succeed())
		if c := meta.FindStatusCondition(poisoned.Status.Conditions, hookv1.ConditionFailed); c != nil {
			Expect(c.Status).To(Equal(metav1.ConditionTrue))
			Expect(c.Reason).To(Equal(hookv1.ReasonInvalidSpec))
			Expect(c.Message).To(ContainSubstring("spec.selector.exhaustedAfter"))
		}
		Expect(poisoned.Status.StartTime).To(BeNil(), "it must not have started selecting deliveries")
		// The other recovery in the same namespace is reconciled as usual: it
		// waits for its endpoint, which does not exist.
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(next), next)).To(Succeed())
			g.Expect(next.Status.State).To(Equal(hookv1.RecoveryWaiting))
			c := meta.FindStatusCondition(next.Status.Conditions, hookv1.ConditionComplete)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(hookv1.ReasonWaitingForEndpoint))
		}).Should(Succeed())
		Expect(k8sClient.Delete(ctx, poisoned)).To(Succeed())
	})
})
