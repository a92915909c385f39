// Command bench measures hookkeeper's delivery engine end to end and writes
// the figures to docs/benchmarks.md (`make bench`). Every figure comes from
// real parts: the engine runs as its own process (enginehost) with durable
// commits, events are published over its HTTP API, and a real HTTP receiver
// on loopback answers 204.
//
// Measured, each in the same run:
//   - the raw loopback HTTP rate (the ceiling the machine gives any sender);
//   - end-to-end events per second from publish to a 2xx at the receiver,
//     1 KiB payloads, on SQLite and on PostgreSQL;
//   - scheduling lag (receipt minus due time) p50/p99 while 100,000
//     deliveries come due;
//   - the engine's resident memory with 1,000,000 scheduled deliveries in
//     the ledger;
//   - the cost per event, the aggregated API, and the circuit breaker: the
//     attempts a down receiver gets per minute with and without it, and
//     publishing while one of ten endpoints is down (breaker.go);
//   - what endpoints' filters add to a publish with 100 endpoints
//     (filters.go);
//   - what a 20-field schema of the event's type adds to a publish
//     (schemas.go);
//   - 1, 2 and 3 engine replicas on one PostgreSQL, and from their costs
//     what a PostgreSQL of 4, 8 and 16 cores carries (capacity.go).
//   - an endpoint's rateLimit and maxInFlight as its receiver sees them
//     behind three replicas on PostgreSQL (limits.go).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

const token = "bench-token"

// allSteps are the steps of `make bench`.
const allSteps = "sqlite,postgres,lag,rss,deliveryapi,cost,history,disk,manager,breaker,filters,neighbour,schema,capacity,rest,crowd,limits,apiload,tracing"

// verboseHosts passes -v to enginehost (set from --v).
var verboseHosts bool

var payload = strings.Repeat("x", 1000) // with the JSON around it, 1 KiB of data

type config struct {
	out, postgres                string
	duration                     time.Duration
	lagDeliveries, rssDeliveries int
	publishers                   int
	verbose                      bool
	profileDir                   string
	traceRuns                    string
	enginehost                   string
	steps                        string
	// Cost per event (cost.go, history.go).
	connections   int
	costDuration  time.Duration
	warmup        time.Duration
	historyEvents int
	// historyStores are the stores the history step runs on (a 10M
	// PostgreSQL preload takes most of an hour on 2 cores, so each may be
	// run alone).
	historyStores string
	// costStores are the stores the cost step runs on after the relay.
	costStores string
	// costRounds are the alternated rounds of the cost step (cost.go).
	costRounds int
	// The breaker step (breaker.go): the down receiver's window and
	// publish rate, and the measured part of each saturation run.
	breakerWindow, breakerMeasure time.Duration
	breakerRate                   int
	// breakerStores are the stores the breaker step runs on.
	breakerStores string
	// The filters step (filters.go): publishing time of both ledgers.
	filterDuration time.Duration
	// The neighbour step (neighbour.go): publishing time of each run.
	neighbourDuration time.Duration
	// The schema step (schemas.go): publishing time of both ledgers.
	schemaDuration time.Duration
	// The capacity step (capacity.go): publishing time of each run, and
	// the PostgreSQL it runs on (default: --postgres), which may be one of
	// its own so that the server-wide WAL is the engines' alone.
	capacityDuration time.Duration
	capacityPostgres string
	// The rest step (rest.go).
	rest restConfig
	// The crowd step (crowd.go).
	crowd crowdConfig
	// The limits step (limits.go): publishing time with the limits shared,
	// and without (0: not run).
	limitsDuration, limitsBeforeDuration time.Duration
	// The apiload step (apiload.go).
	apiload apiloadConfig
}

// bothStores is the default of --cost-stores and --history-stores.
const bothStores = "sqlite,postgres"

func (c config) runs(step string) bool { return listed(c.steps, step) }

// listed reports whether name is an item of the comma-separated list.
func listed(list, name string) bool { return slices.Contains(strings.Split(list, ","), name) }

