package webhookendpoint

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/signingsecret"
)

// liveReads is a client.Reader that counts the Secrets and ConfigMaps
// read through it, by kind, namespace and name.
type liveReads struct {
	client.Reader

	mu   sync.Mutex
	gets map[contentKey]int
}

func (l *liveReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if kind := cachedKind(obj); kind != "" {
		l.mu.Lock()
		if l.gets == nil {
			l.gets = map[contentKey]int{}
		}
		l.gets[contentKey{kind, key}]++
		l.mu.Unlock()
	}
	return l.Reader.Get(ctx, key, obj, opts...)
}

// secretGets is how many times Secret key was read.
func (l *liveReads) secretGets(key client.ObjectKey) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gets[contentKey{"Secret", key}]
}

var _ = Describe("an endpoint's Secrets, read when they change", func() {
	It("reads no Secret when the ledger wakes it, and a changed Secret once", func() {
		ns := newNamespace()
		rcv := newHookReceiver(http204)
		cred := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "receiver"}, Data: map[string][]byte{"token": []byte("token-1")}}
		Expect(k8sClient.Create(ctx, cred)).To(Succeed())
		ep := newEndpoint(ns, "busy", rcv.URL, func(s *hookv1.WebhookEndpointSpec) {
			s.Auth = &hookv1.Auth{Bearer: &hookv1.BearerAuth{TokenSecretRef: hookv1.SecretKeySelector{Name: "receiver", Key: "token"}}}
		})
		key := client.ObjectKeyFromObject(ep)
		credKey := client.ObjectKeyFromObject(cred)
		signingKey := client.ObjectKey{Namespace: ns, Name: signingsecret.GeneratedName(ep)}
		expectReady(key)
		delivered := func(n int64) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				g.Expect(getEndpoint(g, key).Status.Deliveries.Delivered).To(Equal(n))
			}).WithTimeout(20 * time.Second).Should(Succeed())
		}
		publishEvent(ns, "order.created", nil)
		delivered(1)
		credReads, signingReads := endpointReads.secretGets(credKey), endpointReads.secretGets(signingKey)
		Expect(credReads).To(BeNumerically(">=", 1))
		Expect(signingReads).To(BeNumerically(">=", 1))

		// Deliveries wake the endpoint (the activity poller) and its
		// counters land in its status: no Secret is read for it.
		for range 8 {
			publishEvent(ns, "order.created", nil)
			time.Sleep(250 * time.Millisecond)
		}
		delivered(9)
		Expect(endpointReads.secretGets(credKey)).To(Equal(credReads), "a wake-up from the ledger read the credential Secret")
		Expect(endpointReads.secretGets(signingKey)).To(Equal(signingReads), "a wake-up from the ledger read the signing Secret")

		// A change of the Secret is read once, and registered.
		cred.Data["token"] = []byte("token-2")
		Expect(k8sClient.Update(ctx, cred)).To(Succeed())
		Eventually(func(g Gomega) {
			cfg, err := registered(key)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(cfg.Credentials.Bearer.Reveal())).To(Equal("token-2"))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		for range 8 {
			publishEvent(ns, "order.created", nil)
			time.Sleep(250 * time.Millisecond)
		}
		delivered(17)
		Expect(endpointReads.secretGets(credKey)).To(Equal(credReads+1), "a changed Secret is read once")
		Expect(endpointReads.secretGets(signingKey)).To(Equal(signingReads), "an unchanged Secret is not read again")

		// A deleted Secret is read live: not found, as before.
		Expect(k8sClient.Delete(ctx, cred)).To(Succeed())
		Eventually(func(g Gomega) {
			c := condition(g, key, hookv1.ConditionReady)
			g.Expect(c.Reason).To(Equal(hookv1.ReasonCredentialsUnavailable))
			g.Expect(c.Message).To(ContainSubstring(`Secret "receiver" not found`))
		}).WithTimeout(20 * time.Second).Should(Succeed())
	})
})

const http204 = 204

// metadataOnly serves the metadata of the objects it holds, as the
// manager's metadata cache does.
type metadataOnly map[contentKey]string

func (m metadataOnly) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	pm := obj.(*metav1.PartialObjectMetadata)
	rv, ok := m[contentKey{pm.Kind, key}]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: pm.Kind}, key.Name)
	}
	pm.ResourceVersion = rv
	return nil
}

