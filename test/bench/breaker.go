package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookkeeper/hookkeeper/controllers/retrypolicy"
	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// The circuit breaker (issue #23): how many attempts a receiver that is
// down gets per minute with and without the breaker, and whether
// publishing slows down while one of ten endpoints is down.
//
// The breaker's defaults act over minutes (it opens after a minute of
// failures, probes from 30 s to 10 min), too long for `make bench`: the
// runs use the defaults with every duration divided by breakerScale, so
// that the bench's minute is twelve minutes of an outage under the
// defaults, and the defaults' own figures are computed from their
// schedule by the same model (outage) that is checked against the runs.

// breakerScale divides the default breaker policy's durations in the runs.
const breakerScale = 12

// scaledBreaker is ledger.DefaultBreakerPolicy with its durations divided
// by breakerScale: 10 failures over 5 s, probes from 2.5 s doubling to 50 s.
func scaledBreaker() ledger.BreakerPolicy {
	p := ledger.DefaultBreakerPolicy
	p.MinDuration /= breakerScale
	p.ProbeInterval /= breakerScale
	p.MaxProbeInterval /= breakerScale
	p.GoneProbeInterval /= breakerScale
	p.Ramp /= breakerScale
	return p
}

// breakerBackoff is the retry schedule of both down-receiver runs, with and
// without the breaker; without jitter, so that the engine's offsets are
// the model's.
var breakerBackoff = backoff.Policy{
	Strategy: backoff.Exponential, InitialDelay: time.Second, FactorMilli: 2000, MaxDelay: time.Minute,
	MaxAttempts: 12, AttemptTimeout: 5 * time.Second,
}

// outage models a receiver that is down from time 0 while events for it
// are published at rate per second from time 0: attempt n of the event
// published at s is made at s+offsets[n] (the nominal backoff: failures
// are instant), until the breaker opens; then only its probes are.
type outage struct {
	offsets []time.Duration
	rate    float64
	breaker ledger.BreakerPolicy
}

func newOutage(b backoff.Policy, rate float64, breaker ledger.BreakerPolicy) outage {
	return outage{offsets: b.Plan(10_000).Offsets, rate: rate, breaker: breaker}
}

// without is the number of attempts between from and to (offsets from the
// outage's start) without a breaker: attempt n of the events published in
// [0, to-offsets[n]) falls in the span when it is at or after from.
func (o outage) without(from, to time.Duration) float64 {
	var seconds float64
	for _, off := range o.offsets {
		if d := to - max(from, off); d > 0 {
			seconds += d.Seconds()
		}
	}
	return o.rate * seconds
}

// opensAt is when the breaker opens: at the first failure once the streak
// holds Failures failures and spans MinDuration. The first attempts alone
// fail at rate per second (retries only bring the Failures-th failure
// sooner), and the next failure after MinDuration follows within 1/rate,
// which the model leaves out.
func (o outage) opensAt() (time.Duration, bool) {
	if o.breaker.Disabled || o.breaker.Failures <= 0 || o.rate <= 0 {
		return 0, false
	}
	nth := time.Duration(float64(o.breaker.Failures-1) / o.rate * float64(time.Second))
	return max(o.breaker.MinDuration, nth), true
}

// with is the number of attempts between from and to with the breaker:
// every attempt until it opens, then its probes alone.
func (o outage) with(from, to time.Duration) float64 {
	open, ok := o.opensAt()
	if !ok {
		return o.without(from, to)
	}
	n := o.without(from, min(to, open))
	for _, p := range probeSchedule(o.breaker, to-open) {
		if t := open + p; t >= from {
			n++
		}
	}
	return n
}

// steadyWithout is the attempts per minute without a breaker once the
// outage outlasts the backoff's horizon: every event gets all its
// attempts.
func (o outage) steadyWithout() float64 {
	last := o.offsets[len(o.offsets)-1]
	return o.without(last, last+time.Minute)
}

// steadyWith is the attempts per minute of an open breaker whose probes
// reached the longest interval.
func (o outage) steadyWith() float64 {
	if o.breaker.MaxProbeInterval <= 0 {
		return 0
	}
	return float64(time.Minute) / float64(o.breaker.MaxProbeInterval)
}

