package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// The results a write replaces are not lost: `make bench` rewrites
// docs/benchmarks.md, the current results only, and appends what it
// replaces to docs/benchmarks-archive.md (archivePath), with the dated
// runs and the notes written beside them by hand.

// archivePath is the archive of the benchmarks file at path:
// docs/benchmarks.md's is docs/benchmarks-archive.md.
func archivePath(path string) string { return strings.TrimSuffix(path, ".md") + "-archive.md" }

// archiveIntro starts a new archive.
const archiveIntro = `# Benchmarks: past runs

The results [benchmarks.md](benchmarks.md) held before the current ones, and the notes written
beside them by hand (dated runs, before and after a change), oldest first. ` + "`make bench`" + ` appends
here what it replaces there: the whole file after a full run, a step's section after a step run
alone (` + "`go run ./test/bench --steps <step>`" + `).
`

// archive appends text, what the benchmarks file at path held under
// title until now, to its archive, its headings one level down under a
// heading of its own.
func archive(path, title, text string) error {
	if strings.TrimSpace(text) == "" {
		return nil
	}
	to := archivePath(path)
	old, err := os.ReadFile(to)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	doc := strings.TrimRight(string(old), "\n")
	if strings.TrimSpace(doc) == "" {
		doc = strings.TrimRight(archiveIntro, "\n")
	}
	doc += fmt.Sprintf("\n\n## %s (replaced on %s)\n\n%s\n", title, time.Now().UTC().Format("2006-01-02"), demote(strings.Trim(text, "\n")))
	if err := os.WriteFile(to, []byte(doc), 0o644); err != nil {
		return err
	}
	fmt.Printf("appended the replaced %s to %s\n", title, to)
	return nil
}

// demote moves every Markdown heading of md one level down (outside code
// fences), so that an archived file or section sits under its heading.
func demote(md string) string {
	lines := strings.Split(md, "\n")
	fenced := false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "```"):
			fenced = !fenced
		case !fenced && strings.HasPrefix(l, "#"):
			lines[i] = "#" + l
		}
	}
	return strings.Join(lines, "\n")
}

// writeFile writes the whole benchmarks file at path (a full `make bench`)
// after appending the one it replaces, but for its title line, to the
// archive.
func writeFile(path, doc string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	prev := string(old)
	if strings.HasPrefix(prev, "# ") {
		_, prev, _ = strings.Cut(prev, "\n")
	}
	if err := archive(path, "The results of a full `make bench`", prev); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", path)
	return nil
}

