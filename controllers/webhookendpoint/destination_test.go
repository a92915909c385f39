package webhookendpoint

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/destination"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// countingResolver counts lookups and answers from a table.
type countingResolver struct {
	addrs   map[string]netip.Addr
	lookups atomic.Int32
}

func (r *countingResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.lookups.Add(1)
	if a, ok := r.addrs[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, errors.New("lookup " + host + ": server misbehaving")
}

func TestDestinationProblem(t *testing.T) {
	dns := &countingResolver{addrs: map[string]netip.Addr{
		"metadata.test": netip.MustParseAddr("169.254.169.254"),
		"public.test":   netip.MustParseAddr("93.184.215.14"),
	}}
	clk := clocktesting.NewFakePassiveClock(statusNow)
	r := &WebhookEndpointReconciler{Destinations: destination.New(destination.Options{Resolver: dns}), Clock: clk}
	ctx := context.Background()
	tests := []struct {
		url, want string
	}{
		{"http://169.254.169.254/latest/meta-data", "url resolves to 169.254.169.254, a cloud metadata address; " +
			"hookkeeper does not deliver there unless --allowed-destination-cidrs allows it"},
		{"http://metadata.test/latest/meta-data?token=x", "url host metadata.test resolves to 169.254.169.254, a cloud metadata address; " +
			"hookkeeper does not deliver there unless --allowed-destination-cidrs allows it"},
		{"https://[::ffff:127.0.0.1]:8443/hooks", "url resolves to 127.0.0.1, a loopback address"},
		{"https://[fd00:ec2::254]/", "url resolves to fd00:ec2::254, a cloud metadata address"},
		{"https://public.test/hooks", ""},
		{"https://93.184.215.14/hooks", ""},
		// A failed lookup is not a refusal: the dial-time check guards.
		{"https://unresolvable.test/hooks", ""},
		{"::not a url", ""},
	}
	for _, tt := range tests {
		p := r.destinationProblem(ctx, tt.url)
		switch {
		case tt.want == "" && p != nil:
			t.Errorf("%s: %+v, want no problem", tt.url, p)
		case tt.want != "" && p == nil:
			t.Errorf("%s: no problem, want %q", tt.url, tt.want)
		case p != nil && (p.Reason != hookv1.ReasonDestinationForbidden || !strings.HasPrefix(p.Message, tt.want)):
			t.Errorf("%s: %s %q, want DestinationForbidden %q", tt.url, p.Reason, p.Message, tt.want)
		case p != nil && strings.Contains(p.Message, "token"):
			t.Errorf("%s: the message %q shows more of the url than its host", tt.url, p.Message)
		}
	}

	// Outcomes are reused for a while, failures included, then looked up
	// again.
	before := dns.lookups.Load()
	clk.SetTime(statusNow.Add(time.Second))
	r.destinationProblem(ctx, "https://metadata.test/")
	r.destinationProblem(ctx, "https://unresolvable.test/")
	if n := dns.lookups.Load() - before; n != 0 {
		t.Errorf("%d lookups within the TTL", n)
	}
	clk.SetTime(statusNow.Add(destinationVerdictTTL + time.Nanosecond)) // LRUExpireCache: expired after the TTL, not at it
	if p := r.destinationProblem(ctx, "https://metadata.test/"); p == nil {
		t.Error("metadata.test allowed after the TTL")
	}
	if n := dns.lookups.Load() - before; n != 1 {
		t.Errorf("%d lookups after the TTL, want 1", n)
	}

	// Without a policy, nothing is checked.
	if p := (&WebhookEndpointReconciler{}).destinationProblem(ctx, "http://169.254.169.254/"); p != nil {
		t.Errorf("no policy: %+v", p)
	}
}

var _ = Describe("WebhookEndpoint destinations", func() {
	const forbiddenMetadata = "url resolves to 169.254.169.254, a cloud metadata address; " +
		"hookkeeper does not deliver there unless --allowed-destination-cidrs allows it"

	expectForbidden := func(key client.ObjectKey, message ...string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			c := condition(g, key, hookv1.ConditionReady)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(hookv1.ReasonDestinationForbidden))
			for _, m := range message {
				g.Expect(c.Message).To(ContainSubstring(m))
			}
		}).WithTimeout(20 * time.Second).Should(Succeed())
	}

	It("refuses a cloud metadata url with a clear condition and registers nothing, so nothing is sent", func() {
		ns := newNamespace()
		ep := newEndpoint(ns, "imds", "http://169.254.169.254/latest/meta-data")
		key := client.ObjectKeyFromObject(ep)
		expectForbidden(key, forbiddenMetadata, "not registered with the delivery engine and receives no events")
		_, err := registered(key)
		Expect(errors.Is(err, ledger.ErrNotFound)).To(BeTrue(), "registered although forbidden: %v", err)

		// An event of its namespace creates no delivery to it.
		now := time.Now()
		res, err := eng.Publish(ctx, &ledger.EventInsertParams{
			ID: ledger.NewID("evt", now), Namespace: ns, Type: "order.created", Data: []byte(`{"order":42}`), Now: now,
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Err).NotTo(HaveOccurred())
		Expect(res.Deliveries).To(BeEmpty())
		Consistently(func(g Gomega) {
			_, err := registered(key)
			g.Expect(errors.Is(err, ledger.ErrNotFound)).To(BeTrue())
		}).WithTimeout(time.Second).Should(Succeed())
	})

	It("refuses a host name that resolves to the metadata address", func() {
		ns := newNamespace()
		ep := newEndpoint(ns, "by-name", "http://metadata.test/latest/meta-data")
		key := client.ObjectKeyFromObject(ep)
		expectForbidden(key, "url host metadata.test resolves to 169.254.169.254, a cloud metadata address")
		_, err := registered(key)
		Expect(errors.Is(err, ledger.ErrNotFound)).To(BeTrue(), "registered although forbidden: %v", err)
	})

	It("pauses an endpoint whose url becomes forbidden, and resumes it with nothing lost once it is allowed again", func() {
		ns := newNamespace()
		rcv := newHookReceiver(http.StatusNoContent)
		ep := newEndpoint(ns, "moving", rcv.URL)
		key := client.ObjectKeyFromObject(ep)
		expectReady(key)

		setURL := func(u string) {
			Eventually(func(g Gomega) {
				cur := getEndpoint(g, key)
				cur.Spec.URL = u
				g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
			}).Should(Succeed())
		}
		setURL("http://169.254.169.254/latest/meta-data")
		expectForbidden(key, forbiddenMetadata, "holds the endpoint paused")
		cfg, err := registered(key)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Paused).To(BeTrue())
		Expect(cfg.URL).To(Equal(rcv.URL), "the forbidden url reached the engine")

		// Deliveries wait; nothing is sent anywhere.
		id := publishEvent(ns, "order.created", nil)
		Eventually(func() int64 { return stats(key).Pending }).WithTimeout(5 * time.Second).Should(Equal(int64(1)))
		Consistently(rcv.count).WithTimeout(time.Second).Should(BeZero())

		// Allowed again: registered unpaused at the new url, and the
		// waiting delivery arrives.
		setURL(rcv.URL + "/again")
		expectReady(key)
		cfg, err = registered(key)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Paused).To(BeFalse())
		Expect(cfg.URL).To(Equal(rcv.URL + "/again"))
		Eventually(func() bool { _, ok := rcv.hook(id); return ok }).WithTimeout(10 * time.Second).Should(BeTrue())
	})
})
