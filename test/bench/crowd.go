package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// Events among many endpoints (issue #26): what an event costs must not
// grow with the endpoints registered beside the one it goes to. The same
// enginehost as the cost step publishes to one namespace at a steady rate
// and at saturation, once with its endpoint alone and once with many more
// endpoints registered in other namespaces (the default in-flight limit
// of 10, as WebhookEndpoints get when they do not set one), which match
// none of the events: whatever the second run spends more is spent on the
// endpoints that receive nothing.

// crowdHeading starts the step's section of docs/benchmarks.md.
const crowdHeading = "## Events among many endpoints (issue #26)"

// crowdFloor is the most an event may cost among the crowd, as a ratio to
// what it costs alone: the noise of the machine between runs, no more.
const crowdFloor = 1.15

// crowdMaxInFlight is the crowd's in-flight limit: the WebhookEndpoint's
// default (api/v1alpha1).
const crowdMaxInFlight = 10

type crowdConfig struct {
	endpoints, namespaces, rounds int
	duration                      time.Duration
	stores                        string
}

func (c *crowdConfig) bindFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.endpoints, "crowd-endpoints", 10_000, "endpoints registered beside the published one in the crowd step")
	fs.IntVar(&c.namespaces, "crowd-namespaces", 40, "namespaces the crowd step's endpoints are spread over")
	fs.IntVar(&c.rounds, "crowd-rounds", 2, "alternated rounds of the crowd step (alone, crowd; then crowd, alone; ...)")
	fs.DurationVar(&c.duration, "crowd-duration", 15*time.Second, "publishing time of each run of the crowd step")
	fs.StringVar(&c.stores, "crowd-stores", bothStores, "stores the crowd step runs on (one alone: figures are printed, not written)")
}

// crowdRun is one store under one load, alone and among the crowd, over
// the rounds.
type crowdRun struct {
	store        string
	rate         int // 0: saturation
	alone, crowd []costRun
}

type crowdResults struct {
	endpoints, namespaces int
	duration              time.Duration
	runs                  []crowdRun
}

// crowdEndpointsFile writes the cost step's endpoint (namespace bench,
// to the receiver at url) and, when crowd, cc.endpoints more in other
// namespaces with the default in-flight limit.
func crowdEndpointsFile(dir, url string, cc crowdConfig, crowd bool) (string, error) {
	secret, err := signing.GenerateSecret()
	if err != nil {
		return "", err
	}
	ep := func(ns, name string, maxInFlight int) map[string]any {
		return map[string]any{
			"namespace": ns, "name": name, "url": url, "eventTypes": []string{"*"},
			"secret": string(secret.Reveal()), "maxInFlight": maxInFlight, "maxAttempts": 10,
			"delay": "1s", "timeout": "5s",
		}
	}
	eps := []map[string]any{ep("bench", "receiver", 512)}
	if crowd {
		for i := range cc.endpoints {
			eps = append(eps, ep(fmt.Sprintf("crowd-%02d", i%cc.namespaces), fmt.Sprintf("ep-%05d", i), crowdMaxInFlight))
		}
	}
	data, err := json.Marshal(eps)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("endpoints-crowd-%t-%d.json", crowd, time.Now().UnixNano()))
	return path, os.WriteFile(path, data, 0o600)
}

// runCrowd is the crowd step: on each store, at 500/s and at saturation,
// the engine alone and among the crowd, alternated over the rounds.
func runCrowd(cfg config, bin, work string, c *crowdResults) error {
	cc := cfg.crowd
	t, err := startTracker()
	if err != nil {
		return err
	}
	defer t.close()
	c.endpoints, c.namespaces, c.duration = cc.endpoints, cc.namespaces, cc.duration
	files := map[bool]string{}
	for _, crowd := range []bool{false, true} {
		if files[crowd], err = crowdEndpointsFile(work, t.url, cc, crowd); err != nil {
			return err
		}
	}
	var schemas []string
	defer func() {
		for _, s := range schemas {
			dropSchema(cfg.postgres, s)
		}
	}()
	run := cfg
	run.costDuration = cc.duration
	for _, store := range []string{"sqlite", "postgres"} {
		if !listed(cc.stores, store) {
			continue
		}
		ledgers := sqliteLedgers(work)
		if store == "postgres" {
			ledgers = postgresLedgers(cfg.postgres, &schemas)
		}
		for _, rate := range []int{500, 0} {
			cr := crowdRun{store: store, rate: rate}
			step(fmt.Sprintf("crowd: %s, %s, alone and among %d endpoints", store, loadName(rate), cc.endpoints))
			for round := range max(cc.rounds, 1) {
				// Alternated: the second of a pair may run on a warmer
				// (or busier) machine, whichever it is.
				order := []bool{false, true}
				if round%2 == 1 {
					order = []bool{true, false}
				}
				for _, crowd := range order {
					label := crowdLabel(store, rate, crowd, round)
					args, serverPIDs, release := ledgers(label)
					r, err := measureEngineOn(run, bin, t, label, files[crowd], args, serverPIDs, rate)
					release()
					if err != nil {
						return err
					}
					if crowd {
						cr.crowd = append(cr.crowd, r)
					} else {
						cr.alone = append(cr.alone, r)
					}
				}
			}
			c.runs = append(c.runs, cr)
			fmt.Printf("  %s, %s: CPU per event among the crowd %.2f× alone\n", store, loadName(rate), cr.ratio().median)
		}
	}
	return nil
}