func (m metadataOnly) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return nil
}

// objects is a live reader of fixed Secrets and ConfigMaps.
type objects map[contentKey]client.Object

func (o objects) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	kept, ok := o[contentKey{cachedKind(obj), key}]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: cachedKind(obj)}, key.Name)
	}
	copyInto(kept, obj)
	return nil
}

func (o objects) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func TestContentReader(t *testing.T) {
	key := client.ObjectKey{Namespace: "ns", Name: "s"}
	sk, ck := contentKey{"Secret", key}, contentKey{"ConfigMap", key}
	live := objects{
		sk: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", ResourceVersion: "1",
			Annotations: map[string]string{lastAppliedAnnotation: `{"data":{"token":"dmFsdWU="}}`, "keep": "me"}},
			Data: map[string][]byte{"token": []byte("value-1")}},
		ck: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", ResourceVersion: "5"}, Data: map[string]string{"ca.crt": "pem"}},
	}
	counted := &liveReads{Reader: live}
	md := metadataOnly{sk: "1", ck: "5"}
	r := &contentReader{metadata: md, live: counted, cache: &contentCache{size: 8}}
	read := func() *corev1.Secret {
		t.Helper()
		var s corev1.Secret
		if err := r.Get(context.Background(), key, &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	for range 3 {
		if s := read(); string(s.Data["token"]) != "value-1" {
			t.Fatalf("read %q", s.Data["token"])
		}
	}
	if n := counted.secretGets(key); n != 1 {
		t.Fatalf("an unchanged Secret was read live %d times, want once", n)
	}
	if a := read().Annotations; a[lastAppliedAnnotation] != "" || a["keep"] != "me" {
		t.Fatalf("kept annotations %v: the last-applied manifest holds the values again", a)
	}
	// A copy each time: what a reconcile changes is not what is kept.
	read().Data["token"][0] = 'X'
	if s := read(); string(s.Data["token"]) != "value-1" {
		t.Fatalf("the kept Secret changed with a copy handed out: %q", s.Data["token"])
	}

	// It changed: read once, then kept.
	live[sk].(*corev1.Secret).Data["token"] = []byte("value-2")
	live[sk].SetResourceVersion("2")
	md[sk] = "2"
	for range 3 {
		if s := read(); string(s.Data["token"]) != "value-2" {
			t.Fatalf("read %q after the change", s.Data["token"])
		}
	}
	if n := counted.secretGets(key); n != 2 {
		t.Fatalf("a changed Secret was read live %d times in all, want twice", n)
	}

	// Not in the metadata cache: read live each time.
	delete(md, sk)
	read()
	read()
	if n := counted.secretGets(key); n != 4 {
		t.Fatalf("a Secret the metadata cache lacks was read live %d times in all, want 4", n)
	}
	// Deleted (gone from the metadata cache): not found, and forgotten.
	delete(live, sk)
	var s corev1.Secret
	if err := r.Get(context.Background(), key, &s); !apierrors.IsNotFound(err) {
		t.Fatalf("a deleted Secret: %v, want NotFound", err)
	}
	if r.cache.kept(sk) != nil {
		t.Fatal("a deleted Secret is still kept")
	}

	// ConfigMaps alike.
	for range 2 {
		var cm corev1.ConfigMap
		if err := r.Get(context.Background(), key, &cm); err != nil || cm.Data["ca.crt"] != "pem" {
			t.Fatalf("ConfigMap: %v %v", err, cm.Data)
		}
	}
	counted.mu.Lock()
	cms := counted.gets[ck]
	counted.mu.Unlock()
	if cms != 1 {
		t.Fatalf("an unchanged ConfigMap was read live %d times, want once", cms)
	}

	// Bounded.
	small := &contentReader{metadata: metadataOnly{}, live: objects{}, cache: &contentCache{size: 2}}
	for i := range 5 {
		small.cache.keep(contentKey{"Secret", client.ObjectKey{Namespace: "ns", Name: string(rune('a' + i))}}, &corev1.Secret{})
	}
	if n := small.cache.len(); n != 2 {
		t.Fatalf("the cache keeps %d objects, bound 2", n)
	}
}