// probeSchedule lists when an open breaker's probes fall, as offsets from
// its opening, before span: the first after ProbeInterval, each next one
// after twice the wait before the last, up to MaxProbeInterval (the
// engine's firstProbe and nextInterval, for a Failing breaker).
func probeSchedule(p ledger.BreakerPolicy, span time.Duration) []time.Duration {
	wait := p.ProbeInterval
	if wait <= 0 {
		return nil
	}
	var at []time.Duration
	for t := wait; t < span; t += wait {
		at = append(at, t)
		wait *= 2
		if p.MaxProbeInterval > 0 {
			wait = min(wait, p.MaxProbeInterval)
		}
	}
	return at
}

// perMinute scales n, counted over d, to a minute.
func perMinute(n float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return n * float64(time.Minute) / float64(d)
}

// countBetween counts the times (unix nanos) in [from, to).
func countBetween(times []int64, from, to int64) int {
	n := 0
	for _, t := range times {
		if t >= from && t < to {
			n++
		}
	}
	return n
}

// ratio formats a/b as "N×", "?" when b is 0.
func ratio(a, b float64) string {
	if b == 0 {
		return "?"
	}
	switch r := a / b; {
	case r >= 100:
		return fmt.Sprintf("%.0f×", r)
	case r >= 10:
		return fmt.Sprintf("%.1f×", r)
	default:
		return fmt.Sprintf("%.2f×", r)
	}
}

// hitCounter is a loopback receiver that answers status to every request
// and counts them, with their arrival times when it keeps times.
type hitCounter struct {
	srv       *http.Server
	url       string
	status    int
	keepTimes bool
	n         atomic.Int64
	mu        sync.Mutex
	times     []int64
}

func startHits(status int, keepTimes bool) (*hitCounter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hitCounter{url: "http://" + ln.Addr().String() + "/hook", status: status, keepTimes: keepTimes}
	h.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

func (h *hitCounter) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now().UnixNano()
	h.n.Add(1)
	if h.keepTimes {
		h.mu.Lock()
		h.times = append(h.times, now)
		h.mu.Unlock()
	}
	w.WriteHeader(h.status)
}

func (h *hitCounter) between(from, to time.Time) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return countBetween(h.times, from.UnixNano(), to.UnixNano())
}

func (h *hitCounter) close() { _ = h.srv.Close() }

// breakerEndpoint is one endpoint of enginehost's --endpoints file, of
// namespace bench, subscribed to every type.
func breakerEndpoint(name, url string, breaker ledger.BreakerPolicy) (map[string]any, error) {
	secret, err := signing.GenerateSecret()
	if err != nil {
		return nil, err
	}
	b := breakerBackoff
	return map[string]any{
		"namespace": "bench", "name": name, "url": url, "eventTypes": []string{"*"},
		"secret": string(secret.Reveal()), "maxInFlight": 512, "delay": "1s", "timeout": "5s",
		"backoff": &b, "breaker": &breaker,
	}, nil
}

func writeEndpointsFile(dir, label string, eps []map[string]any) (string, error) {
	data, err := json.Marshal(eps)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "endpoints-"+label+".json")
	return path, os.WriteFile(path, data, 0o600)
}

// breakerLedger is a fresh ledger for one engine process, and how the
// bench opens it afterwards to read the breakers.
type breakerLedger struct {
	args []string
	open func(ctx context.Context) (ledger.Store, error)
}

func breakerLedgerFor(cfg config, work, store, label string, schemas *[]string) breakerLedger {
	if store == "sqlite" {
		path := filepath.Join(work, "breaker-"+label+".db")
		return breakerLedger{
			args: []string{"--ledger", "sqlite://" + path},
			open: func(ctx context.Context) (ledger.Store, error) { return sqlite.Open(ctx, path) },
		}
	}
	schema := fmt.Sprintf("hk_bench_breaker_%d", time.Now().UnixNano())
	*schemas = append(*schemas, schema)
	return breakerLedger{
		args: []string{"--ledger", engineDSN(cfg.postgres), "--pg-schema", schema},
		open: func(ctx context.Context) (ledger.Store, error) {
			return postgres.Open(ctx, cfg.postgres, postgres.WithSchema(schema))
		},
	}
}

