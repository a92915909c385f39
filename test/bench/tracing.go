package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// The tracing step (issue #46): the engine's CPU per event at 1,000
// events/s with tracing off and on (OTLP over HTTP, 10% of the publishes
// sampled, parent-based: their attempts follow), in turns, on SQLite. The
// spans go to a loopback sink that reads and discards them, so that only
// what hookkeeper spends to make and send them is metered.

const tracingHeading = "## Tracing's cost (issue #46)"

// tracingRate is the paced publish rate of the step.
const tracingRate = 1000

type tracingResults struct {
	rounds   [][2]costRun // off, on
	duration time.Duration
	exported int64 // bytes the sink received
	requests int64
}

// tracingEnv is the environment of an enginehost with tracing on.
func tracingEnv(endpoint string) map[string]string {
	return map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     "0.1",
	}
}

func runTracing(cfg config, bin, work string, r *tracingResults) error {
	t, err := startTracker()
	if err != nil {
		return err
	}
	defer t.close()
	var bytes, requests atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n, _ := io.Copy(io.Discard, req.Body)
		bytes.Add(n)
		requests.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse
	}))
	defer sink.Close()
	r.duration = cfg.costDuration
	for i := range max(cfg.costRounds, 1) {
		var round [2]costRun
		for j, on := range []bool{false, true} {
			label := fmt.Sprintf("tracing-%s-%d", map[bool]string{false: "off", true: "on"}[on], i+1)
			step(fmt.Sprintf("tracing round %d: %s at %d events/s", i+1, label, tracingRate))
			restore := setEnv(map[bool]map[string]string{true: tracingEnv(sink.URL)}[on])
			args, _, release := sqliteLedgers(work)(label)
			round[j], err = measureEngine(cfg, bin, t, label, args, nil, tracingRate)
			release()
			restore()
			if err != nil {
				return err
			}
		}
		fmt.Printf("  round %d: CPU per event off %s, on %s (%+.1f%%)\n", i+1,
			round[0].engineCPU, round[1].engineCPU, 100*(cpuRatio(round[1].engineCPU, round[0].engineCPU)-1))
		r.rounds = append(r.rounds, round)
	}
	r.exported, r.requests = bytes.Load(), requests.Load()
	return nil
}

// setEnv sets env in this process (the enginehosts it starts inherit it)
// and returns what puts the environment back.
func setEnv(env map[string]string) (restore func()) {
	old := map[string]*string{}
	for k, v := range env {
		if was, ok := os.LookupEnv(k); ok {
			old[k] = &was
		} else {
			old[k] = nil
		}
		_ = os.Setenv(k, v)
	}
	return func() {
		for k, v := range old {
			if v == nil {
				_ = os.Unsetenv(k)
			} else {
				_ = os.Setenv(k, *v)
			}
		}
	}
}

func (r *tracingResults) markdown(machine string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("\n%s\n\nWritten by `go run ./test/bench --steps tracing` (part of `make bench`) on %s.\n%s\n\n", tracingHeading, time.Now().UTC().Format("2006-01-02"), machine)
	p("The engine (enginehost, SQLite) at %d events/s for %v per run, tracing off and on in turns: on is OTLP over HTTP to a\n", tracingRate, r.duration)
	p("loopback sink that discards what it reads, `parentbased_traceidratio` at 0.1 (a tenth of the publishes sampled, and every\n")
	p("attempt of those). CPU per event is the enginehost's user plus system time over the window, per delivered event. The\n")
	p("trace context is a column of the event row, written in the insert: an attempt writes nothing more (ADR 0051).\n\n")
	p("| Round | off: CPU per event | on: CPU per event | on / off |\n|---|---|---|---|\n")
	var ratios []float64
	for i, rd := range r.rounds {
		ratio := cpuRatio(rd[1].engineCPU, rd[0].engineCPU)
		ratios = append(ratios, ratio)
		p("| %d | %s | %s | %.3f |\n", i+1, rd[0].engineCPU.Round(time.Microsecond), rd[1].engineCPU.Round(time.Microsecond), ratio)
	}
	s := spreadOf(ratios)
	verdict := "meets"
	if s.median > 1.03 {
		verdict = "**misses**"
	}
	p("\nMedian on/off %.3f (range %.3f–%.3f): %s issue #46's bar (at most 3%% above off). The sink received %d requests, %d bytes of spans.\n",
		s.median, s.lo, s.hi, verdict, r.requests, r.exported)
	return b.String()
}
