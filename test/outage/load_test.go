package outage

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/test/apicall"
	"github.com/hookkeeper/hookkeeper/test/receivers"
)

// publishTimeout is a publisher's client timeout: a publish that does not
// answer within it counts as failed (status 0) with this latency. It is
// longer than the manager's longest review of a token (kubeauth's
// DefaultReviewTimeout, 10s), so that a publish answered from the outage
// grace after a review that timed out shows as the 201 it is.
const publishTimeout = 15 * time.Second

// eventType is the type every event of the suite has; no WebhookEventType
// declares it.
const eventType = "outage.test"

// ---- publishers ----

// publisher publishes events to one namespace through one manager's HTTP
// API with one bearer token, open loop: at a fixed rate, each publish in a
// goroutine of its own, so that slow answers do not slow the load down.
type publisher struct {
	name   string // also the prefix of its Idempotency-Keys
	ns     string
	base   string // the manager's API
	token  string
	client *http.Client
	seq    atomic.Int64

	mu      sync.Mutex
	results []publishResult
}

// publishResult is one publish as the publisher saw it.
type publishResult struct {
	start   time.Time
	latency time.Duration
	status  int    // 0: no answer (refused, reset, timed out)
	err     string // the transport error, or the body of a non-201 answer
	eventID string // the accepted event's id, with 201
}

func newPublisher(name, ns, base, token string) *publisher {
	return &publisher{name: name, ns: ns, base: base, token: token, client: &http.Client{
		Timeout:   publishTimeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second},
	}}
}

// publishOne publishes one event and records the outcome.
func (p *publisher) publishOne() publishResult {
	n := p.seq.Add(1)
	body := fmt.Sprintf(`{"type":%q,"data":{"publisher":%q,"n":%d}}`, eventType, p.name, n)
	r := publishResult{start: time.Now()}
	status, data, err := apicall.Do(p.client, p.base, p.token, http.MethodPost, "/v1/namespaces/"+p.ns+"/events", body, fmt.Sprintf("%s-%d", p.name, n))
	r.latency = time.Since(r.start)
	r.status = status
	switch {
	case err != nil:
		r.status, r.err = 0, err.Error()
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
	p.mu.Lock()
	p.results = append(p.results, r)
	p.mu.Unlock()
	return r
}

// waitAccepting publishes until one publish is accepted (201): the
// manager's API is up, and a TokenReview publisher's token has been
// reviewed and authorized. That event counts as any other.
func (p *publisher) waitAccepting(within time.Duration) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		r := p.publishOne()
		g.Expect(r.status).To(Equal(http.StatusCreated), "%s: %s", p.name, r.err)
		g.Expect(r.eventID).NotTo(BeEmpty(), "%s: %s", p.name, r.err)
	}).WithTimeout(within).WithPolling(250 * time.Millisecond).Should(Succeed())
}

// run publishes perSecond events a second until ctx is done; the returned
// channel is closed once every publish it started has answered or timed
// out.
func (p *publisher) run(ctx context.Context, perSecond int) <-chan struct{} {
	return atRate(ctx, perSecond, func() { p.publishOne() })
}

// atRate calls one perSecond times a second, each call in its own
// goroutine (an open loop: a slow answer does not slow the rate), until
// ctx is done; the returned channel is closed once every call returned.
func atRate(ctx context.Context, perSecond int, one func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		var wg sync.WaitGroup
		defer wg.Wait()
		t := time.NewTicker(time.Second / time.Duration(perSecond))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				wg.Go(one)
			}
		}
	}()
	return done
}

// between returns the results of the publishes started in [from, to).
func (p *publisher) between(from, to time.Time) []publishResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []publishResult
	for _, r := range p.results {
		if !r.start.Before(from) && r.start.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

// accepted returns the ids of every event accepted (201) so far.
func (p *publisher) accepted() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, r := range p.results {
		if r.eventID != "" {
			out = append(out, r.eventID)
		}
	}
	return out
}

// p99 is the 99th percentile (nearest rank) of the publishes' latencies.
func p99(rs []publishResult) time.Duration {
	if len(rs) == 0 {
		return 0
	}
	ls := make([]time.Duration, len(rs))
	for i, r := range rs {
		ls[i] = r.latency
	}
	slices.Sort(ls)
	rank := (99*len(ls) + 99) / 100 // ceil(0.99 n), 1-based
	return ls[rank-1]
}

// statusCounts sums the publishes by status ("0" for no answer), in a
// stable order, e.g. "201:2950 500:139".
func statusCounts(rs []publishResult) string {
	by := map[int]int{}
	for _, r := range rs {
		by[r.status]++
	}
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%d:%d", s, by[s]))
	}
	return strings.Join(parts, " ")
}

