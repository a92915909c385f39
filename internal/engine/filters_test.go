package engine_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// TestEndpointFilters: the engine tells the publish core the filters of
// the endpoints of a namespace whose types select an event, by endpoint
// ID, following registrations, filter changes and removals; endpoints of
// other namespaces, other types or without a filter are not asked for.
func TestEndpointFilters(t *testing.T) {
	ctx := context.Background()
	e, err := engine.New(engine.Options{Store: stores()[0].open(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	register := func(ns, name, filter string, types ...string) {
		t.Helper()
		ep := endpoint(t, ns, name, "https://receiver.example/"+name, types, policy(3, time.Second))
		ep.Filter = filter
		if _, err := e.RegisterEndpoint(ctx, ep); err != nil {
			t.Fatal(err)
		}
	}
	want := func(what, ns, typ string, want ...string) {
		t.Helper()
		var got []string
		for _, f := range e.EndpointFilters(ns, typ) {
			got = append(got, f.EndpointID+": "+f.Filter)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: filters %q, want %q", what, got, want)
		}
	}
	register("shop", "b", "data.n > 1", "order.*")
	register("shop", "a", "data.n > 2", "*")
	register("shop", "plain", "", "*")
	register("shop", "invoices", "data.n > 3", "invoice.*")
	register("other", "a", "data.n > 4", "*")
	want("registered", "shop", "order.created", "shop/a: data.n > 2", "shop/b: data.n > 1")
	want("other type", "shop", "invoice.paid", "shop/a: data.n > 2", "shop/invoices: data.n > 3")
	want("namespace without endpoints", "empty", "order.created")

	register("shop", "b", "data.n > 5", "order.*")
	register("shop", "a", "", "*")
	want("filters changed", "shop", "order.created", "shop/b: data.n > 5")
	if _, err := e.RemoveEndpoint(ctx, "shop/b"); err != nil {
		t.Fatal(err)
	}
	want("removed", "shop", "order.created")
	want("other namespace untouched", "other", "order.created", "other/a: data.n > 4")
}

// TestFilterOverruns: the engine counts what an endpoint's current filter
// exceeded, wakes the endpoint's controller on the first overruns and then
// at most once a minute, drops an overrun of a filter the endpoint no
// longer has, and forgets the count when the configuration changes (the
// filter, or anything else of the spec).
func TestFilterOverruns(t *testing.T) {
	ctx := context.Background()
	clock := &manualClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	var mu sync.Mutex
	var woken []string
	e, err := engine.New(engine.Options{Store: stores()[0].open(t), Clock: clock, OnFilterOverrun: func(id string) {
		mu.Lock()
		woken = append(woken, id)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ep := endpoint(t, "shop", "slow", "https://receiver.example/slow", []string{"*"}, policy(3, time.Second))
	ep.Filter = "slow"
	if _, err := e.RegisterEndpoint(ctx, ep); err != nil {
		t.Fatal(err)
	}
	target := ledger.FilterTarget{EndpointID: "shop/slow", Filter: "slow"}
	wokenTimes := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(woken)
	}
	for range 5 {
		e.FilterOverrun(target, "timeout")
	}
	if n := wokenTimes(); n != 3 {
		t.Errorf("woken %d times for 5 overruns within a minute, want 3 (the first three)", n)
	}
	clock.advance(time.Minute)
	e.FilterOverrun(target, "cost")
	if n := wokenTimes(); n != 4 {
		t.Errorf("woken %d times after a minute, want 4", n)
	}
	got, ok := e.EndpointFilterOverruns("shop/slow")
	if !ok || got.Count != 6 || got.Filter != "slow" || got.LastReason != "cost" || !got.Last.Equal(clock.Now()) {
		t.Errorf("overruns %+v (%v), want 6 of filter slow, the last a cost at %v", got, ok, clock.Now())
	}

	e.FilterOverrun(ledger.FilterTarget{EndpointID: "shop/slow", Filter: "older"}, "timeout")
	e.FilterOverrun(ledger.FilterTarget{EndpointID: "shop/unknown", Filter: "slow"}, "timeout")
	if got, _ := e.EndpointFilterOverruns("shop/slow"); got.Count != 6 {
		t.Errorf("an overrun of another filter counted: %d, want 6", got.Count)
	}
	if _, ok := e.EndpointFilterOverruns("shop/unknown"); ok {
		t.Error("an overrun of an unknown endpoint was kept")
	}

	for _, change := range []func(*ledger.Endpoint){
		func(ep *ledger.Endpoint) { ep.URL += "/v2" },
		func(ep *ledger.Endpoint) { ep.Filter = "fixed" },
	} {
		e.FilterOverrun(ledger.FilterTarget{EndpointID: "shop/slow", Filter: ep.Filter}, "timeout")
		change(&ep)
		if _, err := e.RegisterEndpoint(ctx, ep); err != nil {
			t.Fatal(err)
		}
		if got, ok := e.EndpointFilterOverruns("shop/slow"); ok {
			t.Errorf("overruns kept after the configuration changed: %+v", got)
		}
	}
}
