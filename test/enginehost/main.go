// Command enginehost runs the delivery engine and its HTTP API without
// Kubernetes: the endpoints come from a JSON file instead of
// WebhookEndpoints. The crash test, the multi-process test and `make bench`
// run it as a real process (so that it can be SIGKILLed, and measured).
//
// It prints "listening <addr>" on stdout once the API accepts requests and
// the engine runs (Engine.Started).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/destination"
	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/groupcommit"
	"github.com/hookkeeper/hookkeeper/internal/httpapi"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/ledgerstore"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/tracing"
)

// EndpointConfig is one endpoint of the --endpoints file.
type EndpointConfig struct {
	Namespace   string   `json:"namespace"`
	Name        string   `json:"name"`
	URL         string   `json:"url"`
	EventTypes  []string `json:"eventTypes"`
	Secret      string   `json:"secret"`
	MaxInFlight int      `json:"maxInFlight"`
	// RateLimit is the endpoint's, if any.
	RateLimit   ledger.RateLimit `json:"rateLimit"`
	MaxAttempts int32            `json:"maxAttempts"`
	// Delay is the fixed delay between attempts (Go duration).
	Delay string `json:"delay"`
	// Timeout is the attempt timeout (Go duration).
	Timeout string `json:"timeout"`
	// Budget is the endpoint's retry budget, if any.
	Budget *ledger.RetryBudget `json:"budget,omitempty"`
	// Backoff, when set, replaces the fixed Delay and MaxAttempts (the
	// breaker bench retries on an exponential backoff); its
	// AttemptTimeout defaults to Timeout.
	Backoff *backoff.Policy `json:"backoff,omitempty"`
	// Breaker is the endpoint's circuit breaker policy; nil: the engine's
	// defaults (ledger.DefaultBreakerPolicy).
	Breaker *ledger.BreakerPolicy `json:"breaker,omitempty"`
}