// readBreaker reads an endpoint's breaker from a ledger no engine runs on.
func readBreaker(l breakerLedger, endpointID string) (ledger.Breaker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := l.open(ctx)
	if err != nil {
		return ledger.Breaker{}, fmt.Errorf("opening the ledger to read the breakers: %w", err)
	}
	defer store.Close()
	b, err := store.BreakerGet(ctx, endpointID)
	if errors.Is(err, ledger.ErrNotFound) {
		return ledger.Breaker{EndpointID: endpointID}, nil
	}
	if err != nil {
		return ledger.Breaker{}, fmt.Errorf("reading the breaker of %s: %w", endpointID, err)
	}
	return b, nil
}

// downCount is what one down receiver got in the window.
type downCount struct {
	requests  int // in the window
	afterOpen int // from the breaker's opening to the window's end
	// leased is, of afterOpen, those before the first probe was due:
	// attempts leased before the opening, sent after it.
	leased int
	probes int // the ledger's count (with the breaker)
}

// downRun is the down-receiver run of one store: two endpoints in one
// engine, both down, one without the breaker and one with it.
type downRun struct {
	store         string
	without, with downCount
	opened        time.Duration // when the breaker opened, after the first publish
	loadAvg       string
}

// fanoutRun is one saturation run over ten endpoints.
type fanoutRun struct {
	events    int
	published float64       // events/s answered
	delivered float64       // requests/s the nine always-healthy receivers got meanwhile
	opened    time.Duration // when the down endpoint's breaker opened, after the first publish; <0: not
	loadAvg   string
}

// fanoutStore is the three ten-endpoint runs of one store, measured side
// by side.
type fanoutStore struct {
	store                     string
	healthy, down, downNoTrip fanoutRun
}

// fanoutShare is the breaker-on run's publish rate as a share of the
// all-healthy run's over the same seconds: the acceptance is that it does
// not fall.
func (f fanoutStore) fanoutShare() float64 {
	if f.healthy.published <= 0 {
		return 0
	}
	return f.down.published / f.healthy.published
}

type breakerResults struct {
	window, warm, measure time.Duration
	rate, connections     int
	down                  []downRun
	fanout                []fanoutStore
}

