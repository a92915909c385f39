package main

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func secs(xs ...float64) []time.Duration {
	out := make([]time.Duration, len(xs))
	for i, x := range xs {
		out[i] = time.Duration(x * float64(time.Second))
	}
	return out
}

func TestScaledBreakerIsTheDefaultsTwelveTimesFaster(t *testing.T) {
	p := scaledBreaker()
	want := ledger.BreakerPolicy{Failures: 10, MinDuration: 5 * time.Second, ProbeInterval: 2500 * time.Millisecond,
		MaxProbeInterval: 50 * time.Second, Ramp: 5 * time.Second}
	if p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}
}

func TestProbeSchedule(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    ledger.BreakerPolicy
		span time.Duration
		want []time.Duration
	}{
		// Waits 30 s, 1 m, 2 m, 4 m, 8 m, then 10 m (the cap).
		{"defaults over an hour", ledger.DefaultBreakerPolicy, time.Hour, secs(30, 90, 210, 450, 930, 1530, 2130, 2730, 3330)},
		{"scaled, the bench's 55 s after opening", scaledBreaker(), 55 * time.Second, secs(2.5, 7.5, 17.5, 37.5)},
		{"a probe at the span's end is outside it", scaledBreaker(), 37500 * time.Millisecond, secs(2.5, 7.5, 17.5)},
		{"no cap: doubling", ledger.BreakerPolicy{ProbeInterval: time.Second}, 20 * time.Second, secs(1, 3, 7, 15)},
		{"no automatic probe", ledger.BreakerPolicy{MaxProbeInterval: time.Minute}, time.Hour, nil},
		{"nothing before the first", ledger.DefaultBreakerPolicy, 30 * time.Second, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := probeSchedule(tc.p, tc.span); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOutage(t *testing.T) {
	// The bench's runs: offsets 0, 1, 3, 7, 15, 31, 63, ... s at 50 events/s.
	bench := newOutage(breakerBackoff, 50, scaledBreaker())
	if want := secs(0, 1, 3, 7, 15, 31, 63, 123, 183, 243, 303, 363); !slices.Equal(bench.offsets, want) {
		t.Fatalf("offsets %v, want %v", bench.offsets, want)
	}
	defaults := newOutage(breakerBackoff, 50, ledger.DefaultBreakerPolicy)
	disabled := newOutage(breakerBackoff, 50, ledger.BreakerPolicy{Disabled: true})
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		// 50 × (60 + 59 + 57 + 53 + 45 + 29): the events of the first 60 s, 59 s, ... get their 1st, 2nd, ... attempt in the minute.
		{"without, the first minute", bench.without(0, time.Minute), 15150},
		{"without, the second minute", bench.without(time.Minute, 2*time.Minute), 50 * (60 + 60 + 60 + 60 + 60 + 60 + 57)},
		{"without, nothing before the start", bench.without(-time.Minute, 0), 0},
		// Opens at 5 s: 50 × (5 + 4 + 2), then probes at 7.5, 12.5, 22.5 and 42.5 s.
		{"with, the first minute", bench.with(0, time.Minute), 550 + 4},
		{"with, after it opened: probes only", bench.with(10*time.Second, time.Minute), 3},
		{"with, between probes", bench.with(48*time.Second, time.Minute), 0},
		{"disabled: as without", disabled.with(0, time.Minute), 15150},
		// The defaults open after a minute: all of the first minute's attempts.
		{"defaults, the first minute", defaults.with(0, time.Minute), 15150},
		{"defaults, the second minute: probes at 90 s", defaults.with(time.Minute, 2*time.Minute), 1},
		{"steady without: every attempt of every event", bench.steadyWithout(), 50 * 60 * 12},
		{"steady with the defaults: one probe per 10 m", defaults.steadyWith(), 0.1},
		{"steady with no cap", newOutage(breakerBackoff, 50, ledger.BreakerPolicy{ProbeInterval: time.Second}).steadyWith(), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if math.Abs(tc.got-tc.want) > 1e-6 {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func TestOutageOpensAt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rate   float64
		p      ledger.BreakerPolicy
		want   time.Duration
		opened bool
	}{
		{"MinDuration first", 50, scaledBreaker(), 5 * time.Second, true},
		// 10 failures at 1/s take 9 s, longer than the 5 s.
		{"failures first", 1, scaledBreaker(), 9 * time.Second, true},
		{"disabled", 50, ledger.BreakerPolicy{Disabled: true, Failures: 10}, 0, false},
		{"no failures set", 50, ledger.BreakerPolicy{MinDuration: time.Second}, 0, false},
		{"nothing published", 0, scaledBreaker(), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := newOutage(breakerBackoff, tc.rate, tc.p).opensAt()
			if got != tc.want || ok != tc.opened {
				t.Errorf("got %s, %v; want %s, %v", got, ok, tc.want, tc.opened)
			}
		})
	}
}

func TestPerMinuteAndCountBetween(t *testing.T) {
	if got := perMinute(30, 20*time.Second); got != 90 {
		t.Errorf("perMinute(30, 20s) = %v, want 90", got)
	}
	if got := perMinute(30, 0); got != 0 {
		t.Errorf("perMinute over nothing = %v, want 0", got)
	}
	times := []int64{5, 1, 10, 3, 10, 7}
	if got := countBetween(times, 3, 10); got != 3 { // 5, 3, 7: from inclusive, to exclusive
		t.Errorf("countBetween = %d, want 3", got)
	}
	if got := countBetween(nil, 0, 10); got != 0 {
		t.Errorf("countBetween(nil) = %d", got)
	}
}

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		a, b float64
		want string
	}{{15150, 554, "27.3×"}, {36000, 0.1, "360000×"}, {1, 1, "1.00×"}, {1, 0, "?"}} {
		if got := ratio(tc.a, tc.b); got != tc.want {
			t.Errorf("ratio(%v, %v) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestReplaceSection(t *testing.T) {
	const h = "## B"
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"in place, before the next section", "# T\n\n## A\na\n\n## B\nold\n\n## C\nc\n", "# T\n\n## A\na\n\n## B\nnew\n\n## C\nc\n"},
		{"the last section", "# T\n\n## B\nold\nmore\n", "# T\n\n## B\nnew\n"},
		{"appended when missing", "# T\n\n## A\na\n\n", "# T\n\n## A\na\n\n## B\nnew\n"},
		{"a heading that only starts with it is another", "# T\n\n## B2\nx\n", "# T\n\n## B2\nx\n\n## B\nnew\n"},
		{"an empty file", "", "## B\nnew\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := replaceSection(tc.doc, h, "\n## B\nnew\n"); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFanoutShare(t *testing.T) {
	run := func(published float64) fanoutRun { return fanoutRun{published: published} }
	for _, tc := range []struct {
		name string
		f    fanoutStore
		want float64
	}{
		{"a fall", fanoutStore{healthy: run(400), down: run(360)}, 0.9},
		{"a rise", fanoutStore{healthy: run(250), down: run(500)}, 2},
		{"no healthy figure", fanoutStore{down: run(400)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f.fanoutShare(); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
