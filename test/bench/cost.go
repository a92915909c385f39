package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Cost per event (issue #15): the pass-through relay as the ceiling, the
// engine's throughput as a share of it, CPU per delivered event from
// /proc at saturation and at steady paced rates, and publish-to-receipt
// latency split into publish and delivery.

// engineWorkers and the engine's default idle wait are the manager's
// defaults (cmd/main.go), so that the figures are the manager's.
const engineWorkers = "128"

// run is one measured load run.
type costRun struct {
	label     string
	rate      int // paced events/s; 0 = saturation
	events    int
	published float64       // events/s answered by the API
	delivered float64       // events/s from the first publish to the last receipt
	window    time.Duration // first publish to last receipt
	engineCPU time.Duration // per delivered event
	serverCPU time.Duration // per delivered event, PostgreSQL server processes
	wal       walPerEvent   // PostgreSQL's, server-wide (capacity.go)
	userShare float64       // of the engine's CPU, user time
	lat       latencies
	loadAvg   string
	profile   string // pprof file
	breakdown string
	topFuncs  string
}

type storeCost struct {
	name                      string
	saturation, at500, at1000 costRun
}

// costRound is one round of the cost step: the relay, then each store,
// all in the same minutes, so that their ratios share the machine's load.
type costRound struct {
	// relay is the pass-through relay at saturation, relay500 and
	// relay1000 at the steady rates: what the two HTTP legs and the
	// signature cost per event at those rates, with no storage at all.
	relay, relay500, relay1000 costRun
	sqlite, postgres           storeCost
	// next is the relay measured after the round's stores: the next
	// round's, or the step's closing one after the last round. A round's
	// ratios are taken against the mean of the relay before and after its
	// stores (relayRate, relayCPU): the relay's own cost per event moved
	// by ±13% between rounds, as much as the engine's, and the mean of two
	// runs narrows that noise in the denominator (by about √2, the runs
	// varying independently).
	next *costRound
}

// relayAt is the round's relay run at a steady rate (0: saturation).
func (r *costRound) relayAt(rate int) costRun {
	switch rate {
	case 500:
		return r.relay500
	case 1000:
		return r.relay1000
	}
	return r.relay
}

// relayRate is the relay's saturation throughput around the round's
// stores: the mean of the run before them and the run after.
func (r *costRound) relayRate() float64 {
	if r.next == nil {
		return r.relay.delivered
	}
	return (r.relay.delivered + r.next.relay.delivered) / 2
}

// relayCPU is the relay's CPU per event at rate around the round's
// stores, as relayRate.
func (r *costRound) relayCPU(rate int) time.Duration {
	if r.next == nil {
		return r.relayAt(rate).engineCPU
	}
	return (r.relayAt(rate).engineCPU + r.next.relayAt(rate).engineCPU) / 2
}

// store is the round's runs of the named store.
func (r *costRound) store(name string) storeCost {
	if name == "postgres" {
		return r.postgres
	}
	return r.sqlite
}

// steadyRates are the paced rates of the cost step, each metered on the
// relay as on the engine.
var steadyRates = []int{500, 1000}

type costResults struct {
	connections int
	duration    time.Duration
	warmup      time.Duration
	// rounds alternate relay, SQLite, PostgreSQL, relay, ... (--cost-rounds):
	// the floors are judged on the medians of the rounds, the spread
	// printed beside them, as the noise of a shared machine is as large
	// as the gaps the floors measure.
	rounds []costRound
}

// ledgerFor returns a fresh ledger for one engine process: a new SQLite
// file, or a new PostgreSQL schema. release ends it once its run is over:
// a finished run's tables would otherwise stay with the server (autovacuum
// of a run's 60,000 events landed in the next run's window, as its tail).
type ledgerFor func(label string) (args []string, serverPIDs func() ([]int, error), release func())

func sqliteLedgers(work string) ledgerFor {
	return func(label string) ([]string, func() ([]int, error), func()) {
		path := filepath.Join(work, label+".db")
		return []string{"--ledger", "sqlite://" + path}, nil, func() {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(path + suffix)
			}
		}
	}
}

