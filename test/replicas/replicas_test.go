package replicas

import (
	"fmt"
	"net/http"
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sync/errgroup"
)

// The specs share the two managers and build on each other: they run in
// order, and a failure skips the rest.
var _ = Describe("Replicas on one PostgreSQL ledger", Ordered, func() {
	const ns = "shop"

	// Metrics series the specs read.
	const (
		delivered    = `hookkeeper_delivery_attempts_total{outcome="delivered"}`
		exhaustedMax = `hookkeeper_deliveries_exhausted_total{owner="",reason="MaxAttempts"}`
		created      = `hookkeeper_events_published_total{result="created"}`
	)
	otherOutcomes := []string{
		`hookkeeper_delivery_attempts_total{outcome="retry"}`,
		`hookkeeper_delivery_attempts_total{outcome="exhausted"}`,
		`hookkeeper_delivery_attempts_total{outcome="accepted"}`,
	}

	// orders's receiver, shared by the specs that publish to it, and how
	// many events they published; holderID is the Lease holder the first
	// spec saw.
	var (
		orders   *receiver
		ordersN  int // events published to it so far
		holderID string
	)

	BeforeAll(func() {
		suite.Apply(namespaceYAML(ns))
		// Here, not in a spec: it must outlive the spec that creates the
		// endpoint (a cleanup deferred in BeforeAll runs after the last
		// spec of the container).
		orders = newReceiver("orders (always 204)", http.StatusNoContent)
	})

	It("exactly one replica leads", func() {
		leader, follower := whoLeads()
		By(leader.name + " leads, " + follower.name + " follows")

		host, err := os.Hostname()
		Expect(err).NotTo(HaveOccurred())
		Eventually(leaseHolder).Should(HavePrefix(host+"_"),
			"the Lease names a manager of this host (controller-runtime's identity is hostname_uuid)")
		holderID, err = leaseHolder()
		Expect(err).NotTo(HaveOccurred())

		By("the follower staying a follower while the leader renews")
		// Longer than controller-runtime's retry period (2s, jittered up
		// to 2.4s): the follower tried the Lease in between and did not
		// take it.
		Consistently(func(g Gomega) {
			g.Expect(leader.leads(g)).To(BeTrue())
			g.Expect(follower.leads(g)).To(BeFalse())
			h, err := leaseHolder()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(h).To(Equal(holderID))
		}).WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	})

	It("every replica delivers, each event once", func() {
		suite.Apply(policyYAML(ns, "fast", "200ms", 3) + "---\n" +
			endpointYAML(ns, "orders", orders.URL(), "[order.created]", "fast"))
		suite.MustKubectl("wait", "-n", ns, "webhookendpoint/orders", "--for=condition=Ready", "--timeout=30s")

		By("publishing 200 events through each replica's API, at once")
		const perReplica = 200
		var (
			g    errgroup.Group
			sent [2][]string
		)
		for i, r := range replicas {
			g.Go(func() (err error) {
				sent[i], err = publishMany(r, ns, "order-"+r.name, "order.created", "orders", perReplica)
				return err
			})
		}
		Expect(g.Wait()).To(Succeed())
		ids := map[string]bool{}
		for _, s := range sent {
			for _, id := range s {
				ids[id] = true
			}
		}
		Expect(ids).To(HaveLen(2*perReplica), "distinct event ids")
		ordersN = 2 * perReplica

		By("the receiver getting every event, none twice")
		all := make([]string, 0, len(ids))
		for id := range ids {
			all = append(all, id)
		}
		Eventually(func(g Gomega) {
			byID, _ := orders.Counts()
			g.Expect(notReceived(byID, all)).To(BeEmpty(), "events the receiver did not get")
		}).Should(Succeed())
		byID, total := orders.Counts()
		Expect(receivedMoreThanOnce(byID)).To(BeEmpty(), "events the receiver got more than once")
		Expect(total).To(Equal(len(ids)), "requests in all")

		By("both replicas attempting, 400 attempts in all, every one delivered")
		var perReplicaAttempts [2]float64
		Eventually(func(g Gomega) {
			for i, r := range replicas {
				perReplicaAttempts[i] = r.metrics(g)[delivered]
			}
			g.Expect(perReplicaAttempts[0] + perReplicaAttempts[1]).To(Equal(float64(len(ids))))
		}).Should(Succeed())
		AddReportEntry("delivered attempts per replica", fmt.Sprintf("%s %v, %s %v",
			replicas[0].name, perReplicaAttempts[0], replicas[1].name, perReplicaAttempts[1]))
		for i, r := range replicas {
			m := r.metrics(Default)
			Expect(perReplicaAttempts[i]).To(BeNumerically(">", 0), "%s made no attempt", r.name)
			Expect(m[created]).To(Equal(float64(perReplica)), "%s: %s", r.name, created)
			for _, s := range otherOutcomes {
				Expect(m[s]).To(BeZero(), "%s: %s", r.name, s)
			}
		}

		By("the leader counting them on the endpoint's status")
		suite.MustKubectl("wait", "-n", ns, "webhookendpoint/orders", "--timeout=30s",
			fmt.Sprintf("--for=jsonpath={.status.deliveries.delivered}=%d", ordersN))
		Expect(endpointStatus(ns, "orders", `{.status.deliveries.pending} {.status.deliveries.inFlight}`)).To(Equal("0 0"))
	})

	It("shows an exhaustion reached on a non-leader on the endpoint's status", func() {
		leader, follower := whoLeads()
		payments := newReceiver("payments (always 500)", http.StatusInternalServerError)
		suite.Apply(policyYAML(ns, "twice", "100ms", 2) + "---\n" +
			endpointYAML(ns, "payments", payments.URL(), "[payment.failed]", "twice"))
		suite.MustKubectl("wait", "-n", ns, "webhookendpoint/payments", "--for=condition=Ready", "--timeout=30s")

		// Either engine may claim a delivery, whoever published it. Publish
		// through the follower, one event at a time, until the follower's
		// engine is the one that exhausted the latest: its notice goes
		// nowhere (no controller runs there), so only the leader's periodic
		// refresh from the ledger can bring it to the status.
		exhausted := func(g Gomega) (onLeader, onFollower float64) {
			return leader.metrics(g)[exhaustedMax], follower.metrics(g)[exhaustedMax]
		}
		var ids []string
		for {
			Expect(len(ids)).To(BeNumerically("<", 10), "10 exhaustions, none of them on the follower %s", follower.name)
			l0, f0 := exhausted(Default)
			p, err := follower.api.publish(ns, fmt.Sprintf("payment-%d", len(ids)),
				fmt.Sprintf(`{"type":"payment.failed","data":{"payment":%d}}`, len(ids)), "payments")
			Expect(err).NotTo(HaveOccurred())
			ids = append(ids, p.ID)
			var l, f float64
			Eventually(func(g Gomega) {
				d := follower.api.deliveryOf(g, ns, p.ID)
				g.Expect(d.State).To(Equal("exhausted"))
				g.Expect(d.Attempts).To(Equal(2))
				g.Expect(d.ExhaustReason).To(Equal("MaxAttempts"))
				l, f = exhausted(g)
				g.Expect(l + f).To(Equal(l0 + f0 + 1))
			}).Should(Succeed())
			if f > f0 {
				break
			}
		}
		AddReportEntry("events published until the follower exhausted one", len(ids))

		By("the status catching up at the leader's next refresh")
		suite.MustKubectl("wait", "-n", ns, "webhookendpoint/payments", "--for=condition=DeliveriesExhausted", "--timeout=30s")
		suite.MustKubectl("wait", "-n", ns, "webhookendpoint/payments", "--timeout=30s",
			fmt.Sprintf("--for=jsonpath={.status.deliveries.exhaustedUnresolved}=%d", len(ids)))
		recent, err := endpointStatus(ns, "payments", `{range .status.recentExhausted[*]}{.eventID} {end}`)
		Expect(err).NotTo(HaveOccurred())
		for _, id := range ids {
			Expect(recent).To(ContainSubstring(id), "status.recentExhausted")
		}
		byID, total := payments.Counts()
		for _, id := range ids {
			Expect(byID).To(HaveKeyWithValue(id, 2), "requests for %s (maxAttempts 2)", id)
		}
		Expect(total).To(Equal(2 * len(ids)))
	})

	It("hands the controllers to the other replica at once when the leader stops", func() {
		leader, survivor := whoLeads()

		By("SIGTERM to the leader " + leader.name + ": a clean exit that releases the Lease")
		start := time.Now()
		before := logSize(leader.LogPath)
		Expect(leader.Stop()).To(Succeed(), "%s's exit status after SIGTERM", leader.name)
		stopped := time.Since(start)
		// A stop that was asked for is no error: nothing the leader logged
		// from the SIGTERM on is at error level (controller-runtime reports
		// the Lease it releases as "leader election lost").
		Expect(errorLines(leader.LogPath, before)).To(BeEmpty(), "%s logged errors while stopping", leader.name)
		// LeaderElectionReleaseOnCancel: the Lease is let go before the
		// process exits, so it no longer names the old leader now.
		h, err := leaseHolder()
		Expect(err).NotTo(HaveOccurred())
		Expect(h).NotTo(Equal(holderID), "the Lease still names the stopped leader: it was not released")

		By(survivor.name + " taking the Lease well before it would have expired (15s)")
		Eventually(func(g Gomega) {
			g.Expect(survivor.leads(g)).To(BeTrue())
			h, err := leaseHolder()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(h).NotTo(BeEmpty())
			g.Expect(h).NotTo(Equal(holderID))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		AddReportEntry("takeover", fmt.Sprintf("leader stopped in %v; %s led %v after the SIGTERM",
			stopped.Round(time.Millisecond), survivor.name, time.Since(start).Round(time.Millisecond)))

		By("the new leader reconciling a new endpoint")
		invoices := newReceiver("invoices (always 204)", http.StatusNoContent)
		suite.Apply(endpointYAML(ns, "invoices", invoices.URL(), "[invoice.created]", "fast"))
		suite.MustKubectl("wait", "-n", ns, "webhookendpoint/invoices", "--for=condition=Ready", "--timeout=30s")

		By("the survivor delivering what its API accepts, to the new endpoint and the first one")
		const more = 20
		invoiceIDs, err := publishMany(survivor, ns, "invoice", "invoice.created", "invoices", more)
		Expect(err).NotTo(HaveOccurred())
		orderIDs, err := publishMany(survivor, ns, "order-after-takeover", "order.created", "orders", more)
		Expect(err).NotTo(HaveOccurred())
		ordersN += more
		for _, c := range []struct {
			rcv *receiver
			ids []string
			n   int
		}{{invoices, invoiceIDs, more}, {orders, orderIDs, ordersN}} {
			Eventually(func(g Gomega) {
				byID, _ := c.rcv.Counts()
				g.Expect(notReceived(byID, c.ids)).To(BeEmpty(), "events %s did not get", c.rcv.name)
			}).Should(Succeed())
			byID, total := c.rcv.Counts()
			Expect(receivedMoreThanOnce(byID)).To(BeEmpty(), "events %s got more than once", c.rcv.name)
			Expect(total).To(Equal(c.n), "requests to %s in all", c.rcv.name)
		}

		By("the new leader refreshing the counters of both endpoints")
		suite.MustKubectl("wait", "-n", ns, "webhookendpoint/invoices", "--timeout=30s",
			fmt.Sprintf("--for=jsonpath={.status.deliveries.delivered}=%d", more))
		suite.MustKubectl("wait", "-n", ns, "webhookendpoint/orders", "--timeout=30s",
			fmt.Sprintf("--for=jsonpath={.status.deliveries.delivered}=%d", ordersN))
	})

	It("a replica that joins follows, and one stopped in the middle of deliveries finishes them: nothing lost, nothing sent twice", func() {
		leader, _ := whoLeads()
		holder, err := leaseHolder()
		Expect(err).NotTo(HaveOccurred())

		By("a third manager joining as a follower")
		joined := startReplica("manager-c")
		replicas = append(replicas, joined)
		joined.waitReady()
		Consistently(func(g Gomega) {
			g.Expect(joined.leads(g)).To(BeFalse())
			g.Expect(leader.leads(g)).To(BeTrue())
			g.Expect(leaseHolder()).To(Equal(holder))
		}).WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		By("publishing through it to a slow paused endpoint, unpausing it, and stopping the new replica while its attempts are in progress")
		const n, maxInFlight = 300, 20
		slow := newSlowReceiver("shipments (204 after 200ms)", http.StatusNoContent, 200*time.Millisecond)
		suite.Apply(endpointYAML(ns, "shipments", slow.URL(), "[shipment.created]", "fast") +
			fmt.Sprintf("  maxInFlight: %d\n  paused: true\n", maxInFlight))
		suite.MustKubectl("wait", "-n", ns, "webhookendpoint/shipments", "--for=condition=Ready", "--timeout=30s")
		// Paused, the deliveries wait: a backlog for both engines.
		ids, err := publishMany(joined, ns, "shipment", "shipment.created", "shipments", n)
		Expect(err).NotTo(HaveOccurred())
		suite.MustKubectl("patch", "-n", ns, "webhookendpoint/shipments", "--type=merge", "-p", `{"spec":{"paused":false}}`)
		// Both engines work the backlog, maxInFlight at a time each: more
		// than maxInFlight requests held by the receiver at once means
		// that the replica about to stop has attempts in progress.
		Eventually(slow.InFlight).Should(BeNumerically(">", maxInFlight))
		Expect(joined.Stop()).To(Succeed(), "%s's exit status after SIGTERM", joined.name)
		stopped := time.Now()

		By("every event delivered once, well before a lease of the stopped replica could have expired")
		// A claim is leased for the longest attemptTimeout (5s) plus 15s:
		// a delivery the stopped replica kept would wait that long. The
		// attempts it had in progress finished within its shutdown grace
		// (10s) and were recorded; nothing was cut, so nothing is resent.
		Eventually(func(g Gomega) {
			byID, _ := slow.Counts()
			g.Expect(notReceived(byID, ids)).To(BeEmpty(), "events the receiver did not get")
		}).WithTimeout(10 * time.Second).Should(Succeed())
		drained := time.Since(stopped)

		cut := slow.cutIDs()
		byID, total := slow.Counts()
		AddReportEntry("stopped under load", fmt.Sprintf("%d attempts cut by the stop, %d requests for %d events, the rest delivered %v after the exit",
			len(cut), total, n, drained.Round(time.Millisecond)))
		Expect(cut).To(BeEmpty(), "attempts %s cut short by the stop instead of finishing", joined.name)
		Expect(receivedMoreThanOnce(byID)).To(BeEmpty(), "events sent more than once")
		Expect(total).To(Equal(n))

		By("the leader counting every delivery once on the status")
		suite.MustKubectl("wait", "-n", ns, "webhookendpoint/shipments", "--timeout=30s",
			fmt.Sprintf("--for=jsonpath={.status.deliveries.delivered}=%d", n))
	})
})

// whoLeads waits until exactly one running manager reports that it holds
// the Lease, and returns it and another running one (nil when it runs
// alone).
func whoLeads() (leader, follower *replica) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		leader, follower = nil, nil
		var leading []string
		for _, r := range replicas {
			if r.Exited() {
				continue
			}
			if r.leads(g) {
				leader = r
				leading = append(leading, r.name)
			} else {
				follower = r
			}
		}
		g.Expect(leading).To(HaveLen(1), "managers whose %s is 1", leaderSeries)
	}).Should(Succeed())
	return leader, follower
}

// publishMany publishes n events of type typ through r's API, 8 at a time,
// under the Idempotency-Keys prefix-0 to prefix-(n-1), each with one
// delivery to endpoint, and returns their ids. It does not assert, so that
// goroutines may call it.
func publishMany(r *replica, ns, prefix, typ, endpoint string, n int) ([]string, error) {
	ids := make([]string, n)
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			p, err := r.api.publish(ns, fmt.Sprintf("%s-%d", prefix, i),
				fmt.Sprintf(`{"type":%q,"data":{"n":%d,"via":%q}}`, typ, i, r.name), endpoint)
			ids[i] = p.ID
			if err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			return nil
		})
	}
	return ids, g.Wait()
}

// notReceived lists the ids a receiver got no request for.
func notReceived(byID map[string]int, ids []string) []string {
	var out []string
	for _, id := range ids {
		if byID[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// receivedMoreThanOnce lists the ids a receiver got several requests for,
// with their count.
func receivedMoreThanOnce(byID map[string]int) []string {
	var out []string
	for id, n := range byID {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s x%d", id, n))
		}
	}
	return out
}
