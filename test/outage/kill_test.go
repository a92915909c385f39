package outage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/test/apicall"
	"github.com/hookkeeper/hookkeeper/test/fixtures"
	"github.com/hookkeeper/hookkeeper/test/procsuite"
)

// The kill mode (scenario D): a replica SIGKILLed during the outage and
// started again on the same flags while the API server is still stopped.
const (
	// killAfter is how far into the outage the replica is killed: past
	// the renew deadline of a leader, so that the control plane of every
	// replica has stopped by then.
	killAfter = 20 * time.Second
	// restartAfter is how long after the kill it is started again, as a
	// kubelet restarts a container (the API server is not needed for that).
	restartAfter = 5 * time.Second
)

// leaderElectionSeries is controller-runtime's gauge for the manager's
// Lease: 1 while this process holds it.
const leaderElectionSeries = `leader_election_master_status{name="controller-leader.hookkeeper.dev"}`

// servedBy is which replica answered one publish of a failoverPublisher.
type servedBy struct {
	start, answered time.Time
	replica         int // the replica that answered last, or was tried last
	status          int // 0: no answer
	// failover is the connection error of the first replica tried when
	// the publish went to the other; empty when it did not.
	failover string
}

// failoverPublisher publishes to replicas in turn, as a Service spreads
// connections over a Deployment's pods; a publish whose replica cannot be
// reached (connection refused, reset or closed: the process is down) goes
// to the other at once with the same body and Idempotency-Key, as a
// Service routes around a dead pod, and counts as a failover, not a
// failure. Its results (the embedded publisher's) are the publishes as
// the caller saw them.
type failoverPublisher struct {
	*publisher
	bases []string // the replicas' APIs
	names []string // the replicas' names, for the report
	next  atomic.Int64

	smu    sync.Mutex
	served []servedBy
}

// newFailoverPublisher publishes to replicas' APIs; a replica started
// again on the same flags listens where its predecessor did.
func newFailoverPublisher(name, ns, token string, replicas ...*manager) *failoverPublisher {
	p := &failoverPublisher{}
	for _, m := range replicas {
		p.bases = append(p.bases, m.apiBase)
		p.names = append(p.names, m.name)
	}
	p.publisher = newPublisher(name, ns, p.bases[0], token)
	return p
}

// connectionError reports whether err says the replica could not be
// reached or went away mid-request (its process is down), as opposed to
// a replica that answered, or timed out.
func connectionError(err error) bool {
	var timeout interface{ Timeout() bool }
	if errors.As(err, &timeout) && timeout.Timeout() {
		return false
	}
	for _, target := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE, io.EOF, io.ErrUnexpectedEOF} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// publishOne publishes one event, failing over once on a connection
// error, and records the outcome.
func (p *failoverPublisher) publishOne() publishResult {
	n := p.seq.Add(1)
	body := fmt.Sprintf(`{"type":%q,"data":{"publisher":%q,"n":%d}}`, eventType, p.name, n)
	key := fmt.Sprintf("%s-%d", p.name, n)
	r := publishResult{start: time.Now()}
	s := servedBy{start: r.start, replica: int(p.next.Add(1)-1) % len(p.bases)}
	status, data, err := apicall.Do(p.client, p.bases[s.replica], p.token, http.MethodPost, "/v1/namespaces/"+p.ns+"/events", body, key)
	if err != nil && connectionError(err) {
		s.failover = err.Error()
		s.replica = (s.replica + 1) % len(p.bases)
		status, data, err = apicall.Do(p.client, p.bases[s.replica], p.token, http.MethodPost, "/v1/namespaces/"+p.ns+"/events", body, key)
	}
	s.answered = time.Now()
	r.latency = s.answered.Sub(r.start)
	r.status = status
	switch {
	case err != nil:
		r.status, r.err = 0, err.Error()
		if s.failover != "" {
			r.err += " (after a failover from " + s.failover + ")"
		}
	case status == http.StatusCreated:
		var a struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(data, &a); err != nil || a.ID == "" {
			r.err = fmt.Sprintf("201 without an event id: %s", data)
		} else {
			r.eventID = a.ID
		}
	default:
		r.err = strings.TrimSpace(string(data))
	}
	s.status = r.status
	p.mu.Lock()
	p.results = append(p.results, r)
	p.mu.Unlock()
	p.smu.Lock()
	p.served = append(p.served, s)
	p.smu.Unlock()
	return r
}

