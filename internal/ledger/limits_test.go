package ledger_test

import (
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func TestGCRATake(t *testing.T) {
	now := time.Unix(1000, 0)
	hundred := ledger.RateLimit{PerSecond: 100}
	iv := int64(ledger.RateInterval(hundred)) // 10.3 ms: 1/perSecond and the margin
	if iv != int64(10300*time.Microsecond) {
		t.Fatalf("RateInterval(100/s) = %v, want 10.3ms", time.Duration(iv))
	}
	at := func(d int64) int64 { return now.UnixNano() + d }
	ms := func(d int64) int64 { return d * int64(time.Millisecond) }
	cases := []struct {
		name      string
		tat       int64
		limit     ledger.RateLimit
		taken     bool
		newTAT    int64
		nextAtOff time.Duration
	}{
		{"first send", 0, hundred, true, at(iv), 0},
		{"schedule in the past is now", at(-ms(500)), hundred, true, at(iv), 0},
		{"schedule now", at(0), hundred, true, at(iv), 0},
		{"ahead without burst", at(ms(3)), hundred, false, at(ms(3)), 3 * time.Millisecond},
		{"ahead within the burst", at(2 * iv), ledger.RateLimit{PerSecond: 100, Burst: 3}, true, at(3 * iv), 0},
		{"ahead past the burst", at(3 * iv), ledger.RateLimit{PerSecond: 100, Burst: 3}, false, at(3 * iv), time.Duration(iv)},
		{"one a second", at(ms(400)), ledger.RateLimit{PerSecond: 1}, false, at(ms(400)), 400 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			taken, tat, next := ledger.GCRATake(c.tat, c.limit, now)
			if taken != c.taken || tat != c.newTAT {
				t.Fatalf("GCRATake = %v, %d; want %v, %d", taken, tat-now.UnixNano(), c.taken, c.newTAT-now.UnixNano())
			}
			if !taken && !next.Equal(now.Add(c.nextAtOff)) {
				t.Fatalf("next at %v after now, want %v", next.Sub(now), c.nextAtOff)
			}
		})
	}
}

// TestGCRAWindow: whatever the offered load, any one-second window holds
// at most perSecond+burst sends (the issue's "at most 101 in every
// 1-second window" for perSecond 100).
func TestGCRAWindow(t *testing.T) {
	for _, l := range []ledger.RateLimit{{PerSecond: 100}, {PerSecond: 7}, {PerSecond: 100, Burst: 20}} {
		var tat int64
		var sent []time.Time
		start := time.Unix(5000, 0)
		for i := range 300_000 { // offered every 10µs for 3 s
			now := start.Add(time.Duration(i) * 10 * time.Microsecond)
			var ok bool
			if ok, tat, _ = ledger.GCRATake(tat, l, now); ok {
				sent = append(sent, now)
			}
		}
		worst, j := 0, 0
		for i := range sent {
			for sent[i].Sub(sent[j]) >= time.Second {
				j++
			}
			worst = max(worst, i-j+1)
		}
		if limit := l.PerSecond + ledger.RateBurst(l); worst > limit {
			t.Errorf("%+v: %d sends in one second, want at most %d", l, worst, limit)
		}
		if got, want := len(sent), int(3*float64(l.PerSecond)/(1+ledger.RateMargin)); got < want {
			t.Errorf("%+v: %d sends in 3 s, want at least %d", l, got, want)
		}
	}
}

