package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// The limits step (issue #43, ADR 0047): three engine processes
// (enginehost) on one PostgreSQL schema, one endpoint with
// `rateLimit: {perSecond: 100}` (burst: the default, 1) and a small
// maxInFlight, 1,000 events/s offered, their publishes taking turns over
// the replicas. A loopback receiver holds each request a while (a slow
// receiver), records when each arrived and counts the requests it holds at
// once. Issue #43's acceptance: at most perSecond + burst (101) requests
// in every one-second window, and never more than maxInFlight at once.
// The same with each replica holding the limits on its own (enginehost
// --shared-limits=false, as before ADR 0047) shows what sharing them fixed.
// The publishing stops after the run's time and so do the replicas: the
// backlog (900/s offered beyond the rate) is reported, not drained.

// limitsHeading starts the step's section of docs/benchmarks.md.
const limitsHeading = "## Limits across three replicas (issue #43)"

const (
	limitsReplicas    = 3
	limitsPerSecond   = 100
	limitsMaxInFlight = 16
	// limitsOffered is the load offered, events/s, open-loop.
	limitsOffered = 1000
	// limitsHold is how long the receiver holds each request.
	limitsHold = 30 * time.Millisecond
)

// limitsBurst is the endpoint's burst: the default (ledger.RateBurst).
const limitsBurst = 1

// limitsReceiver answers 204 after holding each request limitsHold; it
// records every request's arrival (when its handler starts, retries and
// duplicates included) and the most requests it held at once. A request
// is counted held from its arrival until the end of the hold, before its
// answer is written: the engine's attempt spans more than that, so the
// gauge never counts more than the engine has in flight.
type limitsReceiver struct {
	srv      *http.Server
	url      string
	mu       sync.Mutex
	arrivals []int64 // unix nanos
	seen     map[string]struct{}
	inFlight atomic.Int64
	most     atomic.Int64
}

func startLimitsReceiver() (*limitsReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &limitsReceiver{url: "http://" + ln.Addr().String() + "/hook", seen: map[string]struct{}{}}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *limitsReceiver) serve(w http.ResponseWriter, req *http.Request) {
	now := time.Now().UnixNano()
	held := r.inFlight.Add(1)
	for {
		m := r.most.Load()
		if held <= m || r.most.CompareAndSwap(m, held) {
			break
		}
	}
	r.mu.Lock()
	r.arrivals = append(r.arrivals, now)
	r.seen[req.Header.Get(signing.HeaderID)] = struct{}{}
	r.mu.Unlock()
	_, _ = io.Copy(io.Discard, req.Body)
	time.Sleep(limitsHold) // the simulated slow receiver
	r.inFlight.Add(-1)
	w.WriteHeader(http.StatusNoContent)
}

func (r *limitsReceiver) close() { _ = r.srv.Close() }

// snapshot returns the arrivals so far, sorted, and the distinct
// deliveries (webhook-id) they carried.
func (r *limitsReceiver) snapshot() (arrivals []int64, unique int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	arrivals = slices.Clone(r.arrivals)
	slices.Sort(arrivals)
	return arrivals, len(r.seen)
}

// busiestWindow is the most arrivals (sorted unix nanos) within one window
// [t, t+w), over every t, and where the first such window starts. A window
// holding the most can always be slid right until it starts at an arrival,
// so windows starting at arrivals are the only ones to count.
func busiestWindow(arrivals []int64, w time.Duration) (most int, from int64) {
	j := 0
	for i, t := range arrivals {
		for j < len(arrivals) && arrivals[j] < t+int64(w) {
			j++
		}
		if j-i > most {
			most, from = j-i, t
		}
	}
	return most, from
}

// limitsRun is one run of the step.
type limitsRun struct {
	name     string
	shared   bool
	duration time.Duration
	// published events were accepted; failed publishes were not.
	published, failed int
	// requests is every request the receiver got; unique the deliveries
	// among them.
	requests, unique int
	// busiest is the most requests in one [t, t+1s); busiestAt when
	// that window starts, from the first publish.
	busiest   int
	busiestAt time.Duration
	// meanRate is requests per second from the first arrival to the last.
	meanRate float64
	// mostInFlight is the most requests the receiver held at once.
	mostInFlight int
	perReplica   []int
}

// limitsReachedPercent is the share of the rate's ceiling below which a
// run is said not to have reached the rate: its bound is then met
// trivially.
const limitsReachedPercent = 90

