package ledgertest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The Limits group: ledger.Limits, an endpoint's rateLimit and maxInFlight
// held for every engine on the ledger together. Sends taken at once by
// many callers never exceed the burst; the next is when the schedule says;
// the holders' slot leases never add up to more than maxInFlight, shrink
// to a fair share when another holder wants slots, and expire.

func exerciseLimits(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"RateBurstOnceUnderConcurrency": testRateConcurrent,
		"RateSpacedAndNextAt":           testRateSpaced,
		"RateReservationsNeverOverlap":  testRateReservations,
		"SlotsNeverAddUpOverMax":        testSlotsConcurrent,
		"SlotsShrinkToAFairShare":       testSlotsFairShare,
		"SlotsExpire":                   testSlotsExpire,
		"WaitingListsDueNotSent":        testWaitingList,
	})
}

func (f *fixture) takeSend(id string, l ledger.RateLimit, now time.Time) ledger.RateAnswer {
	f.t.Helper()
	a, err := f.s.EndpointRateTake(f.ctx, &ledger.RateTakeParams{EndpointID: id, Limit: l, Now: now})
	if err != nil {
		f.t.Fatalf("EndpointRateTake(%s, %v): %v", id, now, err)
	}
	return a
}

func (f *fixture) lease(holder string, now time.Time, asks ...ledger.SlotAsk) []int {
	f.t.Helper()
	got, err := f.s.EndpointSlotsLease(f.ctx, &ledger.SlotsLeaseParams{Holder: holder, Asks: asks, Now: now, Until: now.Add(10 * time.Second)})
	if err != nil {
		f.t.Fatalf("EndpointSlotsLease(%s): %v", holder, err)
	}
	return got
}