func main() {
	var cfg config
	flag.StringVar(&cfg.out, "out", "docs/benchmarks.md", "where to write the results")
	flag.StringVar(&cfg.postgres, "postgres", os.Getenv("HOOKKEEPER_TEST_POSTGRES"), "PostgreSQL DSN (fresh schema per run)")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Second, "publishing time of each throughput run")
	flag.IntVar(&cfg.lagDeliveries, "lag-deliveries", 100_000, "deliveries coming due in the lag run")
	flag.IntVar(&cfg.rssDeliveries, "rss-deliveries", 1_000_000, "scheduled deliveries in the memory run")
	flag.IntVar(&cfg.publishers, "publishers", 128, "concurrent publishing clients")
	flag.BoolVar(&cfg.verbose, "v", false, "pass -v to the engine processes (logs on stderr)")
	flag.StringVar(&cfg.steps, "steps", allSteps, "steps to run; docs/benchmarks.md is written only when all run")
	flag.StringVar(&cfg.profileDir, "profile-dir", "", "write CPU profiles of the end-to-end runs' engine processes here")
	flag.StringVar(&cfg.traceRuns, "trace-runs", "", "cost runs (labels, e.g. sqlite-saturation,postgres-500-r2) whose engine writes an execution trace of one second of its measured window to <profile-dir>/<label>.trace (go tool trace)")
	flag.IntVar(&cfg.connections, "connections", 64, "load client connections of the relay and cost runs")
	flag.DurationVar(&cfg.costDuration, "cost-duration", 20*time.Second, "publishing time of each relay and cost run")
	flag.DurationVar(&cfg.warmup, "warmup", 3*time.Second, "publishing before the measured window of each relay, cost, crowd and capacity run, at its load, to the same processes: a service's first seconds (connections opened, statements prepared, a new ledger's first analyses) are not its steady cost")
	flag.IntVar(&cfg.historyEvents, "history-events", 10_000_000, "delivered events of history preloaded in the flat-cost runs")
	flag.StringVar(&cfg.historyStores, "history-stores", bothStores, "stores the history step runs on (one alone: figures are printed, not written)")
	flag.StringVar(&cfg.costStores, "cost-stores", bothStores, "stores the cost step runs on after the relay (one alone: figures are printed, not written)")
	flag.IntVar(&cfg.costRounds, "cost-rounds", 3, "rounds of the cost step (relay, SQLite, PostgreSQL, relay, ...): floors are judged on the median of the rounds")
	flag.DurationVar(&cfg.breakerWindow, "breaker-window", time.Minute, "how long the breaker step's receiver is down under steady publishing")
	flag.IntVar(&cfg.breakerRate, "breaker-rate", 50, "events/s published to the breaker step's down receiver")
	flag.DurationVar(&cfg.breakerMeasure, "breaker-measure", 15*time.Second, "publishing time at saturation of the breaker step's ten-endpoint engines, side by side, after the breaker opened")
	flag.StringVar(&cfg.breakerStores, "breaker-stores", bothStores, "stores the breaker step runs on (one alone: figures are printed, not written)")
	flag.DurationVar(&cfg.filterDuration, "filter-duration", 30*time.Second, "publishing time of the filters step, split between the ledger without filters and the one with")
	flag.DurationVar(&cfg.neighbourDuration, "neighbour-duration", 20*time.Second, "publishing time of each of the neighbour step's three runs (alone, beside hanging receivers, beside failing ones)")
	flag.DurationVar(&cfg.schemaDuration, "schema-duration", 30*time.Second, "publishing time of the schema step, split between the ledger without a contract and the one with the schema")
	flag.DurationVar(&cfg.capacityDuration, "capacity-duration", 15*time.Second, "publishing time of each of the capacity step's nine runs (1, 2 and 3 replicas at saturation, 500/s and 1,000/s)")
	flag.StringVar(&cfg.capacityPostgres, "capacity-postgres", "", "PostgreSQL DSN of the capacity step (default: --postgres; a server of its own keeps other databases' WAL out of the figures)")
	cfg.rest.bindFlags(flag.CommandLine)
	cfg.crowd.bindFlags(flag.CommandLine)
	cfg.apiload.bindFlags(flag.CommandLine)
	flag.DurationVar(&cfg.limitsDuration, "limits-duration", time.Minute, "publishing time of the limits step with the endpoint's limits shared by the three replicas (issue #43: 60 s)")
	flag.DurationVar(&cfg.limitsBeforeDuration, "limits-before-duration", 10*time.Second, "publishing time of the limits step's run with each replica holding the limits on its own (0: not run)")
	flag.StringVar(&cfg.enginehost, "enginehost", "", "use this enginehost binary instead of building ./test/enginehost (to compare builds in one session)")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type results struct {
	machine                string
	rawHTTP                float64
	sqlite, postgres       throughput
	lagP50, lagP99, lagMax time.Duration
	lagRate                float64
	rssKiB, hwmKiB         int
	rssLedgerMiB           float64
	rssInsertTime          time.Duration
	deliveryAPI            deliveryAPIResults // deliveryapi.go
	cost                   costResults
	history                historyResults
	disk                   diskResults
	manager                managerResults
	breaker                breakerResults   // breaker.go
	filters                filterResults    // filters.go
	neighbour              neighbourResults // neighbour.go
	schema                 schemaResults    // schemas.go
	capacity               capacityResults
	rest                   restResults    // rest.go
	crowd                  crowdResults   // crowd.go
	limits                 limitsResults  // limits.go
	apiload                apiloadResults // apiload.go
	tracing                tracingResults // tracing.go
}