// limitsCeiling is the most sends a second the schedule allows in the
// long run: perSecond, its margin taken (ADR 0047).
var limitsCeiling = float64(limitsPerSecond) / (1 + ledger.RateMargin)

// reachedRate says whether the receiver got close enough to the rate's
// ceiling for the busiest window to test the rate's bound.
func (r *limitsRun) reachedRate() bool {
	return r.meanRate >= limitsCeiling*limitsReachedPercent/100
}

// backlog is what was published and not delivered when the replicas stopped.
func (r *limitsRun) backlog() int { return r.published - r.unique }

// meets says whether the run holds issue #43's acceptance.
func (r *limitsRun) meets() bool {
	return r.requests > 0 && r.busiest <= limitsPerSecond+limitsBurst && r.mostInFlight <= limitsMaxInFlight
}

type limitsResults struct {
	server string
	runs   []*limitsRun
}

// limitsEndpointsFile writes enginehost's --endpoints file: the one
// endpoint, rate-limited, to url.
func limitsEndpointsFile(url string) (string, error) {
	secret, err := signing.GenerateSecret()
	if err != nil {
		return "", err
	}
	cfg := []map[string]any{{
		"namespace": "bench", "name": "receiver", "url": url, "eventTypes": []string{"*"},
		"secret": string(secret.Reveal()), "maxInFlight": limitsMaxInFlight, "maxAttempts": 10,
		"rateLimit": map[string]int{"perSecond": limitsPerSecond},
		"delay":     "1s", "timeout": "5s",
	}}
	data, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("limits-endpoints-%d.json", time.Now().UnixNano()))
	return path, os.WriteFile(path, data, 0o600)
}

// runLimits is the step: limits shared for cfg.limitsDuration, then not
// shared for cfg.limitsBeforeDuration (0: not run).
func runLimits(cfg config, bin string, r *limitsResults) error {
	step(fmt.Sprintf("limits across %d replicas: rateLimit %d/s, maxInFlight %d, %d events/s offered", limitsReplicas, limitsPerSecond, limitsMaxInFlight, limitsOffered))
	var err error
	if r.server, err = serverName(cfg.postgres); err != nil {
		return err
	}
	r.runs = []*limitsRun{{name: "shared through the ledger (ADR 0047)", shared: true, duration: cfg.limitsDuration}}
	if cfg.limitsBeforeDuration > 0 {
		r.runs = append(r.runs, &limitsRun{name: "each replica its own (before: `--shared-limits=false`)", duration: cfg.limitsBeforeDuration})
	}
	for _, run := range r.runs {
		if err := measureLimits(cfg, bin, run); err != nil {
			return fmt.Errorf("limits, %s: %w", run.name, err)
		}
		fmt.Printf("  %s, %s: published %d (failed %d); received %d requests (%d deliveries), busiest 1 s window %d (at %s), mean %.1f/s, "+
			"most in flight %d of %d; backlog %d; attempts per replica %v: %s\n",
			run.name, run.duration, run.published, run.failed, run.requests, run.unique, run.busiest, run.busiestAt.Round(time.Millisecond),
			run.meanRate, run.mostInFlight, limitsMaxInFlight, run.backlog(), run.perReplica, verdict(run.meets()))
	}
	return nil
}

// measureLimits runs three replicas on a fresh schema, offers
// limitsOffered events/s for run.duration, and stops them.
func measureLimits(cfg config, bin string, run *limitsRun) error {
	rcv, err := startLimitsReceiver()
	if err != nil {
		return err
	}
	defer rcv.close()
	eps, err := limitsEndpointsFile(rcv.url)
	if err != nil {
		return err
	}
	defer os.Remove(eps)
	schema := fmt.Sprintf("hk_bench_limits_%d", time.Now().UnixNano())
	defer dropSchema(cfg.postgres, schema)
	args := []string{"--ledger", engineDSN(cfg.postgres), "--pg-schema", schema}
	if !run.shared {
		args = append(args, "--shared-limits=false")
	}
	rs, err := startReplicas(bin, limitsReplicas, args, eps)
	if err != nil {
		return err
	}
	defer rs.stop()

	label := "limits-shared"
	if !run.shared {
		label = "limits-own"
	}
	l := paced(target{token: token, spread: rs.urls()}, label, limitsOffered, run.duration)
	run.perReplica = rs.stop()
	arrivals, unique := rcv.snapshot()

	run.failed = int(l.failed.Load())
	run.published = l.accepted
	if run.published == 0 {
		return l.err()
	}
	run.requests, run.unique = len(arrivals), unique
	run.mostInFlight = int(rcv.most.Load())
	if len(arrivals) == 0 {
		return fmt.Errorf("the receiver got no request")
	}
	var from int64
	run.busiest, from = busiestWindow(arrivals, time.Second)
	run.busiestAt = time.Unix(0, from).Sub(l.start)
	if span := time.Duration(arrivals[len(arrivals)-1] - arrivals[0]); span > 0 {
		run.meanRate = float64(len(arrivals)-1) / span.Seconds()
	}
	return nil
}