// postgresLedgers names each schema in schemas too, for the bench to drop
// what a failed run left.
func postgresLedgers(dsn string, schemas *[]string) ledgerFor {
	return func(label string) ([]string, func() ([]int, error), func()) {
		schema := fmt.Sprintf("hk_bench_%s_%d", strings.ReplaceAll(label, "-", "_"), time.Now().UnixNano())
		*schemas = append(*schemas, schema)
		return []string{"--ledger", engineDSN(dsn), "--pg-schema", schema}, postgresPIDs(dsn), func() { dropSchema(dsn, schema) }
	}
}

// measureRelay saturates the pass-through relay with the same client, and
// then meters its CPU at the steady rates, as the engine's.
func measureRelay(cfg config, t *tracker, round int, into *costRound) error {
	rl, err := startRelay(t.url)
	if err != nil {
		return err
	}
	defer rl.stop()
	tg := target{url: "http://" + rl.addr + "/hook", token: token}
	if _, err := warmUp(cfg, t, "relay", tg, 0); err != nil {
		return err
	}
	l := saturate(tg, "relay", cfg.connections, cfg.costDuration)
	if err := l.err(); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	sat := costRun{label: "relay", events: l.accepted, loadAvg: loadAvg(), lat: l.latencies(t)}
	sat.published = float64(l.accepted) / l.end.Sub(l.start).Seconds()
	sat.delivered = sat.published
	sat.window = l.end.Sub(l.start)
	into.relay = sat
	fmt.Printf("  relay: %.0f events/s (load %s)\n", sat.delivered, sat.loadAvg)
	for _, r := range []struct {
		rate int
		into *costRun
	}{{500, &into.relay500}, {1000, &into.relay1000}} {
		label := roundLabel(fmt.Sprintf("relay-%d", r.rate), round)
		if _, err := warmUp(cfg, t, label, tg, r.rate); err != nil {
			return err
		}
		if *r.into, err = drive(cfg, t, label, rl.cmd.Process.Pid, tg, nil, r.rate); err != nil {
			return err
		}
	}
	return nil
}

// roundLabel names a run of a round after the first: its profile is kept
// beside the first round's.
func roundLabel(label string, round int) string {
	if round == 0 {
		return label
	}
	return fmt.Sprintf("%s-r%d", label, round+1)
}

// measureEngine starts an engine on a ledger and drives it at rate
// (0: saturation) for cfg.costDuration, metering its CPU (and the PostgreSQL
// server's) over the window from the first publish to the last receipt.
func measureEngine(cfg config, bin string, t *tracker, label string, ledgerArgs []string, serverPIDs func() ([]int, error), rate int) (costRun, error) {
	eps, err := endpointsFile(os.TempDir(), t.url, 512)
	if err != nil {
		return costRun{}, err
	}
	defer os.Remove(eps)
	return measureEngineOn(cfg, bin, t, label, eps, ledgerArgs, serverPIDs, rate)
}

// measureEngineOn is measureEngine with the endpoints of the file eps.
func measureEngineOn(cfg config, bin string, t *tracker, label, eps string, ledgerArgs []string, serverPIDs func() ([]int, error), rate int) (costRun, error) {
	profile := filepath.Join(cfg.profileDir, label+".pprof")
	args := append(slices.Clone(ledgerArgs), "--endpoints", eps, "--workers", engineWorkers, "--cpuprofile", profile)
	if listed(cfg.traceRuns, label) {
		// A quarter into the measured window, which follows the
		// process's start and the warm-up.
		args = append(args, "--trace", filepath.Join(cfg.profileDir, label+".trace"),
			"--trace-after", (cfg.warmup + cfg.costDuration/4).String())
	}
	h, err := startHost(bin, args...)
	if err != nil {
		return costRun{}, err
	}
	defer h.stop()
	tg := target{url: "http://" + h.addr + "/v1/namespaces/bench/events", token: token}
	if _, err := warmUp(cfg, t, label, tg, rate); err != nil {
		return costRun{}, err
	}
	var wal0 walCounters
	if serverPIDs != nil {
		if wal0, err = walNow(context.Background(), cfg.postgres); err != nil {
			return costRun{}, err
		}
	}
	r, err := drive(cfg, t, label, h.cmd.Process.Pid, tg, serverPIDs, rate)
	if err != nil {
		return r, err
	}
	h.stop()
	if serverPIDs != nil {
		if r.wal, err = walSince(context.Background(), cfg.postgres, wal0, r.events); err != nil {
			return r, err
		}
		fmt.Printf("  %s: WAL %.0f B/event\n", label, r.wal.bytes)
	}
	r.profile = profile
	r.breakdown = breakdown(profile)
	r.topFuncs = topFunctions(profile, 15)
	return r, nil
}