type throughput struct {
	events    int
	published float64 // events/s accepted by the API
	delivered float64 // events/s from first publish to last 2xx
	rawHTTP   float64 // raw loopback rate measured just before
	profile   string  // where the engine's CPU time went
}

// profileStages are the stages of the pipeline breakdown reports, each
// named by the functions (pprof names: a suffix) that run it, one per
// store where the stores differ. TestProfileStagesNameDeclaredFunctions
// keeps them in step with the code.
var profileStages = []struct {
	label string
	fns   []string
}{
	{"ledger: insert events", []string{"sqlite.(*Store).insertEvents", "postgres.ingest"}},
	{"ledger: record attempts", []string{"sqlite.(*Store).recordAttempts", "postgres.record"}},
	{"ledger: claim", []string{"sqlite.(*Store).DeliveryClaim", "postgres.(*Store).DeliveryClaim"}},
	{"ingest: parse and canonicalize JSON", []string{"publish.parseBody"}},
	{"ingest: HTTP server", []string{"net/http.(*conn).serve"}},
	{"dispatch: send attempts", []string{"dispatch.(*Sender).Send"}},
	{"garbage collector", []string{"runtime.gcBgMarkWorker"}},
}

// breakdown summarizes an engine CPU profile: the share of its samples
// spent under each stage of the pipeline.
func breakdown(profile string) string {
	out, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=2000", profile).Output()
	if err != nil {
		return "(no profile: " + err.Error() + ")"
	}
	lines := strings.Split(string(out), "\n")
	var parts []string
	for _, st := range profileStages {
	stage:
		for _, line := range lines {
			f := strings.Fields(line)
			if len(f) < 6 {
				continue
			}
			for _, fn := range st.fns {
				if strings.HasSuffix(f[5], fn) {
					parts = append(parts, fmt.Sprintf("%s %s", st.label, f[4]))
					break stage
				}
			}
		}
	}
	total := ""
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "Total samples") {
			total = strings.TrimSpace(line[strings.Index(line, "Total samples"):])
		}
	}
	return strings.Join(parts, "; ") + " (" + total + ")"
}