// runBreaker is the breaker step: the down-receiver runs of both stores
// side by side (each is a light, steady load whose figures follow the
// schedules, not the CPU), then, per store, the three ten-endpoint
// engines side by side (fanoutRuns).
func runBreaker(cfg config, bin, work string, r *breakerResults) error {
	pol := scaledBreaker()
	r.window, r.rate, r.connections = cfg.breakerWindow, cfg.breakerRate, cfg.connections
	r.warm, r.measure = pol.MinDuration+time.Second, cfg.breakerMeasure
	var schemas []string
	defer func() {
		for _, s := range schemas {
			dropSchema(cfg.postgres, s)
		}
	}()

	step(fmt.Sprintf("a down receiver for %s at %d events/s, with and without the breaker, on %s at once", r.window, r.rate, cfg.breakerStores))
	stores := strings.Split(cfg.breakerStores, ",")
	for _, s := range stores {
		if s != "sqlite" && s != "postgres" {
			return fmt.Errorf("--breaker-stores: %q is neither sqlite nor postgres", s)
		}
	}
	r.down = make([]downRun, len(stores))
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i, store := range stores {
		l := breakerLedgerFor(cfg, work, store, "down", &schemas)
		wg.Go(func() { r.down[i], errs[i] = downReceiverRun(cfg, bin, work, store, l, pol) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, d := range r.down {
		fmt.Printf("  %s: without the breaker %d requests in %s, with it %d (opened after %s; %d requests after it opened, %d of them before the first probe was due; %d probes) (load %s)\n",
			d.store, d.without.requests, r.window, d.with.requests, d.opened.Round(time.Millisecond), d.with.afterOpen, d.with.leased, d.with.probes, d.loadAvg)
	}

	for _, store := range stores {
		step(fmt.Sprintf("publishing at saturation to ten endpoints on %s: all healthy, one down with the breaker, and one down without, at once", store))
		fs, err := fanoutRuns(cfg, bin, work, store, pol, r.warm, r.measure, &schemas)
		if err != nil {
			return err
		}
		r.fanout = append(r.fanout, fs)
	}
	return nil
}

// fanoutRuns runs the three ten-endpoint engines of one store side by
// side: each gets its warm-up, then all three are published to at
// saturation over the same seconds, so that the shared machine's load,
// whatever it does meanwhile, weighs on the three alike.
func fanoutRuns(cfg config, bin, work, store string, pol ledger.BreakerPolicy, warm, measure time.Duration, schemas *[]string) (fanoutStore, error) {
	fs := fanoutStore{store: store}
	runs := []struct {
		label string
		down  bool
		pol   ledger.BreakerPolicy
		into  *fanoutRun
	}{
		{"healthy", false, pol, &fs.healthy},
		{"down", true, pol, &fs.down},
		{"down-disabled", true, ledger.BreakerPolicy{Disabled: true}, &fs.downNoTrip},
	}
	fans := make([]*fanout, len(runs))
	defer func() {
		for _, f := range fans {
			if f != nil {
				f.close()
			}
		}
	}()
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, run := range runs {
		l := breakerLedgerFor(cfg, work, store, run.label, schemas)
		wg.Go(func() {
			fans[i], errs[i] = startFanout(cfg, bin, work, store+"-"+run.label, l, run.down, run.pol, warm)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fs, err
	}
	for i, run := range runs {
		wg.Go(func() { *run.into, errs[i] = fans[i].measure(cfg.connections, measure) })
	}
	wg.Wait()
	return fs, errors.Join(errs...)
}

// downReceiverRun publishes at cfg.breakerRate for cfg.breakerWindow to
// two endpoints whose receivers answer 503, one with the breaker disabled
// and one with pol, and counts the requests each receiver gets.
func downReceiverRun(cfg config, bin, work, store string, l breakerLedger, pol ledger.BreakerPolicy) (downRun, error) {
	off, err := startHits(http.StatusServiceUnavailable, true)
	if err != nil {
		return downRun{}, err
	}
	defer off.close()
	on, err := startHits(http.StatusServiceUnavailable, true)
	if err != nil {
		return downRun{}, err
	}
	defer on.close()
	epOff, err := breakerEndpoint("down-off", off.url, ledger.BreakerPolicy{Disabled: true})
	if err != nil {
		return downRun{}, err
	}
	epOn, err := breakerEndpoint("down-on", on.url, pol)
	if err != nil {
		return downRun{}, err
	}
	eps, err := writeEndpointsFile(work, store+"-down", []map[string]any{epOff, epOn})
	if err != nil {
		return downRun{}, err
	}
	h, err := startHost(bin, append(slices.Clone(l.args), "--endpoints", eps, "--workers", engineWorkers)...)
	if err != nil {
		return downRun{}, err
	}
	defer h.stop()
	ld := paced(target{url: "http://" + h.addr + "/v1/namespaces/bench/events", token: token}, "down-"+store, cfg.breakerRate, cfg.breakerWindow)
	end := ld.start.Add(cfg.breakerWindow)
	h.stop()
	if err := ld.err(); err != nil {
		return downRun{}, fmt.Errorf("%s: %w", store, err)
	}
	d := downRun{store: store, loadAvg: loadAvg()}
	bOn, err := readBreaker(l, "bench/down-on")
	if err != nil {
		return d, err
	}
	bOff, err := readBreaker(l, "bench/down-off")
	if err != nil {
		return d, err
	}
	if bOff.Openings > 0 {
		return d, fmt.Errorf("%s: the disabled breaker opened", store)
	}
	if bOn.Openings == 0 || bOn.OpenedAt.After(end) {
		return d, fmt.Errorf("%s: the breaker did not open within %s", store, cfg.breakerWindow)
	}
	d.opened = bOn.OpenedAt.Sub(ld.start)
	d.without = downCount{requests: off.between(ld.start, end), afterOpen: off.between(bOn.OpenedAt, end)}
	d.with = downCount{requests: on.between(ld.start, end), afterOpen: on.between(bOn.OpenedAt, end), probes: bOn.Probes,
		leased: on.between(bOn.OpenedAt, bOn.OpenedAt.Add(pol.ProbeInterval))}
	return d, nil
}

// fanout is an engine with ten endpoints, each with its own receiver.
type fanout struct {
	label  string
	h      *host
	tg     target
	rcvs   []*hitCounter
	run    fanoutRun
	closed *atomic.Bool // the down endpoint's breaker closed
}

// startFanout starts an engine with ten endpoints under breaker policy
// pol, the first of them down when down; then, with one down, it
// publishes at cfg.breakerRate for warm (with the breaker on, until the
// engine announces the down endpoint's breaker open).
func startFanout(cfg config, bin, work, label string, l breakerLedger, down bool, pol ledger.BreakerPolicy, warm time.Duration) (*fanout, error) {
	f := &fanout{label: label, run: fanoutRun{opened: -1}, closed: new(atomic.Bool)}
	var eps []map[string]any
	for i := range 10 {
		status := http.StatusNoContent
		if down && i == 0 {
			status = http.StatusServiceUnavailable
		}
		h, err := startHits(status, false)
		if err != nil {
			f.close()
			return nil, err
		}
		f.rcvs = append(f.rcvs, h)
		ep, err := breakerEndpoint(fmt.Sprintf("ep-%d", i), h.url, pol)
		if err != nil {
			f.close()
			return nil, err
		}
		eps = append(eps, ep)
	}
	file, err := writeEndpointsFile(work, label, eps)
	if err != nil {
		f.close()
		return nil, err
	}
	// The engine announces the down endpoint's breaker on stdout.
	opened := make(chan time.Time, 1)
	onLine := func(line string) {
		fs := strings.Fields(line)
		if len(fs) < 3 || fs[0] != "breaker" || fs[1] != "bench/ep-0" {
			return
		}
		if fs[2] != "open" {
			f.closed.Store(true)
			return
		}
		select {
		case opened <- time.Now():
		default:
		}
	}
	if f.h, err = startHostWatching(bin, onLine, append(slices.Clone(l.args), "--endpoints", file, "--workers", engineWorkers, "--print-breakers")...); err != nil {
		f.close()
		return nil, err
	}
	f.tg = target{url: "http://" + f.h.addr + "/v1/namespaces/bench/events", token: token}

	// With a receiver down, warm up at the steady rate first: the down
	// endpoint's breaker opens after its MinDuration of failures (without
	// the breaker, its retries start meanwhile).
	start := time.Now()
	for i := 0; down; i++ {
		w := paced(f.tg, fmt.Sprintf("%s-warm%d", label, i), cfg.breakerRate, warm)
		if err := w.err(); err != nil {
			f.close()
			return nil, fmt.Errorf("%s: warming up: %w", label, err)
		}
		if pol.Disabled {
			break
		}
		select {
		case at := <-opened:
			f.run.opened = at.Sub(start)
		default:
		}
		if f.run.opened >= 0 {
			break
		}
		if time.Since(start) > 5*warm {
			f.close()
			return nil, fmt.Errorf("%s: the down endpoint's breaker did not open in %s", label, time.Since(start).Round(time.Second))
		}
	}
	return f, nil
}

// measure publishes at saturation from conns connections for d, and
// measures publishing and the nine always-healthy receivers meanwhile.
func (f *fanout) measure(conns int, d time.Duration) (fanoutRun, error) {
	healthy := func() (n int64) {
		for _, h := range f.rcvs[1:] {
			n += h.n.Load()
		}
		return n
	}
	before := healthy()
	ld := saturate(f.tg, f.label, conns, d)
	after := healthy()
	run := f.run
	if err := ld.err(); err != nil {
		return run, fmt.Errorf("%s: %w", f.label, err)
	}
	f.h.stop()
	if f.closed.Load() {
		return run, fmt.Errorf("%s: the down endpoint's breaker closed", f.label)
	}
	window := ld.end.Sub(ld.start)
	run.events = ld.accepted
	run.published = float64(ld.accepted) / window.Seconds()
	run.delivered = float64(after-before) / window.Seconds()
	run.loadAvg = loadAvg()
	state := "no breaker opened"
	if run.opened >= 0 {
		state = "the breaker opened after " + run.opened.Round(time.Millisecond).String()
	}
	fmt.Printf("  %s: published %.0f events/s (%d events), the nine healthy receivers got %.0f/s; %s (load %s)\n",
		f.label, run.published, run.events, run.delivered, state, run.loadAvg)
	return run, nil
}

func (f *fanout) close() {
	if f.h != nil {
		f.h.stop()
	}
	for _, h := range f.rcvs {
		h.close()
	}
}

// breakerHeading starts the step's section of docs/benchmarks.md.
const breakerHeading = "## A down receiver and the circuit breaker (issue #23)"

// markdown is the step's section of docs/benchmarks.md.
func (r *breakerResults) markdown(machine string) string {
	if len(r.down) == 0 {
		return ""
	}
	pol, def := scaledBreaker(), ledger.DefaultBreakerPolicy
	defBackoff := retrypolicy.DefaultPolicy().Backoff
	model := newOutage(breakerBackoff, float64(r.rate), pol)
	defModel := newOutage(defBackoff, float64(r.rate), def)
	var out strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&out, format, args...) }
	p("\n%s\n\n", breakerHeading)
	p("Written by `go run ./test/bench --steps breaker` (part of `make bench`) on %s.\n", time.Now().UTC().Format("2006-01-02"))
	p("Machine: %s. The engine runs as enginehost with %s workers and the manager's 1 s idle\n", machine, engineWorkers)
	p("wait, on a fresh ledger per run; receivers are HTTP servers on loopback.\n\n")

	p("### Attempts a down receiver gets per minute\n\n")
	p("One engine, two endpoints subscribed to the same events, each with its own receiver that\n")
	p("answers 503 to everything; events are published open-loop at %d/s for %s (both stores\n", r.rate, r.window)
	p("side by side, each with its own engine). Both endpoints retry on the same backoff\n")
	p("(%s %s ×%.0f up to %s, %d attempts, no jitter); one has the breaker disabled, the other the\n",
		breakerBackoff.Strategy, breakerBackoff.InitialDelay, float64(breakerBackoff.FactorMilli)/1000, breakerBackoff.MaxDelay, breakerBackoff.MaxAttempts)
	p("default breaker policy with every duration divided by %d (%d failures over %s, probes from\n", breakerScale, pol.Failures, pol.MinDuration)
	p("%s doubling to %s): the bench's time runs %d× faster than the defaults'. Requests are\n", pol.ProbeInterval, pol.MaxProbeInterval, breakerScale)
	p("counted at the receivers; the opening and the probes are read from the ledger afterwards. The\n")
	p("model is the schedule alone: attempt n of the event published at s is made at s plus the\n")
	p("backoff's nth offset, until the breaker opens (%s plus one failure), then its probes. Requests\n", pol.MinDuration)
	p("after the opening but before the first probe was due (%s later) are attempts the engine had\n", pol.ProbeInterval)
	p("leased before it opened; the model leaves them out.\n\n")
	p("| store | breaker | requests in the first minute | model | requests per minute from the breaker's opening to the minute's end | of them leased before the opening | probes (ledger) | model | load average |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, d := range r.down {
		after := r.window - d.opened
		p("| %s | disabled | %d | %.0f | %.0f (%d in %s) | | | | %s |\n", d.store, d.without.requests, model.without(0, r.window),
			perMinute(float64(d.without.afterOpen), after), d.without.afterOpen, after.Round(100*time.Millisecond), d.loadAvg)
		p("| %s | scaled defaults, opened after %s | **%d** | %.0f | **%.1f** (%d in %s) | %d | %d | %d | %s |\n", d.store, d.opened.Round(100*time.Millisecond),
			d.with.requests, model.with(0, r.window), perMinute(float64(d.with.afterOpen), after), d.with.afterOpen, after.Round(100*time.Millisecond),
			d.with.leased, d.with.probes, len(probeSchedule(pol, after)), d.loadAvg)
	}
	p("\n")
	for _, d := range r.down {
		p("- %s: the breaker cut the first minute's requests %s (%d → %d) and, once open, the rate %s.\n", d.store,
			ratio(float64(d.without.requests), float64(d.with.requests)), d.without.requests, d.with.requests,
			ratio(float64(d.without.afterOpen), float64(max(d.with.afterOpen, 1))))
	}
	p("\nThe same model for the defaults (the operator's default RetryPolicy: %s %s ×%.0f up to %s,\n",
		defBackoff.Strategy, defBackoff.InitialDelay, float64(defBackoff.FactorMilli)/1000, defBackoff.MaxDelay)
	p("%d attempts, nominal delays without the jitter; `ledger.DefaultBreakerPolicy`: %d failures over\n", defBackoff.MaxAttempts, def.Failures)
	p("%s, probes from %s doubling to %s), at the same %d events/s:\n\n", def.MinDuration, def.ProbeInterval, def.MaxProbeInterval, r.rate)
	last := defModel.offsets[len(defModel.offsets)-1]
	p("| attempts per minute | without the breaker | with it | ratio |\n|---|---|---|---|\n")
	for _, row := range []struct {
		label    string
		from, to time.Duration
	}{
		{"first minute (the breaker opens at its end)", 0, time.Minute},
		{"second minute", time.Minute, 2 * time.Minute},
		{"first hour, on average", 0, time.Hour},
	} {
		w, b := perMinute(defModel.without(row.from, row.to), row.to-row.from), perMinute(defModel.with(row.from, row.to), row.to-row.from)
		p("| %s | %.0f | %.1f | %s |\n", row.label, w, b, ratio(w, b))
	}
	p("| once the outage outlasts the backoff's %s horizon | %.0f | %.1f (one probe per %s) | %s |\n",
		last, defModel.steadyWithout(), defModel.steadyWith(), def.MaxProbeInterval, ratio(defModel.steadyWithout(), defModel.steadyWith()))

	p("\n### Publishing while one of ten endpoints is down\n\n")
	p("Ten endpoints subscribed to every event, each with its own receiver, so that each event fans\n")
	p("out to ten deliveries. Three engines per store, each on its own ledger: one whose ten\n")
	p("receivers answer 204; one whose first receiver answers 503, with the scaled breaker policy\n")
	p("above; one whose first receiver answers 503, with the breaker disabled (every delivery\n")
	p("retried on the backoff above). The two with a receiver down first get events at %d/s for\n", r.rate)
	p("%s (with the breaker on, until the engine announces the down endpoint's breaker open on\n", r.warm)
	p("stdout, `enginehost --print-breakers`; it opens after its %s of failures). Then the three\n", pol.MinDuration)
	p("are published to at once, each by its own load client of the cost steps (%d connections,\n", r.connections)
	p("closed loop, 1 KiB events), for %s: the figures are that part. Side by side, the three share\n", r.measure)
	p("whatever the shared machine leaves them alike, so their rates compare though the machine's\n")
	p("load moves (run one after the other here, identical runs differed by up to 2×); the absolute\n")
	p("rates are a third of the machine's each. Delivery cannot keep up with ten deliveries per\n")
	p("event at saturation, so the nine healthy receivers' rate shows how much of its engine the\n")
	p("down endpoint takes. The floor: with the breaker on, publishing is at least 90%% of the\n")
	p("all-healthy engine's.\n\n")
	p("| store | all healthy | one down, breaker on | one down, breaker disabled | breaker on / healthy | floor | | deliveries/s to the nine healthy receivers, in the same order | load average |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range r.fanout {
		share := f.fanoutShare()
		p("| %s | %.0f events/s | **%.0f events/s** | %.0f events/s | **%.0f%%** | ≥ 90%% | %s | %.0f; %.0f; %.0f | %s |\n",
			f.store, f.healthy.published, f.down.published, f.downNoTrip.published, 100*share, verdict(share >= 0.9),
			f.healthy.delivered, f.down.delivered, f.downNoTrip.delivered, f.down.loadAvg)
	}
	p("\nReproduce: `go run ./test/bench --steps breaker` (with HOOKKEEPER_TEST_POSTGRES set; about two\n")
	p("minutes) rewrites this section alone; `--breaker-window`, `--breaker-rate` and\n")
	p("`--breaker-measure` change the runs.\n")
	return out.String()
}
