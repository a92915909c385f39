package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// The capacity step (issue #26): 1, 2 and 3 engine processes (enginehost)
// on one PostgreSQL schema, sharing its work as manager replicas share a
// ledger, at saturation and at a steady 500/s and 1,000/s. For each run:
// throughput, the engines' CPU per event (summed over the replicas), the
// PostgreSQL server's CPU per event, the WAL it wrote per event, and
// whether every event reached the receiver exactly once. From the
// per-event costs, on paper: what one PostgreSQL of 4, 8 and 16 cores can
// carry and how many replicas that needs (docs/operations/capacity.md).
// On the 2-core bench machine the load client, the receiver, the replicas
// and PostgreSQL share the cores: the runs show the shape, not a ceiling.

// capacityHeading starts the step's section of docs/benchmarks.md.
const capacityHeading = "## The capacity of a cluster (issue #26)"

var (
	capacityReplicas = []int{1, 2, 3}
	// capacityRates are the loads of each replica count: 0 is saturation.
	capacityRates = []int{0, 500, 1000}
	// planServerCores are the PostgreSQL servers the plan sizes.
	planServerCores = []int{4, 8, 16}
)

const (
	// planServerHeadroom is the share of a PostgreSQL's cores the plan
	// gives the engine's writes: autovacuum, checkpoints, the delivery
	// API's reads and backups take the rest, and a server run hotter
	// has no room for a burst.
	planServerHeadroom = 0.6
	// planReplicaCores and planReplicaHeadroom size one manager replica:
	// two cores, planned at 70% busy.
	planReplicaCores    = 2.0
	planReplicaHeadroom = 0.7
)

// capacityRun is one run of n replicas at one load.
type capacityRun struct {
	replicas  int
	rate      int // paced events/s; 0 = saturation
	events    int
	delivered float64 // events/s from the first publish to the last receipt
	engineCPU time.Duration
	serverCPU time.Duration
	wal       walPerEvent
	// receipts counts every request the receiver got, duplicates
	// included; attempts is the sum of the replicas' attempts, and
	// perReplica each one's (-1: the replica did not say).
	receipts   int64
	attempts   int
	perReplica []int
	// warmEvents were published before the measured window, to the same
	// replicas (--warmup): their attempts are in the replicas' counts.
	warmEvents int
	// othersActive counts the samples (one a second) in which another
	// client of the server was in a query: the WAL and the background
	// processes' CPU are the server's, not only the engine's.
	othersActive int
	p99          time.Duration
	loadAvg      string
}

// duplicates are the receipts beyond the first of each event.
func (r capacityRun) duplicates() int64 { return r.receipts - int64(r.events) }

// retries are the attempts beyond one per event, the warm-up's events
// counted with the measured ones.
func (r capacityRun) retries() int { return r.attempts - r.events - r.warmEvents }

func (r capacityRun) label() string {
	return fmt.Sprintf("%d replica(s), %s", r.replicas, loadName(r.rate))
}

func loadName(rate int) string {
	if rate == 0 {
		return "saturation"
	}
	return fmt.Sprintf("steady %d/s", rate)
}

type capacityResults struct {
	connections int
	duration    time.Duration
	warmup      time.Duration // before each run, at its load (--warmup)
	// server names the PostgreSQL: its version and address (never the
	// DSN, which may hold a password).
	server string
	runs   []capacityRun
}

func serverName(dsn string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", fmt.Errorf("connect to the capacity step's PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	var version string
	if err := conn.QueryRow(ctx, `SHOW server_version`).Scan(&version); err != nil {
		return "", err
	}
	cc := conn.Config()
	return fmt.Sprintf("PostgreSQL %s at %s:%d", version, cc.Host, cc.Port), nil
}

// walCounters are the server's WAL counters at one moment: pg_stat_wal's
// (PostgreSQL 14+), and the WAL position, which counts the same bytes
// without waiting for backends to report them.
type walCounters struct {
	bytes, records, fpi, lsn int64
}

// walPerEvent is what the server wrote to its WAL per delivered event.
type walPerEvent struct {
	bytes, records, fpi float64
	// lsnBytes is the same from the WAL position, a check on bytes.
	lsnBytes float64
}