func run(cfg config) error {
	verboseHosts = cfg.verbose
	if cfg.postgres == "" {
		return fmt.Errorf("no PostgreSQL DSN: run ./hack/postgres.sh and pass --postgres or HOOKKEEPER_TEST_POSTGRES")
	}
	work, err := os.MkdirTemp("", "hookkeeper-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if cfg.profileDir == "" {
		cfg.profileDir = work
	} else if err := os.MkdirAll(cfg.profileDir, 0o755); err != nil {
		return fmt.Errorf("profile directory: %w", err)
	}
	bin := cfg.enginehost
	if bin == "" {
		bin = filepath.Join(work, "enginehost")
		if out, err := exec.Command("go", "build", "-o", bin, "./test/enginehost").CombinedOutput(); err != nil {
			return fmt.Errorf("building enginehost: %v\n%s", err, out)
		}
	}
	rcv, err := startReceiver()
	if err != nil {
		return err
	}
	defer rcv.close()

	var r results
	r.machine = machine()
	step("raw loopback HTTP")
	r.rawHTTP = rawHTTP(rcv.url, 5*time.Second, cfg.publishers)
	fmt.Printf("  %.0f requests/s\n", r.rawHTTP)

	if cfg.runs("sqlite") {
		step("end to end on SQLite")
		if r.sqlite, err = endToEnd(cfg, bin, rcv, "sqlite://"+filepath.Join(work, "e2e.db"), ""); err != nil {
			return err
		}
	}
	if cfg.runs("postgres") {
		step("end to end on PostgreSQL")
		schema := fmt.Sprintf("hk_bench_%d", time.Now().UnixNano())
		defer dropSchema(cfg.postgres, schema)
		if r.postgres, err = endToEnd(cfg, bin, rcv, cfg.postgres, schema); err != nil {
			return err
		}
	}
	if cfg.runs("lag") {
		step(fmt.Sprintf("scheduling lag with %d deliveries coming due", cfg.lagDeliveries))
		if err := lag(cfg, bin, rcv, work, &r); err != nil {
			return err
		}
	}
	if cfg.runs("rss") {
		step(fmt.Sprintf("resident memory with %d scheduled deliveries", cfg.rssDeliveries))
		if err := rss(cfg, bin, rcv, work, &r); err != nil {
			return err
		}
	}
	if cfg.runs("deliveryapi") {
		step("kubectl get deliveries: the manager's aggregated API")
		if err := deliveryAPI(work, &r.deliveryAPI); err != nil {
			return err
		}
	}
	if cfg.steps == "deliveryapi" {
		return writeDeliveryAPISection(cfg.out, r.machine, &r.deliveryAPI)
	}
	if cfg.runs("cost") {
		if err := runCost(cfg, bin, work, &r.cost); err != nil {
			return err
		}
	}
	if cfg.runs("history") {
		if err := runHistory(cfg, bin, work, &r.history); err != nil {
			return err
		}
	}
	if cfg.runs("disk") {
		if err := runDisk(cfg, work, &r.disk); err != nil {
			return err
		}
	}
	if cfg.runs("manager") {
		if err := runManager(cfg, bin, work, &r.manager); err != nil {
			return err
		}
	}
	if cfg.steps == costSteps {
		return writeCost(cfg, &r)
	}
	if cfg.runs("breaker") {
		if err := runBreaker(cfg, bin, work, &r.breaker); err != nil {
			return err
		}
	}
	if cfg.steps == "breaker" && cfg.breakerStores == bothStores {
		return writeSection(cfg.out, breakerHeading, r.breaker.markdown(r.machine))
	}
	if cfg.runs("filters") {
		if err := runFilters(cfg, work, &r.filters); err != nil {
			return err
		}
	}
	if cfg.steps == "filters" {
		return writeSection(cfg.out, filtersHeading, r.filters.markdown(r.machine))
	}
	if cfg.runs("neighbour") {
		if err := runNeighbour(cfg, work, &r.neighbour); err != nil {
			return err
		}
	}
	if cfg.steps == "neighbour" {
		return writeSection(cfg.out, neighbourHeading, r.neighbour.markdown(r.machine))
	}
	if cfg.runs("schema") {
		if err := runSchemas(cfg, work, &r.schema); err != nil {
			return err
		}
	}
	if cfg.steps == "schema" {
		return writeSection(cfg.out, schemaHeading, r.schema.markdown(r.machine))
	}
	if cfg.runs("capacity") {
		if err := runCapacity(cfg, bin, &r.capacity); err != nil {
			return err
		}
	}
	if cfg.steps == "capacity" {
		return writeSection(cfg.out, capacityHeading, r.capacity.markdown(r.machine))
	}
	if cfg.runs("rest") {
		if err := runRest(cfg, work, &r.rest); err != nil {
			return err
		}
	}
	if cfg.steps == "rest" {
		return writeRest(cfg, &r)
	}
	if cfg.runs("crowd") {
		if err := runCrowd(cfg, bin, work, &r.crowd); err != nil {
			return err
		}
	}
	if cfg.steps == "crowd" {
		return writeCrowd(cfg, &r)
	}
	if cfg.runs("limits") {
		if err := runLimits(cfg, bin, &r.limits); err != nil {
			return err
		}
	}
	if cfg.steps == "limits" {
		return writeSection(cfg.out, limitsHeading, r.limits.markdown(r.machine))
	}
	if cfg.runs("apiload") {
		if err := runAPILoad(cfg, work, &r.apiload); err != nil {
			return err
		}
	}
	if cfg.steps == "apiload" {
		return writeSection(cfg.out, apiloadHeading, r.apiload.markdown(r.machine))
	}
	if cfg.runs("tracing") {
		if err := runTracing(cfg, bin, work, &r.tracing); err != nil {
			return err
		}
	}
	if cfg.steps == "tracing" {
		return writeSection(cfg.out, tracingHeading, r.tracing.markdown(r.machine))
	}
	if cfg.steps != allSteps || cfg.historyStores != bothStores || cfg.costStores != bothStores || cfg.breakerStores != bothStores ||
		cfg.crowd.stores != bothStores {
		fmt.Println("not all steps ran: results not written")
		return nil
	}
	return write(cfg, &r)
}

