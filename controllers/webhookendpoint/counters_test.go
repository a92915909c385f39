package webhookendpoint

import (
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

// TestCounterHold: a status that changes only in counters is written at
// most once per CounterWriteInterval of the endpoint, any other change
// (an exhaustion, pending work, a condition) at once.
func TestCounterHold(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	r := &WebhookEndpointReconciler{Clock: clk, CounterWriteInterval: time.Minute}
	const uid = types.UID("ep-1")
	success := metav1.NewTime(clk.Now().Add(-time.Hour))
	healthy := metav1.Condition{Type: hookv1.ConditionHealthy, Status: metav1.ConditionTrue, Reason: hookv1.ReasonLastAttemptSucceeded,
		Message: "the last attempt succeeded at 11:00", LastTransitionTime: success}
	written := hookv1.WebhookEndpointStatus{
		Deliveries:      hookv1.DeliveryCounts{Delivered: 10},
		LastSuccessTime: &success,
		Conditions:      []metav1.Condition{healthy},
		Evidence:        &hookv1.DeliveryEvidence{Last24h: &hookv1.EvidenceWindow{Settled: 10}},
	}
	counters := func(n int64) *hookv1.WebhookEndpointStatus {
		s := written.DeepCopy()
		s.Deliveries.Delivered = n
		s.Deliveries.InFlight = n % 3 // moves with every delivery
		at := metav1.NewTime(clk.Now())
		s.LastSuccessTime = &at
		s.Evidence.Last24h.Settled = n
		meta.FindStatusCondition(s.Conditions, hookv1.ConditionHealthy).Message = "the last attempt succeeded at " + at.String()
		return s
	}
	hold := func(next *hookv1.WebhookEndpointStatus) time.Duration {
		return r.counterHold(uid, &written, next, clk.Now())
	}

	if h := hold(written.DeepCopy()); h != 0 {
		t.Fatalf("an unchanged status is held %v", h)
	}
	// Never written by this process: written now.
	if h := hold(counters(11)); h != 0 {
		t.Fatalf("the first change of counters is held %v", h)
	}
	r.statusWritten(uid, clk.Now())
	written = *counters(11)

	clk.SetTime(clk.Now().Add(20 * time.Second))
	if h := hold(counters(12)); h != 40*time.Second {
		t.Fatalf("counters 20s after the last write are held %v, want the 40s left", h)
	}
	// Work an admin acts on is written at once, with the counters.
	exhausted := counters(12)
	exhausted.Deliveries.ExhaustedUnresolved = 1
	pending := counters(12)
	pending.Deliveries.Pending = 3
	failed := counters(12)
	failed.LastFailureReason = "HTTP 503"
	unhealthy := counters(12)
	meta.FindStatusCondition(unhealthy.Conditions, hookv1.ConditionHealthy).Status = metav1.ConditionFalse
	breaker := counters(12)
	breaker.Breaker = &hookv1.CircuitBreakerStatus{Failures: 3}
	for name, s := range map[string]*hookv1.WebhookEndpointStatus{"an exhaustion": exhausted, "pending work": pending, "a failure": failed, "Healthy": unhealthy, "the breaker": breaker} {
		if h := hold(s); h != 0 {
			t.Errorf("%s is held %v with the counters", name, h)
		}
	}
	// First values are written at once.
	first := written.DeepCopy()
	first.Deliveries.Delivered, first.LastSuccessTime, first.Evidence = 0, nil, nil
	if h := r.counterHold(uid, first, counters(12), clk.Now()); h != 0 {
		t.Fatalf("the first delivery is held %v", h)
	}

	clk.SetTime(clk.Now().Add(40 * time.Second))
	if h := hold(counters(13)); h != 0 {
		t.Fatalf("counters a minute after the last write are held %v", h)
	}
	r.statusWritten(uid, time.Time{})
	if len(r.counterWrites) != 0 {
		t.Fatal("a removed endpoint's last write is still remembered")
	}
	if (&WebhookEndpointReconciler{}).counterWriteInterval() != time.Minute {
		t.Fatal("the default interval is not a minute")
	}
}

// statusWrites records the status writes of one endpoint as a watch sees
// them.
type statusWrites struct {
	mu     sync.Mutex
	writes []statusWrite
}

type statusWrite struct {
	at     time.Time
	status hookv1.WebhookEndpointStatus
}

var _ = Describe("an endpoint's counters", func() {
	It("are written at most once per interval while they alone move, and land", func() {
		ns := newNamespace()
		rcv := newHookReceiver(http204)
		ep := newEndpoint(ns, "counted", rcv.URL)
		key := client.ObjectKeyFromObject(ep)
		expectReady(key)

		wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		w, err := wc.Watch(ctx, &hookv1.WebhookEndpointList{}, client.InNamespace(ns))
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		seen := &statusWrites{}
		go func() {
			defer GinkgoRecover()
			for e := range w.ResultChan() {
				if e.Type != watch.Modified && e.Type != watch.Added {
					continue
				}
				got := e.Object.(*hookv1.WebhookEndpoint)
				seen.mu.Lock()
				if n := len(seen.writes); n == 0 || !equality.Semantic.DeepEqual(seen.writes[n-1].status, got.Status) {
					seen.writes = append(seen.writes, statusWrite{time.Now(), got.Status})
				}
				seen.mu.Unlock()
			}
		}()

		const n = 16
		for range n {
			publishEvent(ns, "order.created", nil)
			time.Sleep(150 * time.Millisecond)
		}
		Eventually(func(g Gomega) {
			g.Expect(getEndpoint(g, key).Status.Deliveries.Delivered).To(Equal(int64(n)))
		}).WithTimeout(20 * time.Second).Should(Succeed())

		seen.mu.Lock()
		defer seen.mu.Unlock()
		countersAlone := 0
		for i := 1; i < len(seen.writes); i++ {
			prev, cur := seen.writes[i-1], seen.writes[i]
			if !countersOnly(&prev.status, &cur.status) {
				continue
			}
			countersAlone++
			Expect(cur.at.Sub(prev.at)).To(BeNumerically(">=", suiteCounterWriteInterval-200*time.Millisecond),
				"status write %d changed only counters %v after the previous one", i, cur.at.Sub(prev.at))
		}
		GinkgoWriter.Printf("%d status writes, %d of counters alone, for %d deliveries\n", len(seen.writes), countersAlone, n)
	})
})