// writeSection replaces the section of the benchmarks file at path that
// starts with heading (a "## " line) by section, or appends section: a
// step run alone (`--steps deliveryapi`, `--steps breaker`) updates only
// its own figures. The section it replaces goes to the archive.
func writeSection(path, heading, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if start, end, ok := sectionBounds(string(old), heading); ok {
		replaced := string(old)[start:end]
		if err := archive(path, strings.TrimPrefix(heading, "## "), strings.TrimPrefix(strings.TrimLeft(replaced, "\n"), heading)); err != nil {
			return err
		}
	}
	if err := os.WriteFile(path, []byte(replaceSection(string(old), heading, section)), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote the section %q of %s\n", heading, path)
	return nil
}

// writeBothStores writes a step's section when the step ran on both
// stores, and prints it otherwise: a section is never half measured.
func writeBothStores(path, step, stores, heading, section string) error {
	if stores != bothStores {
		fmt.Print(section)
		fmt.Printf("%s: not on both stores, section not written\n", step)
		return nil
	}
	return writeSection(path, heading, section)
}

// sectionBounds finds the section of doc that starts with heading (its
// "\n" before, or the start of doc) and runs to the next "## " heading or
// the end.
func sectionBounds(doc, heading string) (start, end int, ok bool) {
	start = strings.Index("\n"+doc, "\n"+heading+"\n")
	if start < 0 {
		return 0, 0, false
	}
	start = max(start-1, 0)
	body := strings.Index(doc[start:], heading) + start + len(heading)
	end = len(doc)
	if j := strings.Index(doc[body:], "\n## "); j >= 0 {
		end = body + j
	}
	return start, end, true
}

// replaceSection puts section (which starts with "\n"+heading) in doc in
// place of the one that starts with heading and runs to the next "## "
// heading, or at the end when doc has none.
func replaceSection(doc, heading, section string) string {
	if strings.TrimSpace(doc) == "" {
		return strings.TrimLeft(section, "\n")
	}
	start, end, ok := sectionBounds(doc, heading)
	if !ok {
		return strings.TrimRight(doc, "\n") + "\n" + section
	}
	if start == 0 {
		section = strings.TrimLeft(section, "\n")
	}
	return doc[:start] + section + doc[end:]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

func pct(x, of float64) string {
	if of == 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", 100*x/of)
}

// scaled extrapolates d, measured for n events, to 10,000,000.
func scaled(d time.Duration, n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return (d * time.Duration(10_000_000/n)).Round(time.Minute)
}

func delta(full, empty float64) string {
	if empty == 0 {
		return "?"
	}
	return fmt.Sprintf("%+.0f%%", 100*(full-empty)/empty)
}

func within(full, empty, tolerance float64) bool {
	return empty > 0 && (full-empty)/empty <= tolerance && (empty-full)/empty <= tolerance
}

// load names a run's load: its paced rate, or saturation, with the rate
// delivered.
func (r costRun) load() string {
	if r.rate > 0 {
		return fmt.Sprintf("steady %d/s (delivered %.0f/s)", r.rate, r.delivered)
	}
	return fmt.Sprintf("saturation (%.0f/s)", r.delivered)
}

// costHeading starts the section costSection writes.
const costHeading = "## Cost per event"

// costSteps are the steps whose figures make the cost section: run alone
// (in this order) on both stores, they rewrite that section (the one it
// replaces goes to the archive), so that the floors can be judged again
// without the rest of `make bench`.
const costSteps = "cost,history,disk,manager"

// writeCost writes the cost section when its steps ran on both stores,
// and prints it otherwise.
func writeCost(cfg config, r *results) error {
	stores := bothStores
	if cfg.costStores != bothStores || cfg.historyStores != bothStores {
		stores = cfg.costStores + "/" + cfg.historyStores
	}
	return writeBothStores(cfg.out, "cost", stores, costHeading, costSection(cfg, r))
}

// costSection is the cost part of docs/benchmarks.md (issues #15 and #26).
func costSection(cfg config, r *results) string {
	c, h, d := &r.cost, &r.history, &r.disk
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("\n%s\n\n", costHeading)
	p("One load client (%d connections, 1 KiB events, a unique Idempotency-Key each), one receiver\n", c.connections)
	p("answering 204, each run %s of publishing measured after %s of warming up at the same load\n", c.duration, c.warmup)
	p("on the same process (its first seconds open connections and prepare statements, and a new\n")
	p("PostgreSQL ledger analyses its young tables: a start's cost, not a steady one); the engine runs as its own process (enginehost,\n")
	p("with the manager's defaults: %s workers, 1 s idle wait, `GOGC=400 GOMEMLIMIT=400MiB`) on a fresh\n", engineWorkers)
	p("ledger per run (a PostgreSQL run's schema dropped as it ends, so that autovacuum of a finished\n")
	p("run's tables lands in no later window). Saturation runs are closed-loop; paced runs are open-loop (event n is sent at\n")
	p("start + n/rate whatever the answers, and latencies count from that time). CPU per event is the\n")
	p("process's utime+stime from /proc over the window from the first publish to the last receipt,\n")
	p("divided by the events delivered; for PostgreSQL the server's CPU is summed over the\n")
	p("postmaster's children that serve the engine (its connections, found by application_name, as\n")
	p("the server is shared) and the server's background processes (WAL writer, checkpointer...).\n")
	p("Load average (1, 5, 15 min) is recorded beside each figure: the machine is shared, and\n")
	p("throughput and latency depend on what else runs; CPU per event much less.\n\n")

	n := len(c.rounds)
	p("Each figure is the median of %d rounds, its range (min–max) beside it; a round runs the relay,\n", n)
	p("then SQLite, then PostgreSQL, and the next round starts again with the relay; a closing relay\n")
	p("run follows the last round. Each ratio to the relay is taken against the mean of the relay runs\n")
	p("just before and just after the round's stores, in the same minutes: the relay's own cost moves\n")
	p("between runs as much as the engine's, and the mean of two narrows that noise. The relay rows\n")
	p("show those means. The floors are judged on the medians.\n\n")

	p("### Throughput against the pass-through relay\n\n")
	p("| path | events/s | share of the relay (same round) | floor | | load average (first round) |\n|---|---|---|---|---|---|\n")
	first := &c.rounds[0]
	p("| pass-through relay: read, sign (Standard Webhooks), forward, answer; no storage | %s | 100%% | | | %s |\n",
		c.over(func(r *costRound) float64 { return r.relayRate() }).format("%.0f", n), first.relay.loadAvg)
	for _, s := range []struct {
		store, name string
		floor       float64
	}{{"sqlite", "hookkeeper on SQLite, publish → receipt", 0.55}, {"postgres", "hookkeeper on PostgreSQL, publish → receipt", 0.40}} {
		rate := c.over(func(r *costRound) float64 { return r.store(s.store).saturation.delivered })
		share := c.over(func(r *costRound) float64 { return 100 * r.store(s.store).saturation.delivered / r.relayRate() })
		p("| %s | %s | %s | ≥ %.0f%% | %s | %s |\n", s.name, rate.format("%.0f", n), share.format("%.0f%%", n),
			100*s.floor, verdict(share.median >= 100*s.floor), first.store(s.store).saturation.loadAvg)
	}

	p("\n### CPU per delivered event\n\n")
	p("The engine's CPU per event at a steady rate is compared with the relay's at the same rate in\n")
	p("the same round (the floor: at most 1.5 times).\n\n")
	p("| store | load | engine CPU per event | of it user time | against the relay at that rate | PostgreSQL server CPU per event | PostgreSQL WAL per event (server-wide) | floor (engine) | | load average (first round) |\n|---|---|---|---|---|---|---|---|---|---|\n")
	cpu := func(f func(r *costRound) costRun) spread {
		return c.over(func(r *costRound) float64 { return float64(f(r).engineCPU) / float64(time.Millisecond) })
	}
	user := func(f func(r *costRound) costRun) spread {
		return c.over(func(r *costRound) float64 { return 100 * f(r).userShare })
	}
	for _, rate := range steadyRates {
		relay := func(r *costRound) costRun { return r.relayAt(rate) }
		relayCPU := c.over(func(r *costRound) float64 { return float64(r.relayCPU(rate)) / float64(time.Millisecond) })
		p("| none: the pass-through relay (two HTTP legs and the signature) | %s | %s ms | %.0f%% | 1× | | | | | %s |\n",
			first.relayAt(rate).load(), relayCPU.format("%.3f", n), user(relay).median, first.relayAt(rate).loadAvg)
	}
	for _, name := range []string{"sqlite", "postgres"} {
		for _, rate := range []int{0, 500, 1000} {
			run := func(r *costRound) costRun {
				s := r.store(name)
				return map[int]costRun{0: s.saturation, 500: s.at500, 1000: s.at1000}[rate]
			}
			server, wal, against, floor, v := "", "", "", "", ""
			if name == "postgres" {
				server = c.over(func(r *costRound) float64 { return float64(run(r).serverCPU) / float64(time.Millisecond) }).format("%.3f", n) + " ms"
				wal = c.over(func(r *costRound) float64 { return run(r).wal.bytes }).format("%.0f", n) + " B"
			}
			if rate > 0 {
				x := c.over(func(r *costRound) float64 { return cpuRatio(run(r).engineCPU, r.relayCPU(rate)) })
				against = x.format("%.2f×", n)
				floor, v = "≤ 1.5× the relay", verdict(x.median <= 1.5)
			}
			p("| %s | %s | %s ms | %.0f%% | %s | %s | %s | %s | %s | %s |\n", name, run(first).load(), cpu(run).format("%.3f", n),
				user(run).median, against, server, wal, floor, v, run(first).loadAvg)
		}
	}

	p("\n### Publish-to-receipt latency\n\n")
	p("Publish is the send → 201 of the API; delivery is 201 → first receipt at the receiver (where a\n")
	p("queue behind ingest shows); total is send → receipt. Medians of the rounds' percentiles.\n\n")
	p("| store | load | total p50 | total p99 | publish p50 / p99 | delivery p50 / p99 | floor (total p99) | | load average (first round) |\n|---|---|---|---|---|---|---|---|---|\n")
	msOf := func(f func(r *costRound) time.Duration) spread {
		return c.over(func(r *costRound) float64 { return float64(f(r)) / float64(time.Millisecond) })
	}
	for _, name := range []string{"sqlite", "postgres"} {
		for _, rate := range []int{500, 1000, 0} {
			run := func(r *costRound) costRun {
				s := r.store(name)
				return map[int]costRun{0: s.saturation, 500: s.at500, 1000: s.at1000}[rate]
			}
			p99 := msOf(func(r *costRound) time.Duration { return run(r).lat.total.p99 })
			floor, v := "", ""
			if rate == 1000 {
				floor, v = "≤ 20 ms", verdict(p99.median <= 20)
			}
			p("| %s | %s | %s ms | %s ms | %.1f / %.1f ms | %.2f / %.1f ms | %s | %s | %s |\n", name, run(first).load(),
				msOf(func(r *costRound) time.Duration { return run(r).lat.total.p50 }).format("%.1f", n), p99.format("%.1f", n),
				msOf(func(r *costRound) time.Duration { return run(r).lat.publish.p50 }).median,
				msOf(func(r *costRound) time.Duration { return run(r).lat.publish.p99 }).median,
				msOf(func(r *costRound) time.Duration { return run(r).lat.delivery.p50 }).median,
				msOf(func(r *costRound) time.Duration { return run(r).lat.delivery.p99 }).median,
				floor, v, run(first).loadAvg)
		}
	}
	p("\nCPU profiles of these runs (`--profile-dir`): `<store>-saturation.pprof`, `<store>-500.pprof`,\n`<store>-1000.pprof` (later rounds `-r2`, `-r3`, ...). Stage shares of the first round:\n\n")
	for _, s := range []storeCost{first.sqlite, first.postgres} {
		for _, run := range []costRun{s.saturation, s.at500} {
			p("- %s: %s\n", run.label, run.breakdown)
		}
	}

	p("\n### Flat cost in the ledger's size\n\n")
	p("The history is %d delivered events (payloads already pruned, as after the payload\n", h.events)
	p("retention; %d of them unresolved exhausted deliveries, which the status refresh lists),\n", historyExhausted)
	p("generated by the database itself in transactions of %d (INSERT ... SELECT over a\n", historyChunkFor(h.events))
	p("generated series; PostgreSQL ANALYZEd after each), then the same saturation run and the same\n")
	p("ledger calls as on the empty ledger (%d events ingested, claimed and recorded delivered in\n", opsEvents)
	p("batches of %d, from the bench process). Throughput moves with the machine's load between the\n", opsBatch)
	p("two runs, so the floor is checked on what does not: CPU per event (engine and database\n")
	p("server) and the claim's median latency, each within 15%%.\n\n")
	if h.events < 10_000_000 {
		p("This run used %d events (`--history-events`); `make bench` uses 10,000,000, which at this\n", h.events)
		p("run's preload rates takes about %s on SQLite and %s on PostgreSQL, and about %.0f GiB and %.0f GiB.\n\n",
			scaled(h.sqlite.preloadTime, h.events), scaled(h.postgres.preloadTime, h.events),
			float64(h.sqlite.bytes)/(1<<30)*1e7/float64(max(h.events, 1)), float64(h.postgres.bytes)/(1<<30)*1e7/float64(max(h.events, 1)))
	}
	p("| store | preload | ledger on disk | throughput empty → history | engine CPU per event | server CPU per event | claim p50/p99 per batch | insert p50 | record p50 | floor: CPU per event and claim p50 within 15%% | | load average |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range []historyStore{h.sqlite, h.postgres} {
		if s.name == "" {
			continue // not run (--history-stores)
		}
		cpu := func(r costRun) float64 { return float64(r.engineCPU + r.serverCPU) }
		ok := within(cpu(s.full.sat), cpu(s.empty.sat), 0.15) &&
			within(float64(s.full.ops.claim.p50), float64(s.empty.ops.claim.p50), 0.15)
		server := ""
		if s.name == "postgres" {
			server = ms(s.empty.sat.serverCPU) + " → " + ms(s.full.sat.serverCPU)
		}
		p("| %s | %d events in %s | %.2f GiB | %.0f → %.0f/s (%s) | %s → %s | %s | %s/%s → %s/%s | %s → %s | %s → %s | CPU %s, claim %s | %s | %s → %s |\n",
			s.name, s.preloadEvents, s.preloadTime.Round(time.Second), float64(s.bytes)/(1<<30),
			s.empty.sat.delivered, s.full.sat.delivered, delta(s.full.sat.delivered, s.empty.sat.delivered),
			ms(s.empty.sat.engineCPU), ms(s.full.sat.engineCPU), server,
			round(s.empty.ops.claim.p50), round(s.empty.ops.claim.p99), round(s.full.ops.claim.p50), round(s.full.ops.claim.p99),
			round(s.empty.ops.insert.p50), round(s.full.ops.insert.p50), round(s.empty.ops.record.p50), round(s.full.ops.record.p50),
			delta(cpu(s.full.sat), cpu(s.empty.sat)), delta(float64(s.full.ops.claim.p50), float64(s.empty.ops.claim.p50)),
			verdict(ok), s.empty.sat.loadAvg, s.full.sat.loadAvg)
	}
	p("\nEndpoint status refresh: the ledger calls the WebhookEndpoint controller makes on every\n")
	p("resync (EndpointGet, EndpointStats, ExhaustedList of the first and of the newest within a\n")
	p("window), median of 21 rounds, against the size of the history:\n\n")
	p("| history events | SQLite | PostgreSQL |\n|---|---|---|\n")
	for i := range max(len(h.sqlite.points), len(h.postgres.points)) {
		cell := func(ps []historyPoint) (int, string) {
			if i >= len(ps) {
				return 0, ""
			}
			r := ps[i].refresh
			return ps[i].events, fmt.Sprintf("%s (stats %s, exhausted %s + %s)", round(r.total()), round(r.stats), round(r.exhaustedFirst), round(r.exhaustedWindow))
		}
		n, sq := cell(h.sqlite.points)
		n2, pg := cell(h.postgres.points)
		p("| %d | %s | %s |\n", max(n, n2), sq, pg)
	}

	p("\n### Bytes per event on disk\n\n")
	p("%d delivered 1 KiB events written through the engine's ledger calls (ingest, claim, record),\n", diskEvents)
	p("then their payloads pruned (payload retention passed, evidence kept). \"In use\" is what the\n")
	p("files hold afterwards without compaction (SQLite: pages in use; PostgreSQL: after a plain\n")
	p("VACUUM, whose freed space later rows reuse); \"compacted\" is after SQLite's VACUUM (into a copy)\n")
	p("or PostgreSQL's VACUUM FULL.\n\n")
	p("| store | as written (SQLite incl. WAL after checkpoint) | payloads pruned, in use | payloads pruned, compacted |\n|---|---|---|---|\n")
	for _, s := range []diskStore{d.sqlite, d.postgres} {
		p("| %s | %.0f B | %.0f B | %.0f B |\n", s.name, s.written, s.prunedInUse, s.prunedCompacted)
	}
	p("\nThe sizing table in [operations/sizing.md](operations/sizing.md) follows these figures.\n")

	m := &r.manager
	p("\n### The real manager against enginehost\n\n")
	p("The steps above run the engine as enginehost (the engine and its HTTP API without\n")
	p("Kubernetes). Once per run, the real manager (`cmd/`, with etcd and kube-apiserver started as\n")
	p("test/e2e starts them, a WebhookEndpoint object, `--api-auth=token-file`) takes the same steady\n")
	p("%d events/s on SQLite, and enginehost right after it:\n\n", managerRate)
	p("| process | CPU per event | of it user time | latency p50/p99 | load average |\n|---|---|---|---|---|\n")
	for _, run := range []costRun{m.manager, m.enginehost} {
		p("| %s | %s | %.0f%% | %s / %s | %s |\n", run.label, ms(run.engineCPU), 100*run.userShare, round(run.lat.total.p50), round(run.lat.total.p99), run.loadAvg)
	}
	p("\nThe control plane (etcd and kube-apiserver) used %s per event meanwhile. The manager's\n", ms(m.controlPlaneCPU))
	p("controllers, informers and status resyncs add %s per event (%s) at this rate, so the\n",
		ms(m.manager.engineCPU-m.enginehost.engineCPU), delta(float64(m.manager.engineCPU), float64(m.enginehost.engineCPU)))
	p("cost steps keep enginehost, which starts in a second and needs no control plane.\n")
	p("\nReproduce: `make bench` (10,000,000 events of history), or quicker\n")
	p("`make bench BENCH_FLAGS=--history-events=1000000` (this run: `--lag-deliveries %d\n", cfg.lagDeliveries)
	p("--history-events %d`; the lag step's 30 s preload budget fails at 100,000 on a loaded machine). The cost\n", cfg.historyEvents)
	p("steps alone rewrite this section and nothing else: `go run ./test/bench --steps %s\n", costSteps)
	p("--profile-dir DIR` (with HOOKKEEPER_TEST_POSTGRES set; on one store alone they print it).\n")
	return b.String()
}