func step(s string) { fmt.Printf("==> %s\n", s) }

// receiver is the loopback webhook receiver: it answers 204 and records
// the first receipt of every webhook-id, and the lag of events whose data
// carries a "due" time.
type receiver struct {
	srv    *http.Server
	url    string
	mu     sync.Mutex
	seen   map[string]struct{}
	unique atomic.Int64
	last   atomic.Int64 // unix nanos of the latest first receipt
	lags   []time.Duration
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{seen: map[string]struct{}{}, url: "http://" + ln.Addr().String() + "/hook"}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	now := time.Now()
	id := req.Header.Get("webhook-id")
	var due int64
	if i := bytes.Index(body, []byte(`"due":`)); i >= 0 {
		rest := body[i+6:]
		if j := bytes.IndexAny(rest, ",}"); j > 0 {
			due, _ = strconv.ParseInt(string(rest[:j]), 10, 64)
		}
	}
	if id != "" {
		r.mu.Lock()
		if _, dup := r.seen[id]; !dup {
			r.seen[id] = struct{}{}
			r.unique.Add(1)
			r.last.Store(now.UnixNano())
			if due > 0 {
				r.lags = append(r.lags, now.Sub(time.Unix(0, due)))
			}
		}
		r.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = map[string]struct{}{}
	r.unique.Store(0)
	r.lags = nil
}

func (r *receiver) close() { _ = r.srv.Close() }

// waitUnique waits until the receiver saw n distinct events.
func (r *receiver) waitUnique(n int64, timeout time.Duration) error {
	return waitCount(&r.unique, n, timeout)
}

// waitCount waits until a receiver's count of distinct events reaches n.
func waitCount(count *atomic.Int64, n int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for count.Load() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("receiver saw %d of %d events after %s", count.Load(), n, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

func rawHTTP(url string, d time.Duration, conc int) float64 {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	body := []byte(`{"data":"` + payload + `"}`)
	var n atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / d.Seconds()
}

// host is a running enginehost.
type host struct {
	cmd  *exec.Cmd
	addr string
	once sync.Once
}

func startHost(bin string, args ...string) (*host, error) {
	return startHostWatching(bin, nil, args...)
}

// startHostWatching starts an enginehost and hands every line it prints
// after "listening" to onLine (nil: none), on one goroutine.
func startHostWatching(bin string, onLine func(string), args ...string) (*host, error) {
	if verboseHosts {
		args = append(args, "-v")
	}
	cmd := exec.Command(bin, append([]string{"--token", token}, args...)...)
	// The same GC settings as the manager Deployment (config/manager).
	cmd.Env = append(os.Environ(), "GOGC=400", "GOMEMLIMIT=400MiB")
	addr, err := startListening(cmd, onLine)
	if err != nil {
		return nil, fmt.Errorf("enginehost: %w", err)
	}
	return &host{cmd: cmd, addr: addr}, nil
}

// startListening starts a process that prints "listening <addr>" first
// (enginehost, the relay) and returns the address; the lines after it go
// to onLine (nil: discarded).
func startListening(cmd *exec.Cmd, onLine func(string)) (string, error) {
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "listening ") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return "", fmt.Errorf("did not start")
	}
	go func() {
		for sc.Scan() {
			if onLine != nil {
				onLine(sc.Text())
			}
		}
		_, _ = io.Copy(io.Discard, out) // a line too long for the scanner
	}()
	return strings.TrimPrefix(sc.Text(), "listening "), nil
}

func (h *host) stop() {
	h.once.Do(func() {
		_ = h.cmd.Process.Signal(syscall.SIGTERM)
		_ = h.cmd.Wait()
	})
}

func endpointsFile(dir, url string, maxInFlight int) (string, error) {
	secret, err := signing.GenerateSecret()
	if err != nil {
		return "", err
	}
	cfg := []map[string]any{{
		"namespace": "bench", "name": "receiver", "url": url, "eventTypes": []string{"*"},
		"secret": string(secret.Reveal()), "maxInFlight": maxInFlight, "maxAttempts": 10,
		"delay": "1s", "timeout": "5s",
	}}
	data, _ := json.Marshal(cfg)
	path := filepath.Join(dir, fmt.Sprintf("endpoints-%d.json", time.Now().UnixNano()))
	return path, os.WriteFile(path, data, 0o600)
}

func endToEnd(cfg config, bin string, rcv *receiver, ledgerLoc, schema string) (throughput, error) {
	rcv.reset()
	eps, err := endpointsFile(os.TempDir(), rcv.url, 512)
	if err != nil {
		return throughput{}, err
	}
	defer os.Remove(eps)
	raw := rawHTTP(rcv.url, 2*time.Second, cfg.publishers)
	rcv.reset()
	args := []string{"--ledger", ledgerLoc, "--endpoints", eps, "--workers", "256", "--idle-wait", "50ms"}
	if schema != "" {
		args = append(args, "--pg-schema", schema)
	}
	name := "sqlite"
	if schema != "" {
		name = "postgres"
	}
	profile := filepath.Join(cfg.profileDir, name+".pprof")
	args = append(args, "--cpuprofile", profile)
	h, err := startHost(bin, args...)
	if err != nil {
		return throughput{}, err
	}
	defer h.stop()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.publishers}, Timeout: 30 * time.Second}
	url := "http://" + h.addr + "/v1/namespaces/bench/events"
	var accepted, failed atomic.Int64
	start := time.Now()
	deadline := start.Add(cfg.duration)
	var wg sync.WaitGroup
	for p := range cfg.publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				body := `{"type":"order.created","data":{"n":` + strconv.Itoa(i) + `,"pad":"` + payload + `"}}`
				if code, err := postEvent(client, url, token, fmt.Sprintf("p%d-%d", p, i), body); err == nil && code == http.StatusCreated {
					accepted.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	publishTime := time.Since(start)
	if failed.Load() > 0 {
		return throughput{}, fmt.Errorf("%d publishes failed", failed.Load())
	}
	if err := rcv.waitUnique(accepted.Load(), 5*time.Minute); err != nil {
		return throughput{}, err
	}
	total := time.Unix(0, rcv.last.Load()).Sub(start)
	t := throughput{
		events:    int(accepted.Load()),
		published: float64(accepted.Load()) / publishTime.Seconds(),
		delivered: float64(accepted.Load()) / total.Seconds(),
		rawHTTP:   raw,
	}
	h.stop()
	t.profile = breakdown(profile)
	fmt.Printf("  %d events: published %.0f/s, delivered end to end %.0f/s (raw loopback HTTP %.0f/s)\n  profile: %s\n", t.events, t.published, t.delivered, t.rawHTTP, t.profile)
	return t, nil
}

