package webhookendpoint

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/signingsecret"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// The signing-secret controller's reading and writing on their own,
// against the real API server. The endpoint objects here are never
// created, so the running controllers leave their Secrets to the code
// under test.
var _ = Describe("signing Secrets", func() {
	var (
		writer *signingsecret.SigningSecretReconciler
		ep     *hookv1.WebhookEndpoint
		at     = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	)
	BeforeEach(func() {
		writer = &signingsecret.SigningSecretReconciler{Client: k8sClient, APIReader: k8sClient}
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
	read := func() signingsecret.Source {
		src, err := signingsecret.Read(ctx, k8sClient, ep)
		Expect(err).NotTo(HaveOccurred())
		return src
	}
	write := func(src signingsecret.Source, registered sensitive.Bytes, now time.Time) signingsecret.RotationPlan {
		var reg *ledger.Endpoint
		if registered != nil {
			reg = &ledger.Endpoint{Secrets: []ledger.SigningSecret{{Value: registered}}}
		}
		plan, err := writer.Write(ctx, ep, &src, reg, now)
		Expect(err).NotTo(HaveOccurred())
		return plan
	}

	It("generates an owned Secret once, and a new secret, remembering the one replaced, when its key is removed", func() {
		owed := read()
		Expect(owed.Owed).To(BeTrue())
		Expect(owed.Problem).To(BeNil())
		write(owed, nil, at)
		first := read()
		Expect(first.Owed).To(BeFalse())
		Expect(first.SecretName).To(Equal("orders-signing"))
		s := secretOf("orders-signing")
		Expect(metav1.IsControlledBy(s, ep)).To(BeTrue())
		Expect(sensitive.Bytes(s.Data[signingsecret.KeySigningSecret])).To(Equal(first.Current))

		write(first, first.Current, at)
		Expect(secretOf("orders-signing").ResourceVersion).To(Equal(s.ResourceVersion), "nothing to write: nothing written")

		delete(s.Data, signingsecret.KeySigningSecret)
		Expect(k8sClient.Update(ctx, s)).To(Succeed())
		Expect(read().Owed).To(BeTrue(), "a removed key asks for a new secret")
		plan := write(read(), first.Current, at)
		Expect(plan.Remember).NotTo(BeNil())
		rotated := read()
		Expect(rotated.Current).NotTo(BeEmpty())
		Expect(rotated.Current).NotTo(Equal(first.Current))
		Expect(rotated.Remembered).To(Equal(&signingsecret.Previous{Value: first.Current, RotatedAt: at}), "remembered in the same write")
	})

	It("refuses a generated Secret's name taken by a Secret the endpoint does not own, naming it and not its value", func() {
		value, err := signing.GenerateSecret()
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ep.Namespace, Name: "orders-signing"},
			Data:       map[string][]byte{signingsecret.KeySigningSecret: value.Reveal()},
		})).To(Succeed())
		src := read()
		Expect(src.Problem).NotTo(BeNil())
		Expect(src.Problem.Reason).To(Equal(hookv1.ReasonSigningSecretInvalid))
		Expect(src.Problem.Message).To(ContainSubstring(`"orders-signing"`))
		Expect(src.Problem.Message).NotTo(ContainSubstring(string(value.Reveal())))
		Expect(src.Current).To(BeEmpty())
	})

	It("remembers a rotation of a user's Secret in its own Secret, and forgets it after the grace period", func() {
		current, err := signing.GenerateSecret()
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ep.Namespace, Name: "theirs"},
			Data:       map[string][]byte{"key": current.Reveal()},
		})).To(Succeed())
		ep.Spec.SigningSecretRef = &hookv1.SecretKeyReference{Name: "theirs", Key: "key"}
		previous, err := signing.GenerateSecret()
		Expect(err).NotTo(HaveOccurred())

		src := read()
		Expect(src.Owed).To(BeFalse())
		plan := write(src, previous, at)
		Expect(plan.PreviousUntil).To(Equal(at.Add(signingsecret.DefaultRotationGracePeriod)))
		prev := secretOf("orders-signing-previous")
		Expect(metav1.IsControlledBy(prev, ep)).To(BeTrue())
		Expect(signingsecret.DecodePrevious(prev.Data)).To(Equal(&signingsecret.Previous{Value: previous, RotatedAt: at}))
		Expect(secretOf("theirs").Data).To(HaveLen(1), "the user's Secret is theirs to write")

		src = read()
		Expect(src.Remembered).To(Equal(&signingsecret.Previous{Value: previous, RotatedAt: at}))
		plan = write(src, current, at.Add(signingsecret.DefaultRotationGracePeriod))
		Expect(plan.Forget).To(BeTrue())
		Expect(signingsecret.DecodePrevious(secretOf("orders-signing-previous").Data)).To(BeNil())
	})
})