func readWAL(ctx context.Context, conn *pgx.Conn) (walCounters, error) {
	var w walCounters
	err := conn.QueryRow(ctx, `SELECT wal_bytes::bigint, wal_records, wal_fpi,
		pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint FROM pg_stat_wal`).Scan(&w.bytes, &w.records, &w.fpi, &w.lsn)
	if err != nil {
		return w, fmt.Errorf("reading pg_stat_wal: %w", err)
	}
	return w, nil
}

// perEvent divides the counters' growth from w0 to w1 by events.
func (w1 walCounters) perEvent(w0 walCounters, events int) walPerEvent {
	if events <= 0 {
		return walPerEvent{}
	}
	n := float64(events)
	return walPerEvent{
		bytes: float64(w1.bytes-w0.bytes) / n, records: float64(w1.records-w0.records) / n,
		fpi: float64(w1.fpi-w0.fpi) / n, lsnBytes: float64(w1.lsn-w0.lsn) / n,
	}
}

// walSince is the WAL written per event since w0, read once the engine's
// backends are gone: a backend reports its WAL to pg_stat_wal at most once
// a second while it works, and for good when it exits.
func walSince(ctx context.Context, dsn string, w0 walCounters, events int) (walPerEvent, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return walPerEvent{}, fmt.Errorf("connect to read the WAL: %w", err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, benchApp).Scan(&n); err != nil {
			return walPerEvent{}, err
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return walPerEvent{}, fmt.Errorf("%d engine connections still open 30s after the engines stopped", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	w1, err := readWAL(ctx, conn)
	if err != nil {
		return walPerEvent{}, err
	}
	return w1.perEvent(w0, events), nil
}

// walNow reads the WAL counters on a connection of its own.
func walNow(ctx context.Context, dsn string) (walCounters, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return walCounters{}, fmt.Errorf("connect to read the WAL: %w", err)
	}
	defer conn.Close(ctx)
	return readWAL(ctx, conn)
}

// countingTracker is the cost steps' tracker that also counts every
// receipt, so that duplicates show.
type countingTracker struct {
	*tracker
	receipts atomic.Int64
}

func startCountingTracker() (*countingTracker, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &countingTracker{tracker: &tracker{url: "http://" + ln.Addr().String() + "/hook", received: make([]atomic.Int64, maxEvents)}}
	c.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		c.receipts.Add(1)
		c.serve(w, req)
	})}
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

func (c *countingTracker) reset() {
	c.tracker.reset(maxEvents)
	c.receipts.Store(0)
}

// replicaSet is n enginehost processes on one ledger.
type replicaSet struct {
	hosts    []*host
	attempts []chan int // each replica's "attempts <n>" line, printed as it stops
	stopped  []int
}

// parseAttempts reads enginehost's last line, "attempts <n>" (-1: it
// could not count them).
func parseAttempts(line string) (int, bool) {
	rest, ok := strings.CutPrefix(line, "attempts ")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(rest))
	if err != nil || n < -1 {
		return 0, false
	}
	return n, true
}

// startReplicas starts n engines one after the other (the first creates
// the schema), each with an instance name of its own.
func startReplicas(bin string, n int, ledgerArgs []string, endpoints string) (*replicaSet, error) {
	s := &replicaSet{}
	for i := range n {
		ch := make(chan int, 1)
		args := append(slices.Clone(ledgerArgs), "--endpoints", endpoints, "--workers", engineWorkers, "--instance", fmt.Sprintf("capacity-%d", i))
		h, err := startHostWatching(bin, func(line string) {
			if a, ok := parseAttempts(line); ok {
				select {
				case ch <- a:
				default:
				}
			}
		}, args...)
		if err != nil {
			s.stop()
			return nil, fmt.Errorf("replica %d: %w", i, err)
		}
		s.hosts, s.attempts = append(s.hosts, h), append(s.attempts, ch)
	}
	return s, nil
}

func (s *replicaSet) urls() []string {
	var urls []string
	for _, h := range s.hosts {
		urls = append(urls, "http://"+h.addr+"/v1/namespaces/bench/events")
	}
	return urls
}

func (s *replicaSet) pids() ([]int, error) {
	var pids []int
	for _, h := range s.hosts {
		pids = append(pids, h.cmd.Process.Pid)
	}
	return pids, nil
}