// preload inserts n events for the bench endpoint straight into a SQLite
// ledger, each due at due(i), in durable batches.
func preload(path, url string, n int, due func(i int) time.Time) error {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, path)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := registerBenchEndpoint(ctx, store, url); err != nil {
		return err
	}
	const batch = 2000
	for i := 0; i < n; i += batch {
		params := make([]*ledger.EventInsertParams, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			at := due(j)
			params = append(params, &ledger.EventInsertParams{
				ID: ledger.NewID("evt", at), Namespace: "bench", Type: "order.created", Now: at,
				Data: json.RawMessage(`{"due":` + strconv.FormatInt(at.UnixNano(), 10) + `,"pad":"` + payload[:200] + `"}`),
			})
		}
		if _, err := store.EventInsertMany(ctx, params); err != nil {
			return err
		}
	}
	return nil
}

// registerBenchEndpoint registers the endpoint the engine's --endpoints
// file names (bench/receiver) in a ledger opened by the bench itself.
func registerBenchEndpoint(ctx context.Context, store ledger.Store, url string) error {
	secret, err := signing.GenerateSecret()
	if err != nil {
		return err
	}
	_, err = store.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{Now: time.Now(), Endpoint: ledger.Endpoint{
		ID: "bench/receiver", Namespace: "bench", Name: "receiver", URL: url, EventTypes: []string{"*"},
		Secrets: []ledger.SigningSecret{{Value: secret}}, AckMode: ledger.AckResponse, MaxInFlight: 512,
		Policy: ledger.Policy{
			Backoff: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: time.Second, MaxAttempts: 10, AttemptTimeout: 5 * time.Second},
			RetryOn: []string{"NetworkError", "Timeout", "5xx"},
		},
	}})
	return err
}