// crowdLabel names a run (and its profile), short because it also names
// a PostgreSQL schema (postgresLedgers), at most 63 bytes.
func crowdLabel(store string, rate int, crowd bool, round int) string {
	load, who := fmt.Sprint(rate), "alone"
	if rate == 0 {
		load = "sat"
	}
	if crowd {
		who = "crowd"
	}
	return roundLabel(fmt.Sprintf("crowd-%s-%s-%s", store, load, who), round)
}

// cpu is the engine's CPU per event plus the PostgreSQL server's.
func (r *costRun) cpu() time.Duration { return r.engineCPU + r.serverCPU }

// medianCPU is the median over runs of their CPU per event.
func medianCPU(runs []costRun) spread {
	xs := make([]float64, len(runs))
	for i := range runs {
		xs[i] = float64(runs[i].cpu())
	}
	return spreadOf(xs)
}

// ratio is the crowd's CPU per event over the alone's, round by round.
func (r *crowdRun) ratio() spread {
	var xs []float64
	for i := range min(len(r.alone), len(r.crowd)) {
		xs = append(xs, cpuRatio(r.crowd[i].cpu(), r.alone[i].cpu()))
	}
	return spreadOf(xs)
}

// writeCrowd writes the step's section when it ran alone on both stores,
// and prints it otherwise.
func writeCrowd(cfg config, r *results) error {
	return writeBothStores(cfg.out, "crowd", cfg.crowd.stores, crowdHeading, r.crowd.markdown(r.machine))
}

func (c *crowdResults) markdown(machine string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("\n%s\n\n", crowdHeading)
	p("Written by `go run ./test/bench --steps crowd` (part of `make bench`) on %s. Machine: %s.\n\n", time.Now().UTC().Format("2006-01-02"), machine)
	p("The cost step's enginehost and load client publish to one endpoint for %s per run, once\n", c.duration)
	p("with that endpoint alone and once with %d more registered in %d other namespaces (in-flight\n", c.endpoints, c.namespaces)
	p("limit %d, the WebhookEndpoint's default), which no event goes to. CPU per event is the\n", crowdMaxInFlight)
	p("engine's plus, on PostgreSQL, the server's, over the window from the first publish to the\n")
	p("last receipt; median (min–max) of the alternated rounds, and the ratio taken round by round.\n\n")
	p("| store | load | CPU per event, alone | among %d endpoints | ratio | floor ≤ %.2f× | | p99 alone / among them |\n|---|---|---|---|---|---|---|---|\n", c.endpoints, crowdFloor)
	for i := range c.runs {
		r := &c.runs[i]
		rounds := len(r.alone)
		alone, crowd, ratio := medianCPU(r.alone), medianCPU(r.crowd), r.ratio()
		p("| %s | %s | %s | %s | %s | | %s | %s / %s |\n", r.store, loadName(r.rate),
			spreadMs(alone, rounds), spreadMs(crowd, rounds), ratio.format("%.2f×", rounds),
			verdict(ratio.median <= crowdFloor), round(medianP99(r.alone)), round(medianP99(r.crowd)))
	}
	return b.String()
}

// spreadMs prints a spread of durations (nanoseconds) in milliseconds.
func spreadMs(s spread, rounds int) string {
	ms := func(x float64) float64 { return x / float64(time.Millisecond) }
	return spread{ms(s.median), ms(s.lo), ms(s.hi)}.format("%.3f ms", rounds)
}

// medianP99 is the median over runs of their p99 publish → receipt.
func medianP99(runs []costRun) time.Duration {
	xs := make([]float64, len(runs))
	for i := range runs {
		xs[i] = float64(runs[i].lat.total.p99)
	}
	return time.Duration(spreadOf(xs).median)
}
