package ledgertest

import (
	"slices"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func exerciseStats(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"CountersFollowEveryTransition": testStatsLifecycle,
		"ActivityListsEveryEndpoint":    testActivityList,
		"ActivitySinceReadsWhatChanged": func(t *testing.T, f *fixture) { testActivitySince(t, f, false) },
	})
}

// ExerciseActivityExact checks that EndpointActivitySince returns nothing
// but what changed. newStore must return, as for Exercise, a fresh store,
// whose activity overlap (ledger.ActivityOverlap) is 0: no store shortens
// it through the Store interface, so each driver's tests run this with a
// store they set so.
func ExerciseActivityExact(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	t.Helper()
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"ActivitySinceReadsOnlyWhatChanged": func(t *testing.T, f *fixture) { testActivitySince(t, f, true) },
	})
}

// testActivitySince checks EndpointActivitySince: from the zero cursor,
// what EndpointActivityList reads; from a later cursor, the endpoints whose
// counters changed (an event, a deletion's cancellations), whose deferrals
// did, and new ones, each as EndpointActivityList reads it; and cursors that
// never go back. With exact (a store without overlap), it returns those
// endpoints alone.
func testActivitySince(t *testing.T, f *fixture, exact bool) {
	since := func(c ledger.ActivityCursor) (map[string]ledger.EndpointActivity, []string, ledger.ActivityCursor) {
		t.Helper()
		l, next, err := f.s.EndpointActivitySince(f.ctx, c)
		if err != nil {
			t.Fatalf("EndpointActivitySince(%+v): %v", c, err)
		}
		if next.At < c.At {
			t.Fatalf("EndpointActivitySince(%+v) went back to %+v", c, next)
		}
		byID := map[string]ledger.EndpointActivity{}
		var ids []string
		for _, a := range l {
			byID[a.Stats.EndpointID] = a
			ids = append(ids, a.Stats.EndpointID)
		}
		if !slices.IsSorted(ids) {
			t.Fatalf("EndpointActivitySince(%+v) not in ID order: %v", c, ids)
		}
		return byID, ids, next
	}
	// want checks that a read from a cursor has the changed endpoints, as
	// EndpointActivityList reads them, and, when exact, no other.
	want := func(what string, got map[string]ledger.EndpointActivity, ids []string, changed ...string) {
		t.Helper()
		for _, id := range changed {
			a, ok := got[id]
			if !ok {
				t.Fatalf("%s: no entry of %s in %v", what, id, ids)
			}
			wantEqual(t, what+": "+id, a, f.activity(id))
		}
		if exact {
			wantEqual(t, what+": endpoints", ids, changed)
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		f.upsert(endpoint("shop", name, name), t0)
	}
	f.publish("shop", "a", t0)
	f.publish("shop", "c", t0)

	all, ids, c1 := since(ledger.ActivityCursor{})
	list, err := f.s.EndpointActivityList(f.ctx)
	if err != nil {
		t.Fatalf("EndpointActivityList: %v", err)
	}
	wantEqual(t, "the zero cursor's read", ids, []string{"shop/a", "shop/b", "shop/c"})
	for _, a := range list {
		wantEqual(t, "the zero cursor's read of "+a.Stats.EndpointID, all[a.Stats.EndpointID], a)
	}

	deferred := at(2 * time.Second)
	f.publish("shop", "a", at(time.Second))
	f.deferAt("shop/b", 1, deferred)
	f.upsert(endpoint("shop", "d", "d"), t0)
	got, ids, c2 := since(c1)
	want("after an event, a deferral and a new endpoint", got, ids, "shop/a", "shop/b", "shop/d")
	if a, b := got["shop/a"], got["shop/b"]; a.Stats.Pending != 2 || b.LastDeferralAt == nil || !b.LastDeferralAt.Equal(deferred) {
		t.Fatalf("changed entries shop/a %+v, shop/b %+v: want 2 pending and a deferral at %v", a, b, deferred)
	}

	if _, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: "shop/c", Now: at(3 * time.Second)}); err != nil {
		t.Fatalf("EndpointDelete: %v", err)
	}
	got, ids, _ = since(c2)
	want("after a deletion", got, ids, "shop/c")
	if c := got["shop/c"]; c.Stats.Cancelled != 1 {
		t.Fatalf("the deleted endpoint's entry %+v: want its delivery cancelled", c)
	}
}