func TestGrantSlots(t *testing.T) {
	cases := []struct {
		name                  string
		max, inFlight, want   int
		others                []ledger.SlotLease
		wantGranted, wantHeld int
	}{
		{"alone, all", 10, 0, 10, nil, 10, 10},
		{"alone, what it wants", 10, 2, 4, nil, 4, 4},
		{"others hold some", 10, 0, 10, []ledger.SlotLease{{Held: 6, Want: 6}}, 4, 4},
		{"others hold all", 10, 0, 10, []ledger.SlotLease{{Held: 10, Want: 10}}, 0, 0},
		{"shrinks to a fair share when another wants more", 10, 10, 10, []ledger.SlotLease{{Held: 0, Want: 10}}, 5, 10},
		{"its share once its attempts end", 10, 3, 10, []ledger.SlotLease{{Held: 0, Want: 10}}, 5, 5},
		{"three holders", 10, 0, 10, []ledger.SlotLease{{Held: 3, Want: 10}, {Held: 3, Want: 10}}, 3, 3},
		{"one slot, taken", 1, 0, 1, []ledger.SlotLease{{Held: 1, Want: 1}}, 0, 0},
		{"one slot, contended, none free", 1, 0, 1, []ledger.SlotLease{{Held: 1, Want: 1}, {Held: 0, Want: 1}}, 0, 0},
		{"gives back when it wants none", 10, 0, 0, nil, 0, 0},
		{"keeps covering its attempts", 10, 4, 0, nil, 0, 4},
		{"an expired lease's attempts, over what is free", 10, 8, 10, []ledger.SlotLease{{Held: 5, Want: 5}}, 5, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, h := ledger.GrantSlots(c.max, c.inFlight, c.want, c.others)
			if g != c.wantGranted || h != c.wantHeld {
				t.Fatalf("GrantSlots = %d, %d; want %d, %d", g, h, c.wantGranted, c.wantHeld)
			}
		})
	}
}

func TestGCRAReserve(t *testing.T) {
	now := time.Unix(1000, 0)
	l := ledger.RateLimit{PerSecond: 100}
	iv := ledger.RateInterval(l)
	at := func(k int) time.Time { return now.Add(time.Duration(k) * iv) }
	cases := []struct {
		name    string
		tat     int64
		n       int
		horizon time.Duration
		want    []time.Time
		next    time.Time
	}{
		{"five within four intervals", 0, 5, 4 * iv, []time.Time{at(0), at(1), at(2), at(3), at(4)}, time.Time{}},
		{"as many as the horizon holds", 0, 5, 25 * time.Millisecond, []time.Time{at(0), at(1), at(2)}, time.Time{}},
		{"from the schedule", now.Add(15 * time.Millisecond).UnixNano(), 2, 100 * time.Millisecond,
			[]time.Time{now.Add(15 * time.Millisecond), now.Add(15*time.Millisecond + iv)}, time.Time{}},
		{"none within the horizon", now.Add(150 * time.Millisecond).UnixNano(), 2, 100 * time.Millisecond, nil, now.Add(50 * time.Millisecond)},
		{"no horizon is one send now", 0, 3, 0, []time.Time{at(0)}, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sends, _, next := ledger.GCRAReserve(c.tat, l, now, c.n, c.horizon)
			if len(sends) != len(c.want) {
				t.Fatalf("sends %v, want %v", sends, c.want)
			}
			for i := range sends {
				if !sends[i].Equal(c.want[i]) {
					t.Fatalf("sends %v, want %v", sends, c.want)
				}
			}
			if !next.Equal(c.next) {
				t.Fatalf("next %v, want %v", next, c.next)
			}
		})
	}
}

// TestGCRAReserveWindow: three engines reserving batches of 11 sends 100
// ms ahead, at whatever moments, send no more in any second than sends
// taken one by one would: perSecond+burst.
func TestGCRAReserveWindow(t *testing.T) {
	l := ledger.RateLimit{PerSecond: 100}
	var (
		tat  int64
		sent []time.Time
	)
	start := time.Unix(5000, 0)
	for i := range 3000 { // a reservation every 1 ms, by turns, for 3 s
		now := start.Add(time.Duration(i) * time.Millisecond)
		var sends []time.Time
		sends, tat, _ = ledger.GCRAReserve(tat, l, now, 11, 100*time.Millisecond)
		sent = append(sent, sends...)
	}
	worst, j := 0, 0
	for i := range sent {
		if i > 0 && sent[i].Sub(sent[i-1]) < ledger.RateInterval(l) {
			t.Fatalf("sends %d and %d are %v apart", i-1, i, sent[i].Sub(sent[i-1]))
		}
		for sent[i].Sub(sent[j]) >= time.Second {
			j++
		}
		worst = max(worst, i-j+1)
	}
	if worst > 101 {
		t.Fatalf("%d sends within one second, want at most 101", worst)
	}
}