func lag(cfg config, bin string, rcv *receiver, work string, r *results) error {
	rcv.reset()
	path := filepath.Join(work, "lag.db")
	const window = 40 * time.Second
	start := time.Now().Add(30 * time.Second) // after the preload and the engine's start
	n := cfg.lagDeliveries
	if err := preload(path, rcv.url, n, func(i int) time.Time {
		return start.Add(time.Duration(int64(window) * int64(i) / int64(n)))
	}); err != nil {
		return err
	}
	if time.Now().After(start) {
		return fmt.Errorf("preloading %d deliveries took longer than 30s", n)
	}
	h, err := startHost(bin, "--ledger", "sqlite://"+path, "--workers", "256")
	if err != nil {
		return err
	}
	defer h.stop()
	if err := rcv.waitUnique(int64(n), window+2*time.Minute); err != nil {
		return err
	}
	rcv.mu.Lock()
	lags := slices.Clone(rcv.lags)
	rcv.mu.Unlock()
	d := distOf(lags)
	r.lagP50, r.lagP99, r.lagMax = d.p50, d.p99, d.max
	r.lagRate = float64(n) / window.Seconds()
	fmt.Printf("  lag p50 %s, p99 %s, max %s at %.0f deliveries/s coming due\n", r.lagP50, r.lagP99, r.lagMax, r.lagRate)
	return nil
}

