package controllers

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// signingSecrets on its own, against the real API server. The endpoint
// objects here are never created, so the controller leaves their Secrets
// to the component under test.
var _ = Describe("signingSecrets", func() {
	var (
		secrets *signingSecrets
		ep      *hookv1.WebhookEndpoint
	)
	BeforeEach(func() {
		secrets = &signingSecrets{client: k8sClient, reader: k8sClient}
		ep = &hookv1.WebhookEndpoint{
			TypeMeta:   metav1.TypeMeta{APIVersion: hookv1.GroupVersion.String(), Kind: "WebhookEndpoint"},
			ObjectMeta: metav1.ObjectMeta{Namespace: newNamespace(), Name: "orders", UID: types.UID("3f1e0c1a-0000-4000-8000-000000000001")},
		}
	})
	secretOf := func(name string) *corev1.Secret {
		var s corev1.Secret
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ep.Namespace, Name: name}, &s)).To(Succeed())
		return &s
	}

	It("generates an owned Secret once, and a new secret when its key is removed", func() {
		first, err := secrets.ensure(ctx, ep)
		Expect(err).NotTo(HaveOccurred())
		Expect(first.Problem).To(BeNil())
		Expect(first.SecretName).To(Equal("orders-signing"))
		s := secretOf("orders-signing")
		Expect(metav1.IsControlledBy(s, ep)).To(BeTrue())
		Expect(sensitive.Bytes(s.Data[keySigningSecret])).To(Equal(first.Current))

		again, err := secrets.ensure(ctx, ep)
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Current).To(Equal(first.Current), "a second ensure generates nothing")

		delete(s.Data, keySigningSecret)
		Expect(k8sClient.Update(ctx, s)).To(Succeed())
		rotated, err := secrets.ensure(ctx, ep)
		Expect(err).NotTo(HaveOccurred())
		Expect(rotated.Current).NotTo(BeEmpty())
		Expect(rotated.Current).NotTo(Equal(first.Current))
	})

	It("refuses a generated Secret's name taken by a Secret the endpoint does not own, naming it and not its value", func() {
		value, err := signing.GenerateSecret()
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ep.Namespace, Name: "orders-signing"},
			Data:       map[string][]byte{keySigningSecret: value.Reveal()},
		})).To(Succeed())
		src, err := secrets.ensure(ctx, ep)
		Expect(err).NotTo(HaveOccurred())
		Expect(src.Problem).NotTo(BeNil())
		Expect(src.Problem.Reason).To(Equal(hookv1.ReasonSigningSecretInvalid))
		Expect(src.Problem.Message).To(ContainSubstring(`"orders-signing"`))
		Expect(src.Problem.Message).NotTo(ContainSubstring(string(value.Reveal())))
		Expect(src.Current).To(BeEmpty())
	})

	It("remembers a rotation of a user's Secret in its own Secret, and forgets it", func() {
		current, err := signing.GenerateSecret()
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ep.Namespace, Name: "theirs"},
			Data:       map[string][]byte{"key": current.Reveal()},
		})).To(Succeed())
		ep.Spec.SigningSecretRef = &hookv1.SecretKeyReference{Name: "theirs", Key: "key"}
		previous, err := signing.GenerateSecret()
		Expect(err).NotTo(HaveOccurred())
		at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

		src, err := secrets.ensure(ctx, ep)
		Expect(err).NotTo(HaveOccurred())
		Expect(secrets.record(ctx, &src, &rotationPlan{Remember: &previousSecret{Value: previous, RotatedAt: at}})).To(Succeed())
		prev := secretOf("orders-signing-previous")
		Expect(metav1.IsControlledBy(prev, ep)).To(BeTrue())
		Expect(decodePrevious(prev.Data)).To(Equal(&previousSecret{Value: previous, RotatedAt: at}))
		Expect(secretOf("theirs").Data).To(HaveLen(1), "the user's Secret is theirs to write")

		src, err = secrets.ensure(ctx, ep)
		Expect(err).NotTo(HaveOccurred())
		Expect(src.Remembered).To(Equal(&previousSecret{Value: previous, RotatedAt: at}))
		Expect(secrets.record(ctx, &src, &rotationPlan{Forget: true})).To(Succeed())
		Expect(decodePrevious(secretOf("orders-signing-previous").Data)).To(BeNil())
	})
})