func main() {
	var (
		o                   hostOptions
		cpuProfile          string
		blockProfile        string
		traceFile           string
		traceAfter          time.Duration
		traceFor            time.Duration
		allowedDestinations string
		clockOffset         time.Duration
	)
	flag.StringVar(&o.ledger, "ledger", "", "sqlite://<path> or postgres://<dsn>")
	flag.StringVar(&o.pgSchema, "pg-schema", "", "PostgreSQL schema to use (tests give each its own)")
	flag.StringVar(&o.listen, "listen", "127.0.0.1:0", "address of the HTTP API")
	flag.StringVar(&o.token, "token", "", "bearer token accepted by the API")
	flag.StringVar(&o.endpointsFile, "endpoints", "", "JSON file with the endpoints to register")
	flag.IntVar(&o.workers, "workers", 128, "concurrent attempts")
	flag.DurationVar(&o.leaseMargin, "lease-margin", 15*time.Second, "lease margin over the attempt timeout")
	flag.DurationVar(&o.idleWait, "idle-wait", time.Second, "longest sleep between claims")
	flag.DurationVar(&o.recordWait, "record-wait", 0, "how long an attempt record may wait to share an insert's commit (engine.Options.RecordWait; 0: the engine's default)")
	flag.IntVar(&o.writeCommitters, "write-committers", 0, "how many ingest commits may run at once on PostgreSQL (engine.Options.WriteBatch.Committers; 0: the engine's default, 1)")
	flag.IntVar(&o.writeMaxBatch, "write-max-batch", 0, "most items (inserts and attempt records) one commit takes (engine.Options.WriteBatch.MaxBatch; 0: the engine's default)")
	flag.DurationVar(&o.writeDelay, "write-delay", 0, "how long a commit of ingest and attempt records may wait for more items (engine.Options.WriteBatch.MaxDelay; 0: the engine's default)")
	flag.BoolVar(&o.verbose, "v", false, "log to stderr")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	flag.StringVar(&blockProfile, "blockprofile", "", "write a blocking profile of the run to this file (where goroutines wait: locks, channels, I/O)")
	flag.StringVar(&traceFile, "trace", "", "write an execution trace (runtime/trace: where goroutines wait for a processor, a lock, a channel or a system call) of --trace-for, from --trace-after the start, to this file")
	flag.DurationVar(&traceAfter, "trace-after", 8*time.Second, "when --trace starts, from the process's start")
	flag.DurationVar(&traceFor, "trace-for", time.Second, "how long --trace traces (a second of a busy engine is a few megabytes)")
	flag.StringVar(&allowedDestinations, "allowed-destination-cidrs", "127.0.0.0/8,::1/128", "CIDRs delivered to despite the manager's default-deny destination policy (loopback, where the tests' receivers are)")
	flag.DurationVar(&o.readHeaderTimeout, "api-read-header-timeout", httpapi.ServerReadHeaderTimeout, "how long the API waits for a request's headers")
	flag.IntVar(&o.maxConnections, "api-max-connections", httpapi.DefaultMaxConnections, "most connections the API holds open")
	flag.DurationVar(&clockOffset, "clock-offset", 0, "shift the engine's and the API's clock by this much (tests use it to start at a chosen time)")
	flag.BoolVar(&o.printBreakers, "print-breakers", false, "print a line on stdout when an endpoint's circuit breaker changes (\"breaker <endpoint> open|closed <reason> probes=<n>\"); whoever starts the process must read its stdout")
	flag.StringVar(&o.instance, "instance", "", "identity of this replica across restarts (the manager's --instance); its earlier processes' leases are reclaimed at start")
	flag.BoolVar(&o.sharedLimits, "shared-limits", true, "on PostgreSQL, hold endpoints' rateLimit and maxInFlight in the ledger for every process together (engine.Options.SharedLimits, ADR 0047); false: each process on its own, as before (the limits bench's \"before\")")
	flag.Parse()
	allowed, err := destination.ParseCIDRs(allowedDestinations)
	if err != nil {
		fmt.Fprintln(os.Stderr, "enginehost: --allowed-destination-cidrs:", err)
		os.Exit(2)
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	if blockProfile != "" {
		runtime.SetBlockProfileRate(int(100 * time.Microsecond))
		defer writeBlockProfile(blockProfile)
	}
	if traceFile != "" {
		go writeTrace(traceFile, traceAfter, traceFor)
	}
	clock := offsetClock(clockOffset)
	sender := dispatch.NewGuardedSender(destination.New(destination.Options{Allowed: allowed}))
	sender.Now = clock.Now
	o.sender, o.clock = sender, clock
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "enginehost:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// writeBlockProfile writes the blocking profile gathered since the start.
func writeBlockProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "enginehost: --blockprofile:", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("block").WriteTo(f, 0); err != nil {
		fmt.Fprintln(os.Stderr, "enginehost: --blockprofile:", err)
	}
}

// writeTrace writes an execution trace of the window [after, after+d)
// from now to path. A process that exits first leaves the file partial.
func writeTrace(path string, after, d time.Duration) {
	time.Sleep(after) // a window of the run, not synchronisation
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "enginehost: --trace:", err)
		return
	}
	defer f.Close()
	if err := trace.Start(f); err != nil {
		fmt.Fprintln(os.Stderr, "enginehost: --trace:", err)
		return
	}
	time.Sleep(d)
	trace.Stop()
}

// offsetClock is the wall clock shifted by a fixed offset: it runs at the
// real rate, so two processes given the same offset share one timeline.
type offsetClock time.Duration

func (o offsetClock) Now() time.Time { return time.Now().Add(time.Duration(o)) }

// hostOptions are enginehost's settings, from its flags.
type hostOptions struct {
	ledger, pgSchema, listen, token, endpointsFile, instance string
	workers, writeCommitters, writeMaxBatch                  int
	leaseMargin, idleWait, readHeaderTimeout, writeDelay     time.Duration
	recordWait                                               time.Duration
	maxConnections                                           int
	verbose, printBreakers, sharedLimits                     bool
	sender                                                   engine.Sender
	clock                                                    offsetClock
}

