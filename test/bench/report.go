package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// The analysis between these markers in docs/benchmarks.md is written by
// hand (where the time goes, what would close the gaps); `make bench`
// keeps it when it rewrites the figures around it.
const (
	notesBegin = "<!-- notes: kept by make bench -->"
	notesEnd   = "<!-- end of notes -->"
)

func keptNotes(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := string(data)
	i, j := strings.Index(s, notesBegin), strings.Index(s, notesEnd)
	if i < 0 || j < i {
		return ""
	}
	return s[i : j+len(notesEnd)]
}

// writeSection replaces the section of the benchmarks file at path that
// starts with heading (a "## " line) by section, or appends section: a
// step run alone (`--steps deliveryapi`, `--steps breaker`) updates only
// its own figures.
func writeSection(path, heading, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.WriteFile(path, []byte(replaceSection(string(old), heading, section)), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote the section %q of %s\n", heading, path)
	return nil
}

// replaceSection puts section (which starts with "\n"+heading) in doc in
// place of the one that starts with heading and runs to the next "## "
// heading, or at the end when doc has none.
func replaceSection(doc, heading, section string) string {
	i := strings.Index(doc, "\n"+heading+"\n")
	switch {
	case strings.TrimSpace(doc) == "":
		return strings.TrimLeft(section, "\n")
	case i < 0:
		return strings.TrimRight(doc, "\n") + "\n" + section
	}
	after := doc[i+1+len(heading):]
	end := ""
	if j := strings.Index(after, "\n## "); j >= 0 {
		end = after[j:]
	}
	return doc[:i] + section + end
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

// costSection is the issue #15 part of docs/benchmarks.md.
func costSection(cfg config, r *results, notes string) string {
	c, h, d := &r.cost, &r.history, &r.disk
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("\n## Cost per event\n\n")
	p("One load client (%d connections, 1 KiB events, a unique Idempotency-Key each), one receiver\n", c.connections)
	p("answering 204, each run %s of publishing; the engine runs as its own process (enginehost,\n", c.duration)
	p("with the manager's defaults: %s workers, 1 s idle wait, `GOGC=400 GOMEMLIMIT=400MiB`) on a fresh\n", engineWorkers)
	p("ledger per run. Saturation runs are closed-loop; paced runs are open-loop (event n is sent at\n")
	p("start + n/rate whatever the answers, and latencies count from that time). CPU per event is the\n")
	p("process's utime+stime from /proc over the window from the first publish to the last receipt,\n")
	p("divided by the events delivered; for PostgreSQL the server's CPU is summed over the\n")
	p("postmaster's children that serve the engine (its connections, found by application_name, as\n")
	p("the server is shared) and the server's background processes (WAL writer, checkpointer...).\n")
	p("Load average (1, 5, 15 min) is recorded beside each figure: the machine is shared, and\n")
	p("throughput and latency depend on what else runs; CPU per event much less.\n\n")

	p("### Throughput against the pass-through relay\n\n")
	p("| path | events/s | share of the relay | floor | | load average |\n|---|---|---|---|---|---|\n")
	p("| pass-through relay: read, sign (Standard Webhooks), forward, answer; no storage | %.0f | 100%% | | | %s |\n", c.relay.delivered, c.relay.loadAvg)
	for _, s := range []struct {
		name  string
		run   costRun
		floor float64
	}{{"hookkeeper on SQLite, publish → receipt", c.sqlite.saturation, 0.5}, {"hookkeeper on PostgreSQL, publish → receipt", c.postgres.saturation, 0.3}} {
		share := s.run.delivered / c.relay.delivered
		p("| %s | %.0f | %s | ≥ %.0f%% | %s | %s |\n", s.name, s.run.delivered, pct(s.run.delivered, c.relay.delivered), 100*s.floor, verdict(share >= s.floor), s.run.loadAvg)
	}

	p("\n### CPU per delivered event\n\n")
	p("| store | load | engine CPU per event | of it user time | PostgreSQL server CPU per event | PostgreSQL WAL per event (server-wide) | floor (engine) | | load average |\n|---|---|---|---|---|---|---|---|---|\n")
	p("| none: the pass-through relay (two HTTP legs and the signature) | %s | %s | %.0f%% | | | | | %s |\n",
		c.relay500.load(), ms(c.relay500.engineCPU), 100*c.relay500.userShare, c.relay500.loadAvg)
	for _, s := range []storeCost{c.sqlite, c.postgres} {
		for _, run := range []costRun{s.saturation, s.at500, s.at1000} {
			load := run.load()
			server, wal, floor, v := "", "", "", ""
			if s.name == "postgres" {
				server, wal = ms(run.serverCPU), fmt.Sprintf("%.0f B", run.wal.bytes)
			}
			if s.name == "sqlite" && run.rate == 0 {
				floor, v = "≤ 0.15 ms", verdict(run.engineCPU <= 150*time.Microsecond)
			}
			if s.name == "sqlite" && run.rate == 500 {
				floor, v = "≤ 0.3 ms", verdict(run.engineCPU <= 300*time.Microsecond)
			}
			p("| %s | %s | %s | %.0f%% | %s | %s | %s | %s | %s |\n", s.name, load, ms(run.engineCPU), 100*run.userShare, server, wal, floor, v, run.loadAvg)
		}
	}

	p("\n### Publish-to-receipt latency\n\n")
	p("Publish is the send → 201 of the API; delivery is 201 → first receipt at the receiver (where a\n")
	p("queue behind ingest shows); total is send → receipt.\n\n")
	p("| store | load | total | publish | delivery | floor (total p99) | | load average |\n|---|---|---|---|---|---|---|---|\n")
	for _, s := range []storeCost{c.sqlite, c.postgres} {
		for _, run := range []costRun{s.at500, s.at1000, s.saturation} {
			load := run.load()
			floor, v := "", ""
			if run.rate == 1000 {
				floor, v = "≤ 20 ms", verdict(run.lat.total.p99 <= 20*time.Millisecond)
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", s.name, load, run.lat.total, run.lat.publish, run.lat.delivery, floor, v, run.loadAvg)
		}
	}
	p("\nCPU profiles of these runs (`--profile-dir`): `<store>-saturation.pprof`, `<store>-500.pprof`,\n`<store>-1000.pprof`. Stage shares:\n\n")
	for _, s := range []storeCost{c.sqlite, c.postgres} {
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
	if notes != "" {
		p("\n%s\n", notes)
	}
	p("\nReproduce: `make bench` (10,000,000 events of history), or quicker\n")
	p("`make bench BENCH_FLAGS=--history-events=1000000` (this run: `--lag-deliveries %d\n", cfg.lagDeliveries)
	p("--history-events %d`; the lag step's 30 s preload budget fails at 100,000 on a loaded machine). The cost\n", cfg.historyEvents)
	p("steps alone print their figures without writing this file: `go run ./test/bench --steps\n")
	p("cost,history,disk,manager --profile-dir DIR` (with HOOKKEEPER_TEST_POSTGRES set).\n")
	return b.String()
}
