package webhookendpoint

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

var _ = Describe("an endpoint's credentials from Secrets", func() {
	It("waits paused for a missing Secret, registers its values once they appear, follows their rotation, and never shows them", func() {
		ns := newNamespace()
		rcv := newHookReceiver(200)
		ep := newEndpoint(ns, "creds", rcv.URL, func(s *hookv1.WebhookEndpointSpec) {
			s.Headers = []hookv1.Header{{Name: "X-Api-Key", ValueFrom: &hookv1.HeaderValueSource{
				SecretKeyRef: hookv1.SecretKeySelector{Name: "receiver", Key: "api-key"}}}}
			s.Auth = &hookv1.Auth{Bearer: &hookv1.BearerAuth{TokenSecretRef: hookv1.SecretKeySelector{Name: "receiver", Key: "token"}}}
		})
		key := client.ObjectKeyFromObject(ep)
		const apiKey, token, rotated = "key-0f9c2e71", "token-4d1a77b0", "token-rotated-93be10"

		// Missing: not Ready, naming the Secret; registered paused, so an
		// event published now gets a delivery that waits.
		Eventually(func(g Gomega) {
			c := condition(g, key, hookv1.ConditionReady)
			g.Expect(c.Reason).To(Equal(hookv1.ReasonCredentialsUnavailable))
			g.Expect(c.Message).To(ContainSubstring(`Secret "receiver" not found`))
			g.Expect(c.Message).To(ContainSubstring("its deliveries wait"))
			cfg, err := registered(key)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.Paused).To(BeTrue())
			g.Expect(cfg.Credentials).To(BeNil())
		}).WithTimeout(20 * time.Second).Should(Succeed())
		waiting := publishEvent(ns, "order.created", nil)

		// A key missing: the message names the key.
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "receiver"},
			Data: map[string][]byte{"api-key": []byte(apiKey)}}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			c := condition(g, key, hookv1.ConditionReady)
			g.Expect(c.Reason).To(Equal(hookv1.ReasonCredentialsUnavailable))
			g.Expect(c.Message).To(ContainSubstring(`key "token" of Secret "receiver"`))
		}).WithTimeout(20 * time.Second).Should(Succeed())

		// Both keys: Ready, registered with the values and unpaused; the
		// delivery that waited goes out with them.
		secret.Data["token"] = []byte(token)
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		expectReady(key)
		Eventually(func(g Gomega) {
			cfg, err := registered(key)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.Paused).To(BeFalse())
			g.Expect(cfg.Credentials).NotTo(BeNil())
			g.Expect(string(cfg.Credentials.Bearer.Reveal())).To(Equal(token))
			g.Expect(cfg.Credentials.Headers).To(HaveLen(1))
			g.Expect(string(cfg.Credentials.Headers[0].Value.Reveal())).To(Equal(apiKey))
			g.Expect(cfg.Headers).To(BeEmpty(), "a header from a Secret is not a static header")
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Eventually(func() bool { _, ok := rcv.hook(waiting); return ok }).WithTimeout(20 * time.Second).Should(BeTrue())

		// Rotation: the next registration carries the new value, without
		// a restart.
		secret.Data["token"] = []byte(rotated)
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			cfg, err := registered(key)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(cfg.Credentials.Bearer.Reveal())).To(Equal(rotated))
		}).WithTimeout(20 * time.Second).Should(Succeed())

		// A value that cannot be sent in a header: refused by name.
		secret.Data["api-key"] = []byte("line\r\nX-Evil: 1")
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			c := condition(g, key, hookv1.ConditionReady)
			g.Expect(c.Reason).To(Equal(hookv1.ReasonCredentialsUnavailable))
			g.Expect(c.Message).To(ContainSubstring(`spec.headers[0].valueFrom.secretKeyRef: key "api-key" of Secret "receiver"`))
		}).WithTimeout(20 * time.Second).Should(Succeed())

		// Nothing of any value in the object, its status or the log.
		raw, err := json.Marshal(getEndpoint(Default, key))
		Expect(err).NotTo(HaveOccurred())
		for _, v := range []string{apiKey, token, rotated, "X-Evil"} {
			Expect(string(raw)).NotTo(ContainSubstring(v))
			Expect(errorLog.containing(v)).To(BeEmpty(), "the operator's log shows a credential")
		}
	})

	It("reads a CA bundle from a ConfigMap, and follows it", func() {
		ns := newNamespace()
		ep := newEndpoint(ns, "private-ca", "https://hooks.example.com/in", func(s *hookv1.WebhookEndpointSpec) {
			s.TLS = &hookv1.EndpointTLS{CABundle: &hookv1.CABundleSource{
				ConfigMapKeyRef: &hookv1.ConfigMapKeySelector{Name: "receiver-ca", Key: "ca.crt"}}}
		})
		key := client.ObjectKeyFromObject(ep)
		Eventually(func(g Gomega) {
			c := condition(g, key, hookv1.ConditionReady)
			g.Expect(c.Reason).To(Equal(hookv1.ReasonCredentialsUnavailable))
			g.Expect(c.Message).To(ContainSubstring(`spec.tls.caBundle.configMapKeyRef: ConfigMap "receiver-ca" not found`))
		}).WithTimeout(20 * time.Second).Should(Succeed())

		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "receiver-ca"},
			Data: map[string]string{"ca.crt": "not a certificate"}}
		Expect(k8sClient.Create(ctx, cm)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(condition(g, key, hookv1.ConditionReady).Message).To(ContainSubstring("the CA bundle holds no PEM certificate"))
		}).WithTimeout(20 * time.Second).Should(Succeed())

		ca := testCAPEM()
		cm.Data["ca.crt"] = string(ca)
		Expect(k8sClient.Update(ctx, cm)).To(Succeed())
		expectReady(key)
		Eventually(func(g Gomega) {
			cfg, err := registered(key)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.Credentials).NotTo(BeNil())
			g.Expect(cfg.Credentials.TLS.CAPEM).To(Equal(ca))
		}).WithTimeout(20 * time.Second).Should(Succeed())
	})
})

// testCAPEM is a self-signed CA certificate in PEM.
func testCAPEM() []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hookkeeper test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