func run(o hostOptions) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := logr.Discard()
	if o.verbose {
		log = funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{})
	}

	// Traces as the manager takes them, from OTEL_* (the bench's tracing
	// step); off when the environment asks for none.
	_, stopTraces, err := tracing.Setup(ctx)
	if err != nil {
		return err
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = stopTraces(fctx)
	}()

	loc, err := ledger.ParseLocation(o.ledger)
	if err != nil {
		return err
	}
	var store ledger.Store
	if loc.Driver == ledger.Postgres && o.pgSchema != "" {
		store, err = postgres.Open(ctx, loc.DSN, postgres.WithSchema(o.pgSchema))
	} else {
		store, err = ledgerstore.Open(ctx, loc)
	}
	if err != nil {
		return err
	}
	defer store.Close()

	reg := prometheus.NewRegistry()
	metrics := engine.NewMetrics(reg, store)
	var onBreaker func(ledger.Breaker)
	if o.printBreakers {
		onBreaker = printBreaker
	}
	eng, err := engine.New(engine.Options{Store: store, Sender: o.sender, Instance: o.instance, Workers: o.workers, LeaseMargin: o.leaseMargin, IdleWait: o.idleWait, WriteBatch: groupcommit.Options{MaxDelay: o.writeDelay, Committers: o.writeCommitters, MaxBatch: o.writeMaxBatch}, RecordWait: o.recordWait, SharedLimits: o.sharedLimits && loc.Driver == ledger.Postgres, Logger: log, Metrics: metrics, Clock: o.clock, OnBreaker: onBreaker})
	if err != nil {
		return err
	}
	defer eng.Close()
	if err := registerEndpoints(ctx, eng, o.endpointsFile); err != nil {
		return err
	}

	handler, err := httpapi.New(httpapi.Config{
		Publisher:    eng,
		Reader:       store,
		Acknowledger: eng,
		Auth:         httpapi.StaticTokens{o.token: {Username: "enginehost"}},
		Log:          log,
		Now:          o.clock.Now,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	srv := httpapi.NewServer(o.listen, handler, httpapi.ServerOptions{MaxConnections: o.maxConnections, Registerer: reg})
	srv.ReadHeaderTimeout = o.readHeaderTimeout
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "enginehost: serve:", err)
			stop()
		}
	}()
	ran := make(chan error, 1)
	go func() { ran <- eng.Run(ctx) }()
	// Announced once the engine runs, so that a load starts on an engine
	// that has loaded its endpoints and hands off publishes.
	var runErr error
	select {
	case <-eng.Started():
		fmt.Printf("listening %s\n", ln.Addr())
		runErr = <-ran
	case runErr = <-ran:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	fmt.Printf("attempts %d\n", countAttempts(reg))
	return runErr
}

// printBreaker announces a breaker's change on stdout, the signal the
// breaker bench waits for (one write per line, so concurrent calls do not
// interleave).
func printBreaker(b ledger.Breaker) {
	state := "closed"
	if b.Open {
		state = "open"
	}
	fmt.Printf("breaker %s %s %s probes=%d\n", b.EndpointID, state, b.Reason, b.Probes)
}

// countAttempts sums hookkeeper_delivery_attempts_total, which tests use to
// see that a process did its share of the work.
func countAttempts(reg *prometheus.Registry) int {
	families, err := reg.Gather()
	if err != nil {
		return -1
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "hookkeeper_delivery_attempts_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			total += m.GetCounter().GetValue()
		}
	}
	return int(total)
}

func registerEndpoints(ctx context.Context, eng *engine.Engine, file string) error {
	if file == "" {
		return nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var eps []EndpointConfig
	if err := json.Unmarshal(data, &eps); err != nil {
		return fmt.Errorf("parsing %s: %w", file, err)
	}
	for _, c := range eps {
		delay, err := time.ParseDuration(c.Delay)
		if err != nil {
			return fmt.Errorf("endpoint %s: delay: %w", c.Name, err)
		}
		timeout, err := time.ParseDuration(c.Timeout)
		if err != nil {
			return fmt.Errorf("endpoint %s: timeout: %w", c.Name, err)
		}
		b := backoff.Policy{Strategy: backoff.Fixed, InitialDelay: delay, MaxAttempts: c.MaxAttempts, AttemptTimeout: timeout}
		if c.Backoff != nil {
			b = *c.Backoff
			if b.AttemptTimeout == 0 {
				b.AttemptTimeout = timeout
			}
		}
		_, err = eng.RegisterEndpoint(ctx, ledger.Endpoint{
			ID: ledger.EndpointID(c.Namespace, c.Name), Namespace: c.Namespace, Name: c.Name,
			URL: c.URL, EventTypes: c.EventTypes, MaxInFlight: c.MaxInFlight, RateLimit: c.RateLimit, AckMode: ledger.AckResponse,
			Secrets: []ledger.SigningSecret{{Value: sensitive.Bytes(c.Secret)}},
			Policy: ledger.Policy{
				Backoff: b,
				RetryOn: []string{"NetworkError", "Timeout", "429", "5xx"},
				Budget:  c.Budget,
				Breaker: c.Breaker,
			},
		})
		if err != nil {
			return err
		}
	}
	return nil
}
