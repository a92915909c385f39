package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func TestSignalOf(t *testing.T) {
	tests := []struct {
		name string
		res  dispatch.Result
		want signal
	}{
		{"2xx is up", dispatch.Result{StatusCode: 204}, up},
		{"5xx is down", dispatch.Result{StatusCode: 503}, down},
		{"a network error is down", dispatch.Result{Class: dispatch.NetworkError, Err: errors.New("refused")}, down},
		{"a timeout is down", dispatch.Result{Class: dispatch.Timeout, Err: errors.New("timeout")}, down},
		{"410 is gone", dispatch.Result{StatusCode: 410}, gone},
		{"400 is about the event", dispatch.Result{StatusCode: 400}, neutral},
		{"429 asks to slow down", dispatch.Result{StatusCode: 429}, neutral},
		{"a canceled attempt says nothing", dispatch.Result{Class: dispatch.Canceled, Err: errors.New("canceled")}, neutral},
		{"a forbidden destination says nothing of the receiver", dispatch.Result{Class: dispatch.ForbiddenDestination, Err: errors.New("no")}, neutral},
	}
	for _, tt := range tests {
		if got := signalOf(&tt.res); got != tt.want {
			t.Errorf("%s: signalOf = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestStreakTrips(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	pol := ledger.BreakerPolicy{Failures: 3, MinDuration: time.Minute}
	run := func(steps ...signal) streak {
		var k streak
		for i, s := range steps {
			k = k.observe(s, t0.Add(time.Duration(i)*40*time.Second), "HTTP 503")
		}
		return k
	}
	tests := []struct {
		name  string
		k     streak
		now   time.Time
		trips bool
	}{
		{"three failures over 80s trip", run(down, down, down), t0.Add(80 * time.Second), true},
		{"three failures within the minimum time do not", run(down, down, down), t0.Add(50 * time.Second), false},
		{"two failures do not, however long", run(down, down), t0.Add(time.Hour), false},
		{"a success ends the streak", run(down, down, up, down), t0.Add(time.Hour), false},
		{"a 4xx about the event neither grows nor ends it", run(down, neutral, down, down), t0.Add(time.Hour), true},
		{"the streak starts at its first failure", run(up, up, down, down, down), t0.Add(130 * time.Second), false},
		{"and trips a minute after it", run(up, up, down, down, down), t0.Add(140 * time.Second), true},
	}
	for _, tt := range tests {
		if got := tt.k.trips(pol, tt.now); got != tt.trips {
			t.Errorf("%s: trips = %v, want %v (streak %+v)", tt.name, got, tt.trips, tt.k)
		}
	}
	disabled := pol
	disabled.Disabled = true
	if run(down, down, down, down).trips(disabled, t0.Add(time.Hour)) {
		t.Error("a disabled breaker tripped")
	}
}

func TestProbeSchedule(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	pol := ledger.BreakerPolicy{ProbeInterval: 30 * time.Second, MaxProbeInterval: 2 * time.Minute, GoneProbeInterval: time.Hour}
	at, next := firstProbe(pol, ledger.BreakerFailing, t0)
	if at == nil || !at.Equal(t0.Add(30*time.Second)) || next != time.Minute {
		t.Fatalf("first probe after Failing = %v, then %v; want +30s, then 1m", at, next)
	}
	if got := nextInterval(pol, ledger.BreakerFailing, next); got != 2*time.Minute {
		t.Errorf("after 1m = %v, want 2m", got)
	}
	if got := nextInterval(pol, ledger.BreakerFailing, 2*time.Minute); got != 2*time.Minute {
		t.Errorf("at the cap = %v, want the cap 2m", got)
	}
	at, next = firstProbe(pol, ledger.BreakerGone, t0)
	if at == nil || !at.Equal(t0.Add(time.Hour)) || next != time.Hour {
		t.Errorf("Gone with a slow pace = %v, then %v; want +1h, then 1h", at, next)
	}
	pol.GoneProbeInterval = 0
	if at, next = firstProbe(pol, ledger.BreakerGone, t0); at != nil || next != 0 {
		t.Errorf("Gone without a pace = %v, %v; want no automatic probe", at, next)
	}
}

func TestProbeSucceeded(t *testing.T) {
	tests := []struct {
		res  dispatch.Result
		want bool
	}{
		{dispatch.Result{StatusCode: 200}, true},
		{dispatch.Result{StatusCode: 400}, true}, // answered: up, the event is another matter
		{dispatch.Result{StatusCode: 503}, false},
		{dispatch.Result{StatusCode: 410}, false},
		{dispatch.Result{StatusCode: 429}, false},
		{dispatch.Result{StatusCode: 408}, false},
		{dispatch.Result{Class: dispatch.Timeout, Err: errors.New("timeout")}, false},
	}
	for _, tt := range tests {
		if got := probeSucceeded(&tt.res); got != tt.want {
			t.Errorf("probeSucceeded(%d %s) = %v, want %v", tt.res.StatusCode, tt.res.Class, got, tt.want)
		}
	}
}

func TestRampSlots(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		elapsed time.Duration
		limit   int
		want    int
		capped  bool
	}{
		{"one at first", 0, 16, 1, true},
		{"a quarter of the way, a quarter of the limit", 15 * time.Second, 16, 4, true},
		{"nearly done", 59 * time.Second, 16, 15, true},
		{"after the ramp, the limit", time.Minute, 16, 16, false},
		{"a limit of one is never capped", 0, 1, 1, false},
	}
	for _, tt := range tests {
		got, capped := rampSlots(t0, t0.Add(tt.elapsed), time.Minute, tt.limit)
		if got != tt.want || capped != tt.capped {
			t.Errorf("%s: rampSlots = %d, %v; want %d, %v", tt.name, got, capped, tt.want, tt.capped)
		}
	}
	if got, capped := rampSlots(t0, t0, 0, 8); got != 8 || capped {
		t.Errorf("no ramp = %d, %v; want 8 uncapped", got, capped)
	}
}

func TestHeldHorizon(t *testing.T) {
	age := ledger.Policy{Backoff: backoff.Policy{MaxAge: time.Hour}, ReplayWindow: 72 * time.Hour}
	if got := heldHorizon(&age); got != time.Hour {
		t.Errorf("with maxAge = %v, want 1h", got)
	}
	attempts := ledger.Policy{Backoff: backoff.Policy{MaxAttempts: 5}, ReplayWindow: 72 * time.Hour}
	if got := heldHorizon(&attempts); got != 72*time.Hour {
		t.Errorf("attempts only = %v, want the replay window", got)
	}
}