// failures returns the publishes not answered 201, and a sample of their
// errors (the first of each distinct status and message start).
func failures(rs []publishResult) (n int, sample []string) {
	seen := map[string]bool{}
	for _, r := range rs {
		if r.status == http.StatusCreated && r.eventID != "" {
			continue
		}
		n++
		msg := r.err
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		key := fmt.Sprintf("%d %.60s", r.status, msg)
		if !seen[key] && len(sample) < 5 {
			seen[key] = true
			sample = append(sample, fmt.Sprintf("%s status %d after %v: %s", stamp(r.start), r.status, r.latency.Round(time.Millisecond), msg))
		}
	}
	return n, sample
}

// ---- receivers ----

// receiver is a real HTTP receiver on loopback (test/receivers) that
// answers every request with its current status; it records when each
// request arrived, and so when each webhook-id (the event id, stable
// across retries) was first answered with a 2xx.
type receiver struct {
	*receivers.Receiver
	name   string
	status atomic.Int32
}

func newReceiver(name string, status int) *receiver {
	r := &receiver{name: name}
	r.status.Store(int32(status))
	r.Receiver = receivers.New(receivers.Options{Respond: func(*http.Request, *receivers.Request) int { return int(r.status.Load()) }})
	DeferCleanup(r.Close)
	specReceivers = append(specReceivers, r)
	return r
}

func (r *receiver) URL() string { return r.Receiver.URL() + "/hooks" }

// answer sets the status of the requests from now on.
func (r *receiver) answer(status int) { r.status.Store(int32(status)) }

// missing returns the ids not answered with a 2xx yet.
func (r *receiver) missing(ids []string) []string {
	delivered := r.FirstAnswered2xx()
	var out []string
	for _, id := range ids {
		if _, ok := delivered[id]; !ok {
			out = append(out, id)
		}
	}
	return out
}

// unattempted returns the ids without any request yet.
func (r *receiver) unattempted(ids []string) []string {
	var out []string
	for _, id := range ids {
		if r.Count(id) == 0 {
			out = append(out, id)
		}
	}
	return out
}

// lastDelivered is when the last of ids was first answered with a 2xx;
// false while one of them was not.
func (r *receiver) lastDelivered(ids []string) (time.Time, bool) {
	delivered := r.FirstAnswered2xx()
	var last time.Time
	for _, id := range ids {
		t, ok := delivered[id]
		if !ok {
			return time.Time{}, false
		}
		if t.After(last) {
			last = t
		}
	}
	return last, true
}

// deliveredCount is how many distinct webhook-ids were answered with a 2xx.
func (r *receiver) deliveredCount() int { return len(r.FirstAnswered2xx()) }

// arrivals are the times every request arrived, in order.
func (r *receiver) arrivals() []time.Time {
	var ts []time.Time
	for _, rc := range r.Requests() {
		ts = append(ts, rc.At)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	return ts
}

// receiptsBetween counts the requests that arrived in [from, to).
func (r *receiver) receiptsBetween(from, to time.Time) int {
	n := 0
	for _, t := range r.arrivals() {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

// maxGap is the longest time in [from, to] without a request arriving,
// counting from from to the first arrival and from the last to to; it
// returns the gap and where it began.
func (r *receiver) maxGap(from, to time.Time) (time.Duration, time.Time) {
	prev, gap, at := from, time.Duration(0), from
	for _, t := range r.arrivals() {
		if t.Before(from) {
			continue
		}
		if t.After(to) {
			break
		}
		if d := t.Sub(prev); d > gap {
			gap, at = d, prev
		}
		prev = t
	}
	if d := to.Sub(prev); d > gap {
		gap, at = d, prev
	}
	return gap, at
}

func (r *receiver) String() string {
	byID, total := r.Counts()
	more := r.Repeated()
	if len(more) > 20 {
		more = append(more[:20], fmt.Sprintf("... %d more", len(more)-20))
	}
	return fmt.Sprintf("answers %d now; %d requests for %d webhook-ids, %d answered 2xx; more than once: %v",
		r.status.Load(), total, len(byID), r.deliveredCount(), more)
}

// ---- soft checks ----

// verdict collects the checks of a scenario that failed, so that one run
// reports every figure and every broken promise rather than the first.
type verdict struct {
	problems []string
	g        Gomega // an Eventually of g that fails adds a problem
}

func newVerdict() *verdict {
	v := &verdict{}
	v.g = NewGomega(func(message string, _ ...int) { v.problems = append(v.problems, message) })
	return v
}

func (v *verdict) addf(format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

// check fails the spec with every problem found.
func (v *verdict) check(what string) {
	GinkgoHelper()
	if len(v.problems) > 0 {
		Fail(fmt.Sprintf("%s: %d checks failed:\n- %s", what, len(v.problems), strings.Join(v.problems, "\n- ")))
	}
}
