package main

import (
	"strings"
	"testing"
	"time"
)

// TestTracingVerdict: the median of the rounds' on/off ratios is judged
// against issue #46's 3%.
func TestTracingVerdict(t *testing.T) {
	run := func(cpu time.Duration) costRun { return costRun{engineCPU: cpu} }
	for _, tt := range []struct {
		on   []time.Duration
		want string
	}{
		{[]time.Duration{101, 102, 150}, "meets"},      // median 1.02: one noisy round does not decide
		{[]time.Duration{104, 105, 101}, "**misses**"}, // median 1.04
	} {
		r := tracingResults{duration: time.Second}
		for _, on := range tt.on {
			r.rounds = append(r.rounds, [2]costRun{run(100 * time.Microsecond), run(on * time.Microsecond)})
		}
		if md := r.markdown("machine"); !strings.Contains(md, tt.want+" issue #46's bar") {
			t.Errorf("rounds %v: %s", tt.on, md)
		}
	}
}