// run publishes perSecond events a second until ctx is done (as
// publisher.run, with failover); the returned channel is closed once
// every publish it started has answered or timed out.
func (p *failoverPublisher) run(ctx context.Context, perSecond int) <-chan struct{} {
	return atRate(ctx, perSecond, func() { p.publishOne() })
}

// failovers returns the publishes that went to the other replica, and a
// sample of the connection errors that sent them there.
func (p *failoverPublisher) failovers() (n int, sample []string) {
	p.smu.Lock()
	defer p.smu.Unlock()
	seen := map[string]bool{}
	for _, s := range p.served {
		if s.failover == "" {
			continue
		}
		n++
		key := fmt.Sprintf("%d %.50s", s.replica, s.failover)
		if !seen[key] && len(sample) < 4 {
			seen[key] = true
			sample = append(sample, fmt.Sprintf("%s to %s: %s", stamp(s.start), p.names[s.replica], s.failover))
		}
	}
	return n, sample
}

// firstCreatedBy is when replica first answered 201 to a publish started
// at or after since; false when it has not.
func (p *failoverPublisher) firstCreatedBy(replica int, since time.Time) (time.Time, bool) {
	p.smu.Lock()
	defer p.smu.Unlock()
	var first time.Time
	for _, s := range p.served {
		if s.replica != replica || s.status != http.StatusCreated || s.start.Before(since) {
			continue
		}
		if first.IsZero() || s.answered.Before(first) {
			first = s.answered
		}
	}
	return first, !first.IsZero()
}

// answeredBy counts the publishes started in [from, to) that replica
// answered 201.
func (p *failoverPublisher) answeredBy(replica int, from, to time.Time) int {
	p.smu.Lock()
	defer p.smu.Unlock()
	n := 0
	for _, s := range p.served {
		if s.replica == replica && s.status == http.StatusCreated && !s.start.Before(from) && s.start.Before(to) {
			n++
		}
	}
	return n
}