// stop ends the replicas gracefully, all at once, and returns the
// attempts each made (-1: it did not say within 30 s); once.
func (s *replicaSet) stop() []int {
	if s.stopped != nil {
		return s.stopped
	}
	for _, h := range s.hosts {
		_ = h.cmd.Process.Signal(syscall.SIGTERM)
	}
	s.stopped = make([]int, len(s.hosts))
	for i, h := range s.hosts {
		select {
		case s.stopped[i] = <-s.attempts[i]:
		case <-time.After(30 * time.Second):
			s.stopped[i] = -1
		}
		// The line is read before the wait, which closes the pipe.
		h.once.Do(func() { _ = h.cmd.Wait() })
	}
	return s.stopped
}

// othersActive counts the server's other client sessions in a query now.
func othersActive(ctx context.Context, conn *pgx.Conn) (int, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'
		AND pid <> pg_backend_pid() AND application_name <> $1 AND state <> 'idle'`, benchApp).Scan(&n)
	return n, err
}

// measureCapacity runs n replicas on a fresh schema at rate (0:
// saturation) for cfg.capacityDuration.
func measureCapacity(cfg config, bin string, t *countingTracker, n, rate int) (capacityRun, error) {
	ctx := context.Background()
	r := capacityRun{replicas: n, rate: rate}
	label := fmt.Sprintf("capacity-%dx-%d", n, rate)
	schema := fmt.Sprintf("hk_bench_capacity_%d_%d", n, time.Now().UnixNano())
	defer dropSchema(cfg.postgres, schema)
	eps, err := endpointsFile(os.TempDir(), t.url, 512)
	if err != nil {
		return r, err
	}
	defer os.Remove(eps)
	rs, err := startReplicas(bin, n, []string{"--ledger", engineDSN(cfg.postgres), "--pg-schema", schema}, eps)
	if err != nil {
		return r, err
	}
	defer rs.stop()

	// The replicas' first seconds (connections, prepared statements, a
	// new ledger's first analyses) are a start's cost, not a steady one.
	tg := target{token: token, spread: rs.urls()}
	if r.warmEvents, err = warmUp(cfg, t.tracker, label, tg, rate); err != nil {
		return r, err
	}
	t.reset()
	watch, err := pgx.Connect(ctx, cfg.postgres)
	if err != nil {
		return r, fmt.Errorf("connect to watch the server: %w", err)
	}
	defer watch.Close(ctx)
	engine, err := newCPUMeter(rs.pids)
	if err != nil {
		return r, err
	}
	server, err := newCPUMeter(postgresPIDs(cfg.postgres))
	if err != nil {
		return r, err
	}
	wal0, err := readWAL(ctx, watch)
	if err != nil {
		return r, err
	}
	stopSampling := everySecond(func() {
		_ = server.sample()
		if k, err := othersActive(ctx, watch); err == nil && k > 0 {
			r.othersActive++
		}
	})
	var l *load
	if rate == 0 {
		l = saturate(tg, label, cfg.connections, cfg.capacityDuration)
	} else {
		l = paced(tg, label, rate, cfg.capacityDuration)
	}
	err = l.err()
	if err == nil {
		err = t.waitUnique(int64(l.accepted), 5*time.Minute)
	}
	stopSampling()
	if err != nil {
		return r, fmt.Errorf("%s: %w", label, err)
	}
	engineUsed, err := engine.used()
	if err != nil {
		return r, err
	}
	serverUsed, err := server.used()
	if err != nil {
		return r, err
	}
	r.events = l.accepted
	window := time.Unix(0, t.last.Load()).Sub(l.start)
	r.delivered = float64(l.accepted) / window.Seconds()
	r.engineCPU = engineUsed / time.Duration(l.accepted)
	r.serverCPU = serverUsed / time.Duration(l.accepted)
	r.p99 = l.latencies(t.tracker).total.p99
	r.loadAvg = loadAvg()

	r.perReplica = rs.stop()
	for _, a := range r.perReplica {
		if a < 0 {
			r.attempts = -1
			break
		}
		r.attempts += a
	}
	// Receipts are read after the stop: a duplicate would arrive by then.
	r.receipts = t.receipts.Load()
	if r.wal, err = walSince(ctx, cfg.postgres, wal0, r.events); err != nil {
		return r, err
	}
	fmt.Printf("  %s: %d events, delivered %.0f/s; engines' CPU %s/event, server CPU %s/event; WAL %.0f B/event (position: %.0f B; %.1f records, %.2f full pages); "+
		"p99 %s; receipts %d (duplicates %d), attempts %v (retries %d); other sessions active in %d samples (load %s)\n",
		r.label(), r.events, r.delivered, ms(r.engineCPU), ms(r.serverCPU), r.wal.bytes, r.wal.lsnBytes, r.wal.records, r.wal.fpi,
		round(r.p99), r.receipts, r.duplicates(), r.perReplica, r.retries(), r.othersActive, r.loadAvg)
	return r, nil
}

// runCapacity is the capacity step.
func runCapacity(cfg config, bin string, c *capacityResults) error {
	step(fmt.Sprintf("capacity of a cluster: %v replicas on one PostgreSQL schema", capacityReplicas))
	t, err := startCountingTracker()
	if err != nil {
		return err
	}
	defer t.close()
	c.connections, c.duration, c.warmup = cfg.connections, cfg.capacityDuration, cfg.warmup
	if cfg.capacityPostgres != "" {
		cfg.postgres = cfg.capacityPostgres
	}
	if c.server, err = serverName(cfg.postgres); err != nil {
		return err
	}
	for _, n := range capacityReplicas {
		for _, rate := range capacityRates {
			r, err := measureCapacity(cfg, bin, t, n, rate)
			if err != nil {
				return err
			}
			c.runs = append(c.runs, r)
		}
	}
	for _, in := range c.inputs() {
		fmt.Printf("  plan from %s:\n", in.source)
		for _, row := range plan(in, planServerCores) {
			fmt.Printf("    %d cores: %.0f events/s, WAL %.1f MB/s, %d replicas\n", row.serverCores, row.rate, row.walMBps, row.replicas)
		}
	}
	return nil
}

// planInputs are the per-event costs a plan starts from.
type planInputs struct {
	source               string
	serverCPU, engineCPU time.Duration
	walBytes             float64
}

// worstAt takes, over the runs at one load, the largest of each cost, so
// that a plan from them holds whatever the replica count.
func worstAt(runs []capacityRun, rate int) planInputs {
	in := planInputs{source: loadName(rate)}
	for _, r := range runs {
		if r.rate != rate {
			continue
		}
		in.serverCPU = max(in.serverCPU, r.serverCPU)
		in.engineCPU = max(in.engineCPU, r.engineCPU)
		in.walBytes = max(in.walBytes, r.wal.bytes)
	}
	return in
}

// inputs are the plan's inputs: the costs at saturation, where every
// transaction carries many events (replicas near their planned load), and
// at 1,000/s, where transactions carry few (a cluster far from it).
func (c *capacityResults) inputs() []planInputs {
	return []planInputs{worstAt(c.runs, 0), worstAt(c.runs, 1000)}
}

// planRow is what one PostgreSQL of serverCores cores carries.
type planRow struct {
	serverCores int
	rate        float64 // events/s
	walMBps     float64
	replicas    int
}

// plan derives, for each server size, the rate its usable cores carry
// (cores × planServerHeadroom / server CPU per event), the WAL that rate
// writes, and the replicas it needs (rate × engine CPU per event over
// planReplicaCores × planReplicaHeadroom, rounded up).
func plan(in planInputs, serverCores []int) []planRow {
	var rows []planRow
	if in.serverCPU <= 0 {
		return rows
	}
	for _, cores := range serverCores {
		rate := float64(cores) * planServerHeadroom / in.serverCPU.Seconds()
		rows = append(rows, planRow{
			serverCores: cores,
			rate:        rate,
			walMBps:     rate * in.walBytes / 1e6,
			replicas:    int(math.Ceil(rate * in.engineCPU.Seconds() / (planReplicaCores * planReplicaHeadroom))),
		})
	}
	return rows
}

// exactlyOnce says whether a run's events each reached the receiver once.
func (r capacityRun) exactlyOnce() string {
	switch {
	case r.duplicates() == 0:
		return "yes"
	case r.retries() >= int(r.duplicates()):
		return fmt.Sprintf("%d duplicates, from %d retries", r.duplicates(), r.retries())
	}
	return fmt.Sprintf("**%d duplicates** with %d retries", r.duplicates(), r.retries())
}

// markdown is the step's section of docs/benchmarks.md.
func (c *capacityResults) markdown(machine string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("\n%s\n\n", capacityHeading)
	p("Written by `go run ./test/bench --steps capacity` (part of `make bench`) on %s.\n", time.Now().UTC().Format("2006-01-02"))
	p("Machine: %s. The load client, the receiver, the replicas and\n", machine)
	p("PostgreSQL share these cores, so the figures show the shape, not a ceiling.\n\n")
	p("1, 2 and 3 engine processes (enginehost, the manager's defaults: %s workers) on one fresh\n", engineWorkers)
	p("schema per run of %s, sharing its work as manager replicas do; the load client (%d\n", c.server, c.connections)
	p("connections at saturation, open-loop when paced) sends its publishes to the replicas in turn,\n")
	p("%s per run, 1 KiB events", c.duration)
	if c.warmup > 0 {
		p(", after %s of the same load to the same\n", c.warmup)
		p("replicas (their first seconds are a start's cost: connections, prepared statements, a new\n")
		p("ledger's first analyses; nothing below counts them but the attempts)")
	}
	p(". Engine CPU is summed over the replicas; server CPU is the\n")
	p("postmaster's children serving the engines plus its background processes, as in \"Cost per event\";\n")
	p("both over the window from the first publish to the last receipt, per delivered event. WAL is\n")
	p("`pg_stat_wal.wal_bytes` from before the load to after the engines stopped (their backends report\n")
	p("it when they exit), server-wide: other databases' writes in the window count too, which the\n")
	p("column \"other sessions\" flags (seconds in which another client was in a query). The receiver\n")
	p("counts every request: duplicates are receipts beyond one per event; retries are the replicas'\n")
	p("attempts beyond one per event (a retry after a timeout may duplicate; a second claim would\n")
	p("duplicate without one).\n\n")
	p("| replicas | load | delivered events/s | engines' CPU per event | server CPU per event | WAL per event | p99 publish → receipt | exactly once | other sessions | load average |\n")
	p("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range c.runs {
		load := loadName(r.rate)
		if r.rate > 0 && r.delivered < 0.95*float64(r.rate) {
			load += " (fell behind)"
		}
		p("| %d | %s | %.0f | %s | %s | %.0f B (%.2f full pages) | %s | %s | %d | %s |\n", r.replicas, load, r.delivered,
			ms(r.engineCPU), ms(r.serverCPU), r.wal.bytes, r.wal.fpi, round(r.p99), r.exactlyOnce(), r.othersActive, r.loadAvg)
	}
	p("\nOn paper (docs/operations/capacity.md explains it): events/s = cores × %.0f%% / server CPU per\n", 100*planServerHeadroom)
	p("event; WAL = that rate × WAL per event; replicas = ⌈rate × engine CPU per event / (%.0f cores × %.0f%%)⌉.\n", planReplicaCores, 100*planReplicaHeadroom)
	p("Each input is the largest over the replica counts at that load:\n\n")
	ins := c.inputs()
	for _, in := range ins {
		p("- costs at %s: server %s, engines %s, WAL %.0f B per event\n", in.source, ms(in.serverCPU), ms(in.engineCPU), in.walBytes)
	}
	p("\n| PostgreSQL cores |")
	for _, in := range ins {
		p(" events/s, WAL and replicas of %.0f cores from the costs at %s |", planReplicaCores, in.source)
	}
	p("\n|---|%s\n", strings.Repeat("---|", len(ins)))
	plans := make([][]planRow, len(ins))
	for i, in := range ins {
		plans[i] = plan(in, planServerCores)
	}
	for j, cores := range planServerCores {
		p("| %d |", cores)
		for i := range ins {
			if j < len(plans[i]) {
				row := plans[i][j]
				p(" %.0f/s, %.1f MB/s, %d |", row.rate, row.walMBps, row.replicas)
			} else {
				p(" |")
			}
		}
		p("\n")
	}
	return b.String()
}