func rss(cfg config, bin string, rcv *receiver, work string, r *results) error {
	rcv.reset()
	path := filepath.Join(work, "rss.db")
	far := time.Now().Add(24 * time.Hour)
	t0 := time.Now()
	if err := preload(path, rcv.url, cfg.rssDeliveries, func(int) time.Time { return far }); err != nil {
		return err
	}
	r.rssInsertTime = time.Since(t0)
	if fi, err := os.Stat(path); err == nil {
		r.rssLedgerMiB = float64(fi.Size()) / (1 << 20)
	}
	h, err := startHost(bin, "--ledger", "sqlite://"+path, "--workers", "256")
	if err != nil {
		return err
	}
	defer h.stop()
	// Work still flows with the big ledger: publish and deliver 1,000 events.
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range 1000 {
		req, _ := http.NewRequest(http.MethodPost, "http://"+h.addr+"/v1/namespaces/bench/events",
			strings.NewReader(`{"type":"order.created","data":{"n":`+strconv.Itoa(i)+`}}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
	}
	if err := rcv.waitUnique(1000, time.Minute); err != nil {
		return err
	}
	r.rssKiB, r.hwmKiB = procMemory(h.cmd.Process.Pid)
	fmt.Printf("  RSS %.1f MiB (peak %.1f MiB), ledger file %.0f MiB, preload took %s\n",
		float64(r.rssKiB)/1024, float64(r.hwmKiB)/1024, r.rssLedgerMiB, r.rssInsertTime.Round(time.Second))
	return nil
}

func procMemory(pid int) (rss, hwm int) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1, -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "VmRSS:":
			rss = v
		case "VmHWM:":
			hwm = v
		}
	}
	return rss, hwm
}

func dropSchema(dsn, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
}

func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "model name") {
				model = strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
				break
			}
		}
	}
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		f := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])
		if len(f) >= 2 {
			kib, _ := strconv.Atoi(f[1])
			mem = fmt.Sprintf(", %.0f GiB RAM", float64(kib)/(1<<20))
		}
	}
	kernel, _ := exec.Command("uname", "-sr").Output()
	return fmt.Sprintf("%s, %d cores%s, %s, %s", model, runtime.NumCPU(), mem, strings.TrimSpace(string(kernel)), runtime.Version())
}

func verdict(ok bool) string {
	if ok {
		return "meets"
	}
	return "**misses**"
}

func write(cfg config, r *results) error {
	var b strings.Builder
	fmt.Fprintf(&b, `# Benchmarks

Written by `+"`make bench`"+` (`+"`go run ./test/bench`"+`) on %s.

Machine: %s. Everything runs on this one machine at once: the engine
process (enginehost: the engine and its HTTP API without Kubernetes), the
publishing clients and the receiver. Commits are durable: SQLite with
`+"`synchronous=FULL`"+` in WAL mode, PostgreSQL 15 with `+"`fsync=on`"+`.

| Measure | Result | Floor | |
|---|---|---|---|
| Raw loopback HTTP, 1 KiB POST → 204, %d clients | %.0f requests/s | | |
| End to end on SQLite: publish → 2xx, 1 KiB, durable | **%.0f events/s** (%d events; raw HTTP in the same run %.0f/s) | 5,000 | %s |
| End to end on PostgreSQL: publish → 2xx, 1 KiB, durable | **%.0f events/s** (%d events; raw HTTP in the same run %.0f/s) | 2,500 | %s |
| Scheduling lag, %d deliveries coming due at %.0f/s | p50 **%s**, p99 **%s** (max %s) | p99 < 250 ms | %s |
| Resident memory with %d scheduled deliveries | **%.1f MiB** (peak %.1f MiB; ledger file %.0f MiB) | < 150 MiB | %s |

How each is measured:

- *End to end*: %d clients publish events with an Idempotency-Key over the
  HTTP API for %s; the rate is the number of events accepted divided by the
  time from the first publish to the last first receipt at the receiver
  (one endpoint, maxInFlight 512, 256 workers). Publishing alone ran at
  %.0f/s on SQLite and %.0f/s on PostgreSQL.
- *Scheduling lag*: the deliveries are written into the ledger due evenly
  over 40 s; lag is the receiver's receipt time minus the due time carried
  in each event, so it includes the HTTP round trip.
- *Memory*: 1,000,000 events due in 24 h are preloaded (in %s), the engine
  starts on that ledger, publishes and delivers 1,000 more events, and its
  VmRSS is read from /proc.

Where the engine's CPU time goes (share of the engine process's samples under
each stage, from a CPU profile of the end-to-end runs; stages overlap where
one calls another):

- SQLite: %s
- PostgreSQL: %s

The engine process runs with `+"`GOGC=400 GOMEMLIMIT=400MiB`"+`, as the manager
Deployment does. On two cores the publishing clients and the receiver take
the rest of the CPU: the machine, not the ledger's fsyncs (about 0.1 ms
each here), is the limit.

Reproduce: `+"`make bench`"+` (needs `+"`./hack/postgres.sh`"+`, which `+"`make bench`"+` runs).
Past runs, and the notes written beside them: [benchmarks-archive.md](benchmarks-archive.md).
`,
		time.Now().UTC().Format("2006-01-02"), r.machine,
		cfg.publishers, r.rawHTTP,
		r.sqlite.delivered, r.sqlite.events, r.sqlite.rawHTTP, verdict(r.sqlite.delivered >= 5000),
		r.postgres.delivered, r.postgres.events, r.postgres.rawHTTP, verdict(r.postgres.delivered >= 2500),
		cfg.lagDeliveries, r.lagRate, r.lagP50.Round(time.Millisecond/10), r.lagP99.Round(time.Millisecond/10), r.lagMax.Round(time.Millisecond), verdict(r.lagP99 < 250*time.Millisecond),
		cfg.rssDeliveries, float64(r.rssKiB)/1024, float64(r.hwmKiB)/1024, r.rssLedgerMiB, verdict(r.rssKiB < 150*1024),
		cfg.publishers, cfg.duration, r.sqlite.published, r.postgres.published, r.rssInsertTime.Round(time.Second),
		r.sqlite.profile, r.postgres.profile,
	)
	b.WriteString(costSection(cfg, r))
	b.WriteString(r.deliveryAPI.markdown(r.machine))
	b.WriteString(r.breaker.markdown(r.machine))
	b.WriteString(r.filters.markdown(r.machine))
	b.WriteString(r.neighbour.markdown(r.machine))
	b.WriteString(r.schema.markdown(r.machine))
	b.WriteString(r.capacity.markdown(r.machine))
	b.WriteString(r.rest.markdown(r.machine))
	b.WriteString(r.crowd.markdown(r.machine))
	b.WriteString(r.limits.markdown(r.machine))
	b.WriteString(r.apiload.markdown(r.machine))
	b.WriteString(r.tracing.markdown(r.machine))
	return writeFile(cfg.out, b.String())
}
