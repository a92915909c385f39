package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseAttempts(t *testing.T) {
	for _, tc := range []struct {
		line string
		want int
		ok   bool
	}{
		{"attempts 1234", 1234, true},
		{"attempts 0", 0, true},
		{"attempts 12 ", 12, true},
		{"attempts -1", -1, true}, // enginehost could not count them
		{"attempts -2", 0, false},
		{"attempts", 0, false},
		{"attempts x", 0, false},
		{"breaker bench/receiver open 5xx probes=0", 0, false},
		{"listening 127.0.0.1:1234", 0, false},
	} {
		got, ok := parseAttempts(tc.line)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseAttempts(%q) = %d, %v; want %d, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestWALPerEvent(t *testing.T) {
	w0 := walCounters{bytes: 1_000, records: 10, fpi: 1, lsn: 5_000}
	w1 := walCounters{bytes: 4_001_000, records: 20_010, fpi: 201, lsn: 4_105_000}
	got := w1.perEvent(w0, 1000)
	want := walPerEvent{bytes: 4000, records: 20, fpi: 0.2, lsnBytes: 4100}
	if got != want {
		t.Errorf("perEvent = %+v, want %+v", got, want)
	}
	if got := w1.perEvent(w0, 0); got != (walPerEvent{}) {
		t.Errorf("perEvent of no events = %+v, want zero", got)
	}
}

func TestPlan(t *testing.T) {
	// 0.2 ms of server CPU per event: a core carries 5,000/s, 60% of 4
	// cores 12,000/s. 0.25 ms of engine CPU per event: 3,000 ms/s of
	// replicas' CPU, over 2 cores × 70% = 1.4 per replica: 3 replicas.
	in := planInputs{serverCPU: 200 * time.Microsecond, engineCPU: 250 * time.Microsecond, walBytes: 3000}
	rows := plan(in, []int{4, 8, 16})
	want := []planRow{
		{serverCores: 4, rate: 12_000, walMBps: 36, replicas: 3},
		{serverCores: 8, rate: 24_000, walMBps: 72, replicas: 5},
		{serverCores: 16, rate: 48_000, walMBps: 144, replicas: 9},
	}
	if len(rows) != len(want) {
		t.Fatalf("got %d rows, want %d", len(rows), len(want))
	}
	for i, r := range rows {
		w := want[i]
		if r.serverCores != w.serverCores || r.replicas != w.replicas ||
			math.Abs(r.rate-w.rate) > 1e-6 || math.Abs(r.walMBps-w.walMBps) > 1e-9 {
			t.Errorf("row %d = %+v, want %+v", i, r, w)
		}
	}
	if rows := plan(planInputs{}, []int{4}); len(rows) != 0 {
		t.Errorf("a plan without a server cost has rows: %+v", rows)
	}
}

// Replicas round up: a cluster at exactly one replica's planned load needs
// one, a little above it two.
func TestPlanReplicasRoundUp(t *testing.T) {
	// 1 core × 60% / 1 ms = 600/s; 600/s × x = 1.4 cores at x = 7/3 ms.
	exact := planInputs{serverCPU: time.Millisecond, engineCPU: 7 * time.Millisecond / 3}
	if got := plan(exact, []int{1})[0].replicas; got != 1 {
		t.Errorf("at one replica's load: %d replicas, want 1", got)
	}
	above := planInputs{serverCPU: time.Millisecond, engineCPU: 7*time.Millisecond/3 + 10*time.Microsecond}
	if got := plan(above, []int{1})[0].replicas; got != 2 {
		t.Errorf("above one replica's load: %d replicas, want 2", got)
	}
}

func TestWorstAt(t *testing.T) {
	runs := []capacityRun{
		{replicas: 1, rate: 0, serverCPU: 200 * time.Microsecond, engineCPU: 300 * time.Microsecond, wal: walPerEvent{bytes: 2500}},
		{replicas: 2, rate: 0, serverCPU: 250 * time.Microsecond, engineCPU: 280 * time.Microsecond, wal: walPerEvent{bytes: 2400}},
		{replicas: 1, rate: 1000, serverCPU: time.Millisecond, engineCPU: time.Millisecond, wal: walPerEvent{bytes: 9000}},
	}
	got := worstAt(runs, 0)
	want := planInputs{source: "saturation", serverCPU: 250 * time.Microsecond, engineCPU: 300 * time.Microsecond, walBytes: 2500}
	if got != want {
		t.Errorf("worstAt(saturation) = %+v, want %+v", got, want)
	}
	if got := worstAt(runs, 500); got.serverCPU != 0 || got.source != "steady 500/s" {
		t.Errorf("worstAt(500) without runs = %+v", got)
	}
}

func TestExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		run  capacityRun
		want string
	}{
		{capacityRun{events: 100, receipts: 100, attempts: 100}, "yes"},
		{capacityRun{events: 100, receipts: 102, attempts: 103}, "2 duplicates, from 3 retries"},
		{capacityRun{events: 100, receipts: 101, attempts: 100}, "**1 duplicates** with 0 retries"},
	} {
		if got := tc.run.exactlyOnce(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.run, got, tc.want)
		}
	}
}

// The section renders every run and a plan row for each server size.
func TestCapacityMarkdown(t *testing.T) {
	c := capacityResults{connections: 64, duration: 15 * time.Second, server: "PostgreSQL 15 at 127.0.0.1:5432", runs: []capacityRun{
		{replicas: 1, rate: 0, events: 1000, delivered: 900, serverCPU: 300 * time.Microsecond, engineCPU: 350 * time.Microsecond, receipts: 1000, attempts: 1000},
		{replicas: 1, rate: 1000, events: 1000, delivered: 700, serverCPU: 400 * time.Microsecond, engineCPU: 400 * time.Microsecond, receipts: 1000, attempts: 1000},
	}}
	md := c.markdown("test machine")
	for _, want := range []string{
		capacityHeading, "| 1 | saturation | 900 |", "| 1 | steady 1000/s (fell behind) | 700 |",
		"| 4 | 8000/s, 0.0 MB/s, 2 | 6000/s, 0.0 MB/s, 2 |", "| 16 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}
