package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxEvents bounds the events of one load run (the tracker's tables).
const maxEvents = 4 << 20

// tracker is the receiver of the cost steps: it answers 204 and records,
// for event n (the "n" in its data), when it first arrived. Together with
// the load client's send and answer times this splits an event's
// publish-to-receipt latency into publish (send → 201) and delivery
// (201 → receipt).
type tracker struct {
	srv      *http.Server
	url      string
	received []atomic.Int64 // unix nanos of event n's first receipt
	unique   atomic.Int64
	last     atomic.Int64
}

func startTracker() (*tracker, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &tracker{url: "http://" + ln.Addr().String() + "/hook", received: make([]atomic.Int64, maxEvents)}
	t.srv = &http.Server{Handler: http.HandlerFunc(t.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

var nField = []byte(`"n":`)

func (t *tracker) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	now := time.Now().UnixNano()
	if i := bytes.Index(body, nField); i >= 0 {
		rest := body[i+len(nField):]
		if j := bytes.IndexAny(rest, ",}"); j > 0 {
			if n, err := strconv.Atoi(string(rest[:j])); err == nil && n >= 0 && n < maxEvents {
				if t.received[n].CompareAndSwap(0, now) {
					t.unique.Add(1)
					t.last.Store(now)
				}
			}
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (t *tracker) reset(n int) {
	for i := range min(n, maxEvents) {
		t.received[i].Store(0)
	}
	t.unique.Store(0)
	t.last.Store(0)
}

func (t *tracker) close() { _ = t.srv.Close() }

func (t *tracker) waitUnique(n int64, timeout time.Duration) error {
	return waitCount(&t.unique, n, timeout)
}

// target is where the load client publishes: the engine's API or the relay.
type target struct {
	url   string
	token string
	// spread, when set, replaces url: event n goes to spread[n % len],
	// so that the publishes take turns over several replicas.
	spread []string
}

// load is one run of the load client: event n was due to be sent at
// due[n] (paced runs; the actual send for closed-loop runs), and answered
// at answered[n].
type load struct {
	start, end time.Time
	due        []int64
	answered   []int64
	accepted   int
	failed     atomic.Int64
	firstErr   atomic.Value
}

func publishBody(n int) string {
	return `{"type":"order.created","data":{"n":` + strconv.Itoa(n) + `,"pad":"` + payload + `"}}`
}

func newLoadClient(conns int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns},
		Timeout:   30 * time.Second,
	}
}

// publish sends event n with a unique Idempotency-Key; run tags the keys
// so that runs against one ledger never collide.
func (l *load) publish(client *http.Client, tg target, run string, n int) {
	url := tg.url
	if len(tg.spread) > 0 {
		url = tg.spread[n%len(tg.spread)]
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(publishBody(n)))
	req.Header.Set("Authorization", "Bearer "+tg.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", run+"-"+strconv.Itoa(n))
	resp, err := client.Do(req)
	if err != nil {
		l.failed.Add(1)
		l.firstErr.CompareAndSwap(nil, err.Error())
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		l.failed.Add(1)
		l.firstErr.CompareAndSwap(nil, resp.Status)
		return
	}
	l.answered[n] = time.Now().UnixNano()
}

// saturate publishes closed-loop from conns connections for d: each sends
// its next event as soon as the last one is answered.
func saturate(tg target, run string, conns int, d time.Duration) *load {
	l := &load{due: make([]int64, maxEvents), answered: make([]int64, maxEvents)}
	client := newLoadClient(conns)
	var next atomic.Int64
	l.start = time.Now()
	deadline := l.start.Add(d)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				n := int(next.Add(1) - 1)
				if n >= maxEvents {
					return
				}
				l.due[n] = time.Now().UnixNano()
				l.publish(client, tg, run, n)
			}
		}()
	}
	wg.Wait()
	l.end = time.Now()
	l.accepted = int(next.Load()) - int(l.failed.Load())
	l.trim(int(next.Load()))
	return l
}

// paced publishes open-loop at rate events/s for d: event n is due at
// start + n/rate whatever the answers to the earlier ones, and its
// latencies are measured from that due time, so that a stall shows in
// them instead of slowing the sender down.
func paced(tg target, run string, rate int, d time.Duration) *load {
	total := int(float64(rate) * d.Seconds())
	l := &load{due: make([]int64, total), answered: make([]int64, total)}
	// Latencies count from the due time, so a stall shows in them whatever
	// the workers; more than the API's unproven connections per source
	// (httpapi.DefaultMaxUnprovenConnectionsPerSource) would have a stall's
	// burst of new connections evict each other, failing publishes.
	const workers = 128
	client := newLoadClient(workers)
	work := make(chan int, total)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				l.publish(client, tg, run, n)
			}
		}()
	}
	l.start = time.Now()
	interval := time.Second / time.Duration(rate)
	for n := range total {
		due := l.start.Add(time.Duration(n) * interval)
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		l.due[n] = due.UnixNano()
		work <- n
	}
	close(work)
	wg.Wait()
	l.end = time.Now()
	l.accepted = total - int(l.failed.Load())
	return l
}

func (l *load) trim(n int) {
	l.due, l.answered = l.due[:n], l.answered[:n]
}

func (l *load) err() error {
	if f := l.failed.Load(); f > 0 {
		return fmt.Errorf("%d publishes failed (first: %v)", f, l.firstErr.Load())
	}
	return nil
}

// latencies of the events of one run: publish (due → answered), delivery
// (answered → received) and end to end (due → received).
type latencies struct {
	publish, delivery, total dist
}

type dist struct{ p50, p99, max time.Duration }

func (d dist) String() string {
	return fmt.Sprintf("p50 %s, p99 %s, max %s", round(d.p50), round(d.p99), round(d.max))
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

func distOf(xs []time.Duration) dist {
	if len(xs) == 0 {
		return dist{}
	}
	slices.Sort(xs)
	return dist{p50: xs[len(xs)/2], p99: xs[len(xs)*99/100], max: xs[len(xs)-1]}
}

func (l *load) latencies(t *tracker) latencies {
	var pub, del, tot []time.Duration
	l.receipts(t, func(_ int, due, answered, received int64) {
		pub = append(pub, time.Duration(answered-due))
		del = append(del, time.Duration(received-answered))
		tot = append(tot, time.Duration(received-due))
	})
	return latencies{publish: distOf(pub), delivery: distOf(del), total: distOf(tot)}
}

// writeTimeline writes one line per event to path: when it was due
// (since the run's start), its publish and its publish-to-receipt latency,
// in microseconds; a tail's events can then be placed in time (a stall
// of everything, or events spread over the run).
func (l *load) writeTimeline(path string, t *tracker) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# start %s\nn\tdue_us\tpublish_us\ttotal_us\n", l.start.UTC().Format(time.RFC3339Nano))
	l.receipts(t, func(n int, due, answered, received int64) {
		fmt.Fprintf(&b, "%d\t%d\t%d\t%d\n", n, (due-l.start.UnixNano())/1e3, (answered-due)/1e3, (received-due)/1e3)
	})
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("latency timeline: %w", err)
	}
	return nil
}

// receipts calls fn for each event of the run that was answered and
// received, with its due, answer and receipt times (unix nanos).
func (l *load) receipts(t *tracker, fn func(n int, due, answered, received int64)) {
	for n := range l.due {
		a, r := l.answered[n], t.received[n].Load()
		if a == 0 || r == 0 {
			continue
		}
		fn(n, l.due[n], a, r)
	}
}
