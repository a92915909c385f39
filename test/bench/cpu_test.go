package main

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
		wantErr    bool
	}{
		{"plain", "1234 (enginehost) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0", 300 * clockTick, false},
		// A command may hold spaces and parentheses: fields count from the last ')'.
		{"command with spaces and parens", "99 (postgres: a (b) c) S 1 99 99 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0", 10 * clockTick, false},
		{"no command", "1234 enginehost S", 0, true},
		{"too short", "1234 (x) S 1 2", 0, true},
		{"not numbers", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 u s 0 0", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPU(tc.stat)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// The meter counts what the processes used between its first and last
// sample, and a process that appears meanwhile from zero.
func TestCPUMeterOfThisProcess(t *testing.T) {
	self := os.Getpid()
	m, err := newCPUMeter(onePID(self))
	if err != nil {
		t.Fatal(err)
	}
	before, err := procCPU(self)
	if err != nil {
		t.Fatal(err)
	}
	for after := before; after-before < 3*clockTick; after, _ = procCPU(self) {
		// burn CPU until /proc shows at least three ticks more
	}
	used, err := m.used()
	if err != nil {
		t.Fatal(err)
	}
	if used < 3*clockTick {
		t.Errorf("meter saw %s, want at least %s", used, 3*clockTick)
	}
}

func TestDistOf(t *testing.T) {
	var xs []time.Duration
	for i := 1; i <= 200; i++ {
		xs = append(xs, time.Duration(201-i)*time.Millisecond)
	}
	d := distOf(xs)
	if d.p50 != 101*time.Millisecond || d.p99 != 199*time.Millisecond || d.max != 200*time.Millisecond {
		t.Errorf("got %+v", d)
	}
	if (distOf(nil) != dist{}) {
		t.Error("empty input: want zero dist")
	}
}