// testStatsLifecycle moves deliveries through every transition and checks
// the counters and last outcomes after each step.
func testStatsLifecycle(t *testing.T, f *fixture) {
	const ep = "shop/all"
	f.upsert(endpoint("shop", "all", "*"), t0)
	wantEqual(t, "stats of a new endpoint", f.stats(ep), ledger.EndpointStats{EndpointID: ep})
	f.upsert(endpoint("shop", "bystander", "other.type"), t0)

	var ids []string
	for _, r := range f.insert(event("shop", "a", t0), event("shop", "b", t0), event("shop", "c", t0)) {
		ids = append(ids, r.Deliveries[0].ID)
	}
	f.wantCounts(ep, counts{Pending: 3})

	first := claimedIDs(f.claim("w", t0, time.Minute, 2))
	f.wantCounts(ep, counts{Pending: 1, InFlight: 2})

	if err := f.s.DeliveryRelease(f.ctx, &ledger.DeliveryReleaseParams{DeliveryID: first[1], Owner: "w", DueAt: t0, Now: t0}); err != nil {
		t.Fatalf("DeliveryRelease: %v", err)
	}
	f.wantCounts(ep, counts{Pending: 2, InFlight: 1})

	fail1 := at(time.Second)
	f.mustRecord(attempt(first[0], "w", fail1, 503, ledger.Next{State: ledger.StateScheduled, DueAt: t0}))
	f.wantCounts(ep, counts{Pending: 3})
	st := f.stats(ep)
	if st.LastFailureAt == nil || !st.LastFailureAt.Equal(fail1) || st.LastFailureReason != "HTTP 503" || st.LastSuccessAt != nil {
		t.Fatalf("after a retryable failure: %+v", st)
	}

	f.claim("w", at(2*time.Second), time.Minute, 10)
	f.wantCounts(ep, counts{InFlight: 3})

	// An expired lease taken over and a refused record change nothing.
	f.claim("v", at(2*time.Second+time.Minute), time.Minute, 10)
	f.wantCounts(ep, counts{InFlight: 3})
	if r := f.record(attempt(ids[0], "w", at(3*time.Minute), 200, ledger.Next{State: ledger.StateDelivered})); r.Err == nil {
		t.Fatal("record by the former lease holder accepted")
	}
	f.wantCounts(ep, counts{InFlight: 3})

	done := at(4 * time.Minute)
	exhaust := attempt(ids[2], "v", done, 0, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable})
	exhaust.Attempt.Error = "tls: certificate expired"
	res, err := f.s.AttemptRecordMany(f.ctx, []*ledger.AttemptRecordParams{
		attempt(ids[0], "v", done, 200, ledger.Next{State: ledger.StateDelivered}),
		attempt(ids[1], "v", done, 202, ledger.Next{State: ledger.StateAwaitingAck, AckDeadline: at(time.Hour)}),
		exhaust,
	})
	if err != nil {
		t.Fatalf("AttemptRecordMany: %v", err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("item %d: %v", i, r.Err)
		}
	}
	f.wantCounts(ep, counts{Delivered: 1, AwaitingAck: 1, ExhaustedUnresolved: 1})
	st = f.stats(ep)
	if st.LastSuccessAt == nil || !st.LastSuccessAt.Equal(done) || st.LastFailureAt == nil || !st.LastFailureAt.Equal(done) ||
		st.LastFailureReason != "tls: certificate expired" {
		t.Fatalf("after success and exhaustion: %+v", st)
	}

	// A later success leaves the last failure as it was.
	later := at(5 * time.Minute)
	id := f.publish("shop", "d", later).Deliveries[0].ID
	f.wantCounts(ep, counts{Pending: 1, Delivered: 1, AwaitingAck: 1, ExhaustedUnresolved: 1})
	f.claimOne("w", later)
	f.mustRecord(attempt(id, "w", later, 200, ledger.Next{State: ledger.StateDelivered}))
	st = f.stats(ep)
	if !st.LastSuccessAt.Equal(later) || !st.LastFailureAt.Equal(done) || st.LastFailureReason != "tls: certificate expired" {
		t.Fatalf("after a later success: %+v", st)
	}

	// Deletion cancels the live ones; the counters stay readable.
	f.publish("shop", "e", later)
	f.publish("shop", "f", later)
	f.claim("w", later, time.Minute, 1)
	f.wantCounts(ep, counts{Pending: 1, InFlight: 1, Delivered: 2, AwaitingAck: 1, ExhaustedUnresolved: 1})
	if _, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: ep, Now: later}); err != nil {
		t.Fatalf("EndpointDelete: %v", err)
	}
	f.wantCounts(ep, counts{Delivered: 2, ExhaustedUnresolved: 1, Cancelled: 3})
	f.wantCounts("shop/bystander", counts{})
}

// testActivityList checks EndpointActivityList: every endpoint with
// counters, deleted ones included, in ID order, each with what
// EndpointStats reads and its latest deferral.
func testActivityList(t *testing.T, f *fixture) {
	list := func() []ledger.EndpointActivity {
		t.Helper()
		l, err := f.s.EndpointActivityList(f.ctx)
		if err != nil {
			t.Fatalf("EndpointActivityList: %v", err)
		}
		return l
	}
	if l := list(); len(l) != 0 {
		t.Fatalf("EndpointActivityList of an empty ledger = %+v, want none", l)
	}
	for _, name := range []string{"c", "a", "b"} {
		f.upsert(endpoint("shop", name, "*"), t0)
	}
	f.upsert(endpoint("bar", "z", "*"), t0)
	f.insert(event("shop", "a", t0))
	f.claim("w", t0, time.Minute, 1)
	early, late := at(time.Second), at(90*time.Second)
	f.deferAt("shop/b", 1, early)
	f.deferAt("shop/b", 2, late)
	f.deferAt("shop/a", 1, early)
	if _, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: "shop/c", Now: t0}); err != nil {
		t.Fatalf("EndpointDelete: %v", err)
	}

	l := list()
	var ids []string
	for _, a := range l {
		ids = append(ids, a.Stats.EndpointID)
		wantEqual(t, "stats of "+a.Stats.EndpointID, a.Stats, f.stats(a.Stats.EndpointID))
	}
	wantEqual(t, "endpoints listed", ids, []string{"bar/z", "shop/a", "shop/b", "shop/c"})
	deferrals := map[string]*time.Time{}
	for _, a := range l {
		deferrals[a.Stats.EndpointID] = a.LastDeferralAt
	}
	wantEqual(t, "latest deferrals", deferrals, map[string]*time.Time{"bar/z": nil, "shop/a": &early, "shop/b": &late, "shop/c": nil})
	if st := f.stats("shop/c"); st.Cancelled != 1 {
		t.Fatalf("the deleted endpoint's counters = %+v, want its delivery cancelled", st)
	}
}