// drive publishes to tg at rate (0: saturation) for cfg.costDuration and
// meters the CPU of the process pid (and of serverPIDs) over the window
// from the first publish to the last receipt. The tracker must be reset
// (warmUp leaves it so).
func drive(cfg config, t *tracker, label string, pid int, tg target, serverPIDs func() ([]int, error), rate int) (costRun, error) {
	engine, err := newCPUMeter(onePID(pid))
	if err != nil {
		return costRun{}, err
	}
	user0, _ := procUser(pid)
	var server *cpuMeter
	if serverPIDs != nil {
		if server, err = newCPUMeter(serverPIDs); err != nil {
			return costRun{}, err
		}
	}
	var l *load
	stopSampling := everySecond(func() {
		if server != nil {
			_ = server.sample()
		}
	})
	if rate == 0 {
		l = saturate(tg, label, cfg.connections, cfg.costDuration)
	} else {
		l = paced(tg, label, rate, cfg.costDuration)
	}
	if err := l.err(); err != nil {
		stopSampling()
		return costRun{}, fmt.Errorf("%s: %w", label, err)
	}
	if err := t.waitUnique(int64(l.accepted), 5*time.Minute); err != nil {
		stopSampling()
		return costRun{}, fmt.Errorf("%s: %w", label, err)
	}
	stopSampling()
	engineUsed, err := engine.used()
	if err != nil {
		return costRun{}, err
	}
	user1, _ := procUser(pid)
	r := costRun{label: label, rate: rate, events: l.accepted, loadAvg: loadAvg(), lat: l.latencies(t)}
	if err := l.writeTimeline(filepath.Join(cfg.profileDir, label+".latency.tsv"), t); err != nil {
		return costRun{}, err
	}
	r.window = time.Unix(0, t.last.Load()).Sub(l.start)
	r.published = float64(l.accepted) / l.end.Sub(l.start).Seconds()
	r.delivered = float64(l.accepted) / r.window.Seconds()
	r.engineCPU = engineUsed / time.Duration(l.accepted)
	if engineUsed > 0 {
		r.userShare = float64(user1-user0) / float64(engineUsed)
	}
	if server != nil {
		used, err := server.used()
		if err != nil {
			return costRun{}, err
		}
		r.serverCPU = used / time.Duration(l.accepted)
	}
	fmt.Printf("  %s: %d events, delivered %.0f/s (published %.0f/s); engine CPU %s/event (user %.0f%%), server CPU %s/event; latency %s; publish %s; delivery %s (load %s)\n",
		label, r.events, r.delivered, r.published, r.engineCPU, 100*r.userShare, r.serverCPU, r.lat.total, r.lat.publish, r.lat.delivery, r.loadAvg)
	return r, nil
}

// warmUp publishes to tg at rate (0: saturation) for cfg.warmup, waits
// for every receipt, leaves the tracker reset for the measured run, and
// says how many events it published.
func warmUp(cfg config, t *tracker, label string, tg target, rate int) (int, error) {
	t.reset(maxEvents)
	if cfg.warmup <= 0 {
		return 0, nil
	}
	var l *load
	if rate == 0 {
		l = saturate(tg, label+"-warm", cfg.connections, cfg.warmup)
	} else {
		l = paced(tg, label+"-warm", rate, cfg.warmup)
	}
	if err := l.err(); err != nil {
		return 0, fmt.Errorf("%s, warming up: %w", label, err)
	}
	if err := t.waitUnique(int64(l.accepted), 5*time.Minute); err != nil {
		return 0, fmt.Errorf("%s, warming up: %w", label, err)
	}
	t.reset(maxEvents)
	return l.accepted, nil
}

// procUser is a process's user CPU time alone (utime).
func procUser(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	var u int64
	_, err = fmt.Sscan(f[11], &u)
	return time.Duration(u) * clockTick, err
}

