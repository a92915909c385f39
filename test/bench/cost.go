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

type costResults struct {
	connections int
	duration    time.Duration
	relay       costRun
	// relay500 is the relay at a steady 500/s: what the two HTTP legs and
	// the signature cost per event at that rate, with no storage at all.
	relay500 costRun
	sqlite   storeCost
	postgres storeCost
}

// ledgerFor returns a fresh ledger for one engine process: a new SQLite
// file, or a new PostgreSQL schema (dropped at the end of the bench).
type ledgerFor func(label string) (args []string, serverPIDs func() ([]int, error))

func sqliteLedgers(work string) ledgerFor {
	return func(label string) ([]string, func() ([]int, error)) {
		return []string{"--ledger", "sqlite://" + filepath.Join(work, label+".db")}, nil
	}
}

func postgresLedgers(dsn string, schemas *[]string) ledgerFor {
	return func(label string) ([]string, func() ([]int, error)) {
		schema := fmt.Sprintf("hk_bench_%s_%d", strings.ReplaceAll(label, "-", "_"), time.Now().UnixNano())
		*schemas = append(*schemas, schema)
		return []string{"--ledger", engineDSN(dsn), "--pg-schema", schema}, postgresPIDs(dsn)
	}
}

// measureRelay saturates the pass-through relay with the same client, and
// then meters its CPU at a steady 500/s, as the engine's.
func measureRelay(cfg config, t *tracker) (sat, at500 costRun, _ error) {
	rl, err := startRelay(t.url)
	if err != nil {
		return costRun{}, costRun{}, err
	}
	defer rl.stop()
	t.reset(maxEvents)
	tg := target{url: "http://" + rl.addr + "/hook", token: token}
	l := saturate(tg, "relay", cfg.connections, cfg.costDuration)
	if err := l.err(); err != nil {
		return costRun{}, costRun{}, fmt.Errorf("relay: %w", err)
	}
	sat = costRun{label: "relay", events: l.accepted, loadAvg: loadAvg(), lat: l.latencies(t)}
	sat.published = float64(l.accepted) / l.end.Sub(l.start).Seconds()
	sat.delivered = sat.published
	sat.window = l.end.Sub(l.start)
	fmt.Printf("  relay: %.0f events/s (load %s)\n", sat.delivered, sat.loadAvg)
	at500, err = drive(cfg, t, "relay-500", rl.cmd.Process.Pid, tg, nil, 500)
	return sat, at500, err
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
	profile := filepath.Join(cfg.profileDir, label+".pprof")
	args := append(slices.Clone(ledgerArgs), "--endpoints", eps, "--workers", engineWorkers, "--cpuprofile", profile)
	h, err := startHost(bin, args...)
	if err != nil {
		return costRun{}, err
	}
	defer h.stop()
	var wal0 walCounters
	if serverPIDs != nil {
		if wal0, err = walNow(context.Background(), cfg.postgres); err != nil {
			return costRun{}, err
		}
	}
	tg := target{url: "http://" + h.addr + "/v1/namespaces/bench/events", token: token}
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
// from the first publish to the last receipt.
func drive(cfg config, t *tracker, label string, pid int, tg target, serverPIDs func() ([]int, error), rate int) (costRun, error) {
	t.reset(maxEvents)
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
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // backends are sampled while they run (see cpuMeter)
		defer close(sampled)
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(time.Second):
				if server != nil {
					_ = server.sample()
				}
			}
		}
	}()
	if rate == 0 {
		l = saturate(tg, label, cfg.connections, cfg.costDuration)
	} else {
		l = paced(tg, label, rate, cfg.costDuration)
	}
	if err := l.err(); err != nil {
		close(stopSampling)
		return costRun{}, fmt.Errorf("%s: %w", label, err)
	}
	if err := t.waitUnique(int64(l.accepted), 5*time.Minute); err != nil {
		close(stopSampling)
		return costRun{}, fmt.Errorf("%s: %w", label, err)
	}
	close(stopSampling)
	<-sampled
	engineUsed, err := engine.used()
	if err != nil {
		return costRun{}, err
	}
	user1, _ := procUser(pid)
	r := costRun{label: label, rate: rate, events: l.accepted, loadAvg: loadAvg(), lat: l.latencies(t)}
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
func measureStore(cfg config, bin string, t *tracker, ledgers ledgerFor, store string) (storeCost, error) {
	c := storeCost{name: store}
	for _, r := range []struct {
		rate int
		into *costRun
	}{{0, &c.saturation}, {500, &c.at500}, {1000, &c.at1000}} {
		label := store + "-saturation"
		if r.rate > 0 {
			label = fmt.Sprintf("%s-%d", store, r.rate)
		}
		args, serverPIDs := ledgers(label)
		var err error
		if *r.into, err = measureEngine(cfg, bin, t, label, args, serverPIDs, r.rate); err != nil {
			return c, err
		}
	}
	return c, nil
}

// runCost is the cost step: the relay, then each store.
func runCost(cfg config, bin, work string, c *costResults) error {
	t, err := startTracker()
	if err != nil {
		return err
	}
	defer t.close()
	c.connections, c.duration = cfg.connections, cfg.costDuration
	step(fmt.Sprintf("pass-through relay, %d connections", cfg.connections))
	if c.relay, c.relay500, err = measureRelay(cfg, t); err != nil {
		return err
	}
	if listed(cfg.costStores, "sqlite") {
		step("cost per event on SQLite")
		if c.sqlite, err = measureStore(cfg, bin, t, sqliteLedgers(work), "sqlite"); err != nil {
			return err
		}
	}
	if !listed(cfg.costStores, "postgres") {
		return nil
	}
	step("cost per event on PostgreSQL")
	var schemas []string
	defer func() {
		for _, s := range schemas {
			dropSchema(cfg.postgres, s)
		}
	}()
	if c.postgres, err = measureStore(cfg, bin, t, postgresLedgers(cfg.postgres, &schemas), "postgres"); err != nil {
		return err
	}
	return nil
}