// testRateConcurrent: 8 callers × 10 takes at one instant get exactly the
// burst.
func testRateConcurrent(t *testing.T, f *fixture) {
	l := ledger.RateLimit{PerSecond: 100, Burst: 5}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		taken int
		errs  = make(chan error, 8)
	)
	for range 8 {
		wg.Go(func() {
			for range 10 {
				a, err := f.s.EndpointRateTake(f.ctx, &ledger.RateTakeParams{EndpointID: "shop/limited", Limit: l, Now: t0})
				if err != nil {
					errs <- err
					return
				}
				if a.Taken {
					mu.Lock()
					taken++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("EndpointRateTake: %v", err)
	}
	if taken != 5 {
		t.Fatalf("%d sends taken at one instant, want the burst of 5", taken)
	}
}

// testRateSpaced: without a burst, sends are one interval apart, a refusal
// says when the next may be, and endpoints have schedules of their own.
func testRateSpaced(t *testing.T, f *fixture) {
	l := ledger.RateLimit{PerSecond: 100}
	if !f.takeSend("shop/a", l, t0).Taken {
		t.Fatal("first send refused")
	}
	a := f.takeSend("shop/a", l, t0.Add(4*time.Millisecond))
	if a.Taken || !a.NextAt.Equal(t0.Add(ledger.RateInterval(l))) {
		t.Fatalf("second send 4 ms later = %+v, want refused until one interval after the first", a)
	}
	if !f.takeSend("shop/b", l, t0.Add(4*time.Millisecond)).Taken {
		t.Fatal("another endpoint's first send refused")
	}
	if !f.takeSend("shop/a", l, a.NextAt).Taken {
		t.Fatal("send at NextAt refused")
	}
	// Idle for a while: the schedule does not bank sends.
	later := t0.Add(time.Minute)
	if !f.takeSend("shop/a", l, later).Taken || f.takeSend("shop/a", l, later).Taken {
		t.Fatal("after a pause, want exactly one send at once")
	}
}

// testSlotsConcurrent: 6 holders lease one endpoint's 10 slots at once,
// each wanting all: the grants add up to at most 10, and to 10 when the
// first holders are greedy and nobody has asked yet.
func testSlotsConcurrent(t *testing.T, f *fixture) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
		errs  = make(chan error, 6)
	)
	for h := range 6 {
		wg.Go(func() {
			got, err := f.s.EndpointSlotsLease(f.ctx, &ledger.SlotsLeaseParams{
				Holder: fmt.Sprintf("engine-%d", h), Now: t0, Until: t0.Add(10 * time.Second),
				Asks: []ledger.SlotAsk{{EndpointID: "shop/a", Max: 10, Want: 10}, {EndpointID: "shop/b", Max: 3, Want: 3}},
			})
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			total += got[0]
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("EndpointSlotsLease: %v", err)
	}
	if total != 10 {
		t.Fatalf("grants add up to %d of 10 slots", total)
	}
}

// testSlotsFairShare: a holder with every slot in use shrinks to half when
// another wants slots, keeps covering its attempts in progress meanwhile,
// and the other gets the freed half once they end.
func testSlotsFairShare(t *testing.T, f *fixture) {
	ask := func(inFlight, want int) ledger.SlotAsk {
		return ledger.SlotAsk{EndpointID: "shop/a", Max: 10, InFlight: inFlight, Want: want}
	}
	if got := f.lease("a", t0, ask(0, 10)); got[0] != 10 {
		t.Fatalf("a alone granted %d, want 10", got[0])
	}
	if got := f.lease("b", t0, ask(0, 10)); got[0] != 0 {
		t.Fatalf("b granted %d while a holds all 10", got[0])
	}
	if got := f.lease("a", t0.Add(time.Second), ask(10, 10)); got[0] != 5 {
		t.Fatalf("a granted %d beside b wanting, want its share 5", got[0])
	}
	if got := f.lease("b", t0.Add(time.Second), ask(0, 10)); got[0] != 0 {
		t.Fatalf("b granted %d while a's 10 attempts run", got[0])
	}
	if got := f.lease("a", t0.Add(2*time.Second), ask(4, 10)); got[0] != 5 {
		t.Fatalf("a granted %d with 4 in flight, want 5", got[0])
	}
	if got := f.lease("b", t0.Add(2*time.Second), ask(0, 10)); got[0] != 5 {
		t.Fatalf("b granted %d once a's attempts ended, want 5", got[0])
	}
}

// testSlotsExpire: a holder that stops renewing (a dead engine) loses its
// slots when its lease ends.
func testSlotsExpire(t *testing.T, f *fixture) {
	ask := ledger.SlotAsk{EndpointID: "shop/a", Max: 4, Want: 4}
	if got := f.lease("dead", t0, ask); got[0] != 4 {
		t.Fatalf("granted %d, want 4", got[0])
	}
	if got := f.lease("live", t0.Add(9*time.Second), ask); got[0] != 0 {
		t.Fatalf("granted %d within the dead holder's lease", got[0])
	}
	if got := f.lease("live", t0.Add(10*time.Second), ask); got[0] != 4 {
		t.Fatalf("granted %d once the dead holder's lease ended, want 4", got[0])
	}
}

// testWaitingList: the deliveries due and not sent, per endpoint, with
// the oldest due time; neither those due later nor those claimed.
func testWaitingList(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "x", "order.created"), t0)
	f.upsert(endpoint("b", "y", "order.paid"), t0)
	f.publish("a", "order.created", t0)
	f.publish("a", "order.created", t0.Add(time.Second))
	f.publish("a", "order.created", t0.Add(3*time.Second))
	f.publish("b", "order.paid", t0.Add(time.Second))
	read := func(now time.Time) []ledger.Waiting {
		t.Helper()
		got, err := f.s.WaitingList(f.ctx, now)
		if err != nil {
			t.Fatalf("WaitingList: %v", err)
		}
		return got
	}
	got := read(t0.Add(2 * time.Second))
	if len(got) != 2 || got[0].EndpointID != "a/x" || got[0].Deliveries != 2 || !got[0].OldestDue.Equal(t0) ||
		got[1].EndpointID != "b/y" || got[1].Deliveries != 1 || !got[1].OldestDue.Equal(t0.Add(time.Second)) {
		t.Fatalf("WaitingList at +2s = %+v, want a/x 2 since t0 and b/y 1 since +1s", got)
	}
	f.claim("w1", t0.Add(2*time.Second), time.Minute, 10)
	if got := read(t0.Add(2 * time.Second)); len(got) != 0 {
		t.Fatalf("WaitingList after claiming everything due = %+v, want none", got)
	}
}

// testRateReservations: 6 callers reserving 5 sends each, 100 ms ahead, at
// one instant: the sends taken are spaced one interval apart (1/perSecond
// and the margin), none shared, and as many as 100 ms holds.
func testRateReservations(t *testing.T, f *fixture) {
	l := ledger.RateLimit{PerSecond: 100}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		sends []time.Time
		errs  = make(chan error, 6)
	)
	for range 6 {
		wg.Go(func() {
			a, err := f.s.EndpointRateTake(f.ctx, &ledger.RateTakeParams{EndpointID: "shop/a", Limit: l, Now: t0, N: 5, Horizon: 100 * time.Millisecond})
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			sends = append(sends, a.Sends...)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("EndpointRateTake: %v", err)
	}
	slices.SortFunc(sends, func(a, b time.Time) int { return a.Compare(b) })
	iv := ledger.RateInterval(l)
	if len(sends) != 10 {
		t.Fatalf("%d sends reserved within 100 ms, want 10 (one every %v)", len(sends), iv)
	}
	for i, s := range sends {
		if !s.Equal(t0.Add(time.Duration(i) * iv)) {
			t.Fatalf("send %d at %v after t0, want %v", i, s.Sub(t0), time.Duration(i)*iv)
		}
	}
}