// topFunctions lists the functions with the most flat CPU time.
func topFunctions(profile string, n int) string {
	out, err := exec.Command("go", "tool", "pprof", "-top", fmt.Sprintf("-nodecount=%d", n), profile).Output()
	if err != nil {
		return ""
	}
	return string(out)
}

// measureStore runs the saturation and paced runs of one store.
func measureStore(cfg config, bin string, t *tracker, ledgers ledgerFor, store string, round int) (storeCost, error) {
	c := storeCost{name: store}
	for _, r := range []struct {
		rate int
		into *costRun
	}{{0, &c.saturation}, {500, &c.at500}, {1000, &c.at1000}} {
		label := store + "-saturation"
		if r.rate > 0 {
			label = fmt.Sprintf("%s-%d", store, r.rate)
		}
		label = roundLabel(label, round)
		args, serverPIDs, release := ledgers(label)
		var err error
		*r.into, err = measureEngine(cfg, bin, t, label, args, serverPIDs, r.rate)
		release()
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

// runCost is the cost step: --cost-rounds rounds of the relay, then each
// store.
func runCost(cfg config, bin, work string, c *costResults) error {
	t, err := startTracker()
	if err != nil {
		return err
	}
	defer t.close()
	c.connections, c.duration, c.warmup = cfg.connections, cfg.costDuration, cfg.warmup
	var schemas []string
	defer func() {
		for _, s := range schemas {
			dropSchema(cfg.postgres, s)
		}
	}()
	c.rounds = make([]costRound, max(cfg.costRounds, 1))
	for i := range c.rounds {
		r := &c.rounds[i]
		step(fmt.Sprintf("round %d of %d: pass-through relay, %d connections", i+1, len(c.rounds), cfg.connections))
		if err := measureRelay(cfg, t, i, r); err != nil {
			return err
		}
		if i > 0 {
			c.rounds[i-1].next = r
			printRound(i-1, &c.rounds[i-1])
		}
		if listed(cfg.costStores, "sqlite") {
			step(fmt.Sprintf("round %d of %d: cost per event on SQLite", i+1, len(c.rounds)))
			if r.sqlite, err = measureStore(cfg, bin, t, sqliteLedgers(work), "sqlite", i); err != nil {
				return err
			}
		}
		if listed(cfg.costStores, "postgres") {
			step(fmt.Sprintf("round %d of %d: cost per event on PostgreSQL", i+1, len(c.rounds)))
			if r.postgres, err = measureStore(cfg, bin, t, postgresLedgers(cfg.postgres, &schemas), "postgres", i); err != nil {
				return err
			}
		}
	}
	step("closing pass-through relay, after the last round's stores")
	closing := &costRound{}
	if err := measureRelay(cfg, t, len(c.rounds), closing); err != nil {
		return err
	}
	last := len(c.rounds) - 1
	c.rounds[last].next = closing
	printRound(last, &c.rounds[last])
	return nil
}

// printRound prints the ratios of one round to the relay around it.
func printRound(i int, r *costRound) {
	for _, s := range []storeCost{r.sqlite, r.postgres} {
		if s.name == "" {
			continue
		}
		fmt.Printf("  round %d, %s: saturation %s of the relay; CPU per event %.2f× the relay's at 500/s, %.2f× at 1000/s; p99 at 1000/s %s\n",
			i+1, s.name, pct(s.saturation.delivered, r.relayRate()),
			cpuRatio(s.at500.engineCPU, r.relayCPU(500)), cpuRatio(s.at1000.engineCPU, r.relayCPU(1000)), round(s.at1000.lat.total.p99))
	}
}

// cpuRatio is a/b, 0 when b is.
func cpuRatio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// spread is the median of xs and its range, each of xs from one round.
type spread struct{ median, lo, hi float64 }

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{median: m, lo: s[0], hi: s[len(s)-1]}
}

// over collects f of every round.
func (c *costResults) over(f func(r *costRound) float64) spread {
	xs := make([]float64, 0, len(c.rounds))
	for i := range c.rounds {
		xs = append(xs, f(&c.rounds[i]))
	}
	return spreadOf(xs)
}

// format prints the median and, with more than one round, the range.
func (s spread) format(format string, rounds int) string {
	if rounds <= 1 {
		return fmt.Sprintf(format, s.median)
	}
	return fmt.Sprintf(format+" ("+format+"–"+format+")", s.median, s.lo, s.hi)
}