// markdown is the step's section of docs/benchmarks.md.
func (r *limitsResults) markdown(machine string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("\n%s\n\n", limitsHeading)
	p("Written by `go run ./test/bench --steps limits` (part of `make bench`) on %s.\n", time.Now().UTC().Format("2006-01-02"))
	p("Machine: %s.\n\n", machine)
	p("%d engine processes (enginehost, the manager's defaults: %s workers, 1 s idle wait) on one fresh schema of\n", limitsReplicas, engineWorkers)
	p("%s per run; one endpoint with `rateLimit: {perSecond: %d}` (burst: the default, %d) and\n", r.server, limitsPerSecond, limitsBurst)
	p("`maxInFlight: %d`, to a loopback receiver that holds each request %s (a slow receiver), records when\n", limitsMaxInFlight, limitsHold)
	p("each arrives (every request: a retry or a duplicate counts) and counts the requests it holds at once (from\n")
	p("arrival to the end of the hold, before it answers: never more than the engines have in flight). The load\n")
	p("client offers %s events/s open-loop, its publishes to the replicas in turn; when the publishing ends the\n", thousands(limitsOffered))
	p("replicas stop, and what they had not delivered is the backlog (the offer is ten times the rate: it is\n")
	p("not drained). The busiest window is the most arrivals in any [t, t + 1 s), t anywhere, not only on clock\n")
	p("seconds; the mean rate is from the first arrival to the last.\n\n")
	p("| Limits | Offered for | Published | Requests received | Busiest 1 s window | Mean rate | Most in flight at once | Backlog at stop | Attempts per replica |\n")
	p("|---|---|---|---|---|---|---|---|---|\n")
	for _, run := range r.runs {
		published := thousands(run.published)
		if run.failed > 0 {
			published += fmt.Sprintf(" (%d refused)", run.failed)
		}
		p("| %s | %s | %s | %s | **%d** (from %s) | %.1f/s | **%d** of %d | %s | %s |\n", run.name, run.duration, published,
			thousands(run.requests), run.busiest, run.busiestAt.Round(time.Millisecond), run.meanRate, run.mostInFlight, limitsMaxInFlight,
			thousands(run.backlog()), strings.Trim(fmt.Sprint(run.perReplica), "[]"))
	}
	for _, run := range r.runs {
		if !run.shared {
			continue
		}
		p("\nIssue #43's acceptance (%d replicas, `perSecond: %d`, %s/s offered for %s: at most %d requests in every\n",
			limitsReplicas, limitsPerSecond, thousands(limitsOffered), run.duration, limitsPerSecond+limitsBurst)
		v := verdict(run.meets())
		if run.meets() && !run.reachedRate() {
			v += ", but only because the rate was not reached"
		}
		p("1-second window, never more than `maxInFlight` at once): busiest window **%d**, most in flight **%d** of %d: %s.\n",
			run.busiest, run.mostInFlight, limitsMaxInFlight, v)
		p("\nThe rate's ceiling is %.1f/s: sends are spaced 3%% wider than 1/perSecond (ADR 0047), for the jitter\n", limitsCeiling)
		p("between sending and arriving; the receiver got %.1f/s, %.0f%% of it.\n", run.meanRate, 100*run.meanRate/limitsCeiling)
		if !run.reachedRate() {
			p("\nThe receiver got %.1f requests/s, under %d%%\n", run.meanRate, limitsReachedPercent)
			p("of the rate's ceiling while the offer was ten times it, so this run does not show the schedule holding\n")
			p("sends to %d a second; it shows the engines sending fewer.\n", limitsPerSecond)
		}
	}
	return b.String()
}

// thousands writes n with a comma between each group of three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