var _ = Describe("D: the kill mode: a replica SIGKILLed and restarted during the outage", Ordered, func() {
	var (
		t        *target
		replicas []*manager
		pub      *failoverPublisher
	)

	BeforeAll(func() {
		beginScenario()
		// The ledger first: without PostgreSQL, fail before starting
		// anything.
		ledger := procsuite.PostgresLedger()
		t = &target{ns: "outage-d", endpoint: "hooks", recv: newReceiver("outage-d", http.StatusNoContent)}
		suite.Apply(fixtures.Namespace(t.ns))
		// Two pods of a Deployment: --instance is each one's pod UID, which
		// a container restarted in the pod keeps.
		for _, name := range []string{"d-1", "d-2"} {
			replicas = append(replicas, startManager(managerConfig{name: name, ledger: ledger, namespace: t.ns, auth: authTokenFile, instance: "outage-d-" + name}))
		}
		for _, m := range replicas {
			m.waitReady(suite.APIToken)
		}
		setUpEndpoint(t.ns, t.endpoint, t.recv, 20)
		pub = newFailoverPublisher("token-file", t.ns, suite.APIToken, replicas...)
	})

	It("loses nothing and answers every publish 201 (after failover) while a replica is SIGKILLed 20s into a 60s API server outage and restarted 5s later; the restarted one publishes and delivers before the outage ends; the survivor never exits; status right within 30s", func() {
		const name = "D (kill mode: two replicas on PostgreSQL, one SIGKILLed and restarted during the outage)"

		By("the publisher getting a first 201 from each replica")
		Eventually(func(g Gomega) {
			r := pub.publishOne()
			g.Expect(r.status).To(Equal(http.StatusCreated), "%s: %s", pub.name, r.err)
			for i, m := range replicas {
				g.Expect(pub.answeredBy(i, time.Time{}, time.Now())).To(BeNumerically(">", 0), "%s answered a first publish", m.name)
			}
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		By(fmt.Sprintf("publishing %d events/s to the replicas in turn for a %v warm-up", eventsPerSecond, warmUp))
		ctx, cancel := context.WithCancel(context.Background())
		var load <-chan struct{}
		stopLoad := func() {
			cancel()
			if load != nil {
				<-load
			}
		}
		DeferCleanup(stopLoad)
		loadStart := time.Now()
		load = pub.run(ctx, eventsPerSecond)
		Consistently(func(g Gomega) {
			for _, m := range replicas {
				g.Expect(m.Exited()).To(BeFalse(), "%s exited during the warm-up: %v", m.name, m.Err)
			}
		}).WithTimeout(warmUp).WithPolling(250 * time.Millisecond).Should(Succeed())

		warmEnd := time.Now()
		rs := pub.between(loadStart, warmEnd)
		n, sample := failures(rs)
		Expect(n).To(BeZero(), "before the outage: %s\n%s", statusCounts(rs), strings.Join(sample, "\n"))
		Expect(len(rs)).To(BeNumerically(">=", int(0.8*eventsPerSecond*warmUp.Seconds())), "the publisher kept its rate")
		for i := range replicas {
			Expect(pub.answeredBy(i, loadStart, warmEnd)).To(BeNumerically(">", len(rs)/4), "replica %s answered its share of the warm-up", replicas[i].name)
		}
		var warmIDs []string
		for _, r := range pub.between(time.Time{}, warmEnd.Add(-2*time.Second)) {
			if r.eventID != "" {
				warmIDs = append(warmIDs, r.eventID)
			}
		}
		Eventually(func() []string { return t.recv.missing(warmIDs) }).WithTimeout(10*time.Second).
			Should(BeEmpty(), "the receiver got the events accepted during the warm-up")

		// The replica to kill: the Lease holder (controller-runtime's
		// gauge says which process holds it), else the first.
		victimIdx, leader := 0, "unknown (neither replica's gauge says 1): the first is killed"
		for i, m := range replicas {
			if v, err := m.metric(leaderElectionSeries); err == nil && v == 1 {
				victimIdx, leader = i, m.name
				break
			}
		}
		victim, survivor := replicas[victimIdx], replicas[1-victimIdx]
		GinkgoWriter.Printf("Lease holder before the outage: %s; %s is the one killed\n", leader, victim.name)

		By(fmt.Sprintf("stopping kube-apiserver for %v under the load", outageLength))
		survivorBefore, err := survivor.metric(deliveredSeries)
		Expect(err).NotTo(HaveOccurred(), "%s's metrics before the outage", survivor.name)
		outageStart := apiserver.stop()
		DeferCleanup(apiserver.resume)
		v := newVerdict()

		Consistently(apiserver.isStopped).WithTimeout(killAfter-time.Since(outageStart)).WithPolling(250*time.Millisecond).
			Should(BeTrue(), "kube-apiserver stays stopped for the outage")
		By(fmt.Sprintf("SIGKILL to %s, %v into the outage", victim.name, killAfter))
		killedAt := time.Now()
		Expect(victim.Cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		Eventually(victim.Exited).WithTimeout(5*time.Second).Should(BeTrue(), "%s gone after SIGKILL", victim.name)
		GinkgoWriter.Printf("%s %s killed (SIGKILL), %.1fs into the outage: %v\n", stamp(killedAt), victim.name, killedAt.Sub(outageStart).Seconds(), victim.Err)

		Consistently(apiserver.isStopped).WithTimeout(restartAfter-time.Since(killedAt)).WithPolling(250*time.Millisecond).
			Should(BeTrue(), "kube-apiserver stays stopped for the outage")
		By(fmt.Sprintf("starting %s again on the same flags %v after the kill, the API server still stopped", victim.name, restartAfter))
		restarted := startManager(victim.restartConfig(victim.name + "-restarted"))
		var firstDelivery time.Time
		v.g.Eventually(func(g Gomega) {
			if restarted.Exited() {
				StopTrying(fmt.Sprintf("%s exited %.1fs after it started: %v", restarted.name, restarted.ExitedAt.Sub(restarted.Started).Seconds(), restarted.Err)).Now()
			}
			if !apiserver.isStopped() {
				StopTrying("kube-apiserver no longer stopped").Now()
			}
			d, err := restarted.metric(deliveredSeries)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d).To(BeNumerically(">", 0), "%s of %s", deliveredSeries, restarted.name)
			firstDelivery = time.Now()
		}).WithTimeout(max(time.Until(outageStart.Add(outageLength)), time.Second)).WithPolling(100*time.Millisecond).
			Should(Succeed(), "%s, started again during the outage, delivers before it ends", restarted.name)

		if rest := outageLength - time.Since(outageStart); rest > 0 {
			Consistently(apiserver.isStopped).WithTimeout(rest).WithPolling(500*time.Millisecond).
				Should(BeTrue(), "kube-apiserver stays stopped for the outage")
		}
		survivorDelivered, restartedDelivered := "unreadable", "unreadable"
		if after, err := survivor.metric(deliveredSeries); err != nil {
			v.addf("%s's metrics at the end of the outage: %v", survivor.name, err)
		} else {
			survivorDelivered = fmt.Sprint(after - survivorBefore)
			if after <= survivorBefore {
				v.addf("%s delivered nothing during the outage (%s %v then %v)", survivor.name, deliveredSeries, survivorBefore, after)
			}
		}
		if after, err := restarted.metric(deliveredSeries); err != nil {
			v.addf("%s's metrics at the end of the outage: %v", restarted.name, err)
		} else {
			restartedDelivered = fmt.Sprint(after)
		}
		outageEnd := apiserver.resume()
		apiserver.waitAnswering()
		By("the API server answers again; the load stops")
		stopLoad()
		loadEnd := time.Now()

		By("every accepted event reaching the receiver, and the endpoint's status catching up")
		t.managers = []*manager{survivor, restarted}
		accepted := pub.accepted()
		v.g.Eventually(func(g Gomega) {
			if allExited(t.managers) {
				StopTrying(fmt.Sprintf("no manager of %s runs: %d accepted events can no longer reach the receiver", t.ns, len(t.recv.missing(accepted)))).Now()
			}
			g.Expect(t.recv.missing(accepted)).To(BeEmpty(), "accepted events of %s not delivered", t.ns)
		}).WithTimeout(catchUpWithin).WithPolling(250 * time.Millisecond).Should(Succeed())
		lost := len(t.recv.missing(accepted))
		if lost > 0 {
			v.addf("%s: %d of %d accepted events lost (never reached the receiver; %d of them never attempted)", t.ns, lost, len(accepted), len(t.recv.unattempted(t.recv.missing(accepted))))
		}
		checkStatus(v, t, outageEnd.Add(statusWithin))

		// The figures, then the verdict.
		var report strings.Builder
		fmt.Fprintf(&report, "load %s to %s; outage (SIGSTOP to kube-apiserver) %s to %s (%v)\n",
			stamp(loadStart), stamp(loadEnd), stamp(outageStart), stamp(outageEnd), outageEnd.Sub(outageStart).Round(time.Millisecond))
		fmt.Fprintf(&report, "Lease holder before the outage: %s; %s SIGKILLed at %s (%.1fs into the outage), started again at %s (%.1fs after the kill)\n",
			leader, victim.name, stamp(killedAt), killedAt.Sub(outageStart).Seconds(), stamp(restarted.Started), restarted.Started.Sub(killedAt).Seconds())
		beforeRs, duringRs, all := pub.between(loadStart.Add(settle), outageStart), pub.between(outageStart, outageEnd), pub.between(loadStart, loadEnd)
		p99Before, p99During := p99(beforeRs), p99(duringRs)
		nFailovers, failoverSample := pub.failovers()
		fmt.Fprintf(&report, "publisher %s: p99 before %v (%d publishes), during %v (%d publishes: %s); after: %s; failovers %d\n",
			pub.name, p99Before.Round(time.Microsecond), len(beforeRs), p99During.Round(time.Microsecond), len(duringRs), statusCounts(duringRs),
			statusCounts(pub.between(outageEnd, loadEnd)), nFailovers)
		for _, s := range failoverSample {
			fmt.Fprintf(&report, "  failover %s\n", s)
		}
		if n, sample := failures(all); n > 0 {
			v.addf("publisher %s: %d of %d publishes not answered 201 after failover (%s during the outage); first ones:\n    %s", pub.name, n, len(all), statusCounts(duringRs), strings.Join(sample, "\n    "))
		}
		first201, ok := pub.firstCreatedBy(victimIdx, restarted.Started)
		switch {
		case !ok || !first201.Before(outageEnd):
			v.addf("%s answered no publish 201 during the outage (it answered %d after it)", restarted.name, pub.answeredBy(victimIdx, outageEnd, loadEnd))
			fmt.Fprintf(&report, "%s: first 201 never during the outage\n", restarted.name)
		default:
			fmt.Fprintf(&report, "%s: first 201 %.1fs after the kill (%.1fs after its start); %d publishes answered 201 during the outage\n",
				restarted.name, first201.Sub(killedAt).Seconds(), first201.Sub(restarted.Started).Seconds(), pub.answeredBy(victimIdx, restarted.Started, outageEnd))
		}
		if firstDelivery.IsZero() {
			fmt.Fprintf(&report, "%s: first delivery never during the outage\n", restarted.name)
		} else {
			fmt.Fprintf(&report, "%s: first delivery %.1fs after the kill (%.1fs after its start; seen in its metrics, polled every 100ms)\n",
				restarted.name, firstDelivery.Sub(killedAt).Seconds(), firstDelivery.Sub(restarted.Started).Seconds())
		}
		gap, at := t.recv.maxGap(outageStart, outageEnd)
		fmt.Fprintf(&report, "receiver of %s: %d requests during the outage, longest without one %v (from %s); %d delivered in all; lost %d\n",
			t.ns, t.recv.receiptsBetween(outageStart, outageEnd), gap.Round(time.Millisecond), stamp(at), t.recv.deliveredCount(), lost)
		if gap > maxReceiptGap {
			v.addf("receiver of %s: %v without a request from %s (%.1fs into the outage), over %v", t.ns, gap.Round(time.Millisecond), stamp(at), at.Sub(outageStart).Seconds(), maxReceiptGap)
		}
		for _, m := range []*manager{survivor, restarted} {
			state := "running"
			if m.Exited() {
				state = fmt.Sprintf("exited at %s (%.1fs into the outage): %v", stamp(m.ExitedAt), m.ExitedAt.Sub(outageStart).Seconds(), m.Err)
			}
			delivered := survivorDelivered
			if m == restarted {
				delivered = restartedDelivered
			}
			fmt.Fprintf(&report, "manager %s: %s; delivered during the outage: %s\n", m.name, state, delivered)
			for _, p := range m.exitProblems(outageStart) {
				v.addf("%s", p)
			}
		}
		AddReportEntry(name+": figures", report.String())
		GinkgoWriter.Print(report.String())
		v.check(name)
	})
})
