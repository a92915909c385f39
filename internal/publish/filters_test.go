package publish

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookkeeper/hookkeeper/internal/eventfilter"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// storeCommitter commits each publish in its own insert, as the engine's
// group commit would with a batch of one.
type storeCommitter struct{ store ledger.Store }

func (c storeCommitter) Publish(ctx context.Context, p *ledger.EventInsertParams) (ledger.EventInsertResult, error) {
	res, err := c.store.EventInsertMany(ctx, []*ledger.EventInsertParams{p})
	if err != nil {
		return ledger.EventInsertResult{}, err
	}
	return res[0], nil
}

func openStores() map[string]func(t *testing.T) ledger.Store {
	return map[string]func(t *testing.T) ledger.Store{
		"sqlite": func(t *testing.T) ledger.Store {
			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		"postgres": func(t *testing.T) ledger.Store { return pgtest.NewSchemaStore(t) },
	}
}

var filterNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func upsertEndpoint(t *testing.T, s ledger.Store, ns, name, filter string, types ...string) {
	t.Helper()
	_, err := s.EndpointUpsert(t.Context(), &ledger.EndpointUpsertParams{Now: filterNow, Endpoint: ledger.Endpoint{
		ID: ledger.EndpointID(ns, name), Namespace: ns, Name: name, URL: "https://receiver.example/" + name,
		EventTypes: types, Filter: filter, Secrets: []ledger.SigningSecret{{Value: sensitive.Bytes("whsec_" + name)}},
		AckMode: ledger.AckResponse,
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFiltersDecideTheFanOut: on both stores, endpoints whose types match
// receive an event only when their filter says so; one whose filter
// cannot be evaluated on an event (a missing field) or does not compile
// receives nothing and is counted, and the publish succeeds and lists the
// deliveries made.
func TestFiltersDecideTheFanOut(t *testing.T) {
	for name, open := range openStores() {
		t.Run(name, func(t *testing.T) {
			store := open(t)
			upsertEndpoint(t, store, "shop", "all", "", "order.*")
			upsertEndpoint(t, store, "shop", "big-eur", `data.amount > 1000 && data.currency == "EUR"`, "order.*")
			upsertEndpoint(t, store, "shop", "gold", `data.customer.tier == "gold"`, "order.*")
			upsertEndpoint(t, store, "shop", "refunds", `type == "order.refunded" && data.amount >= 0`, "*")
			upsertEndpoint(t, store, "shop", "broken", `data.amount >`, "order.*")
			metrics := NewMetrics(prometheus.NewRegistry())
			core := newTestCore(t, storeCommitter{store}, func(c *Config) { c.Metrics = metrics; c.Now = func() time.Time { return filterNow } })
			for _, tc := range []struct {
				typ, data string
				want      []string
			}{
				{"order.created", `{"amount":1500,"currency":"EUR","customer":{"tier":"gold"}}`, []string{"shop/all", "shop/big-eur", "shop/gold"}},
				{"order.created", `{"amount":1500.5,"currency":"USD","customer":{"tier":"gold"}}`, []string{"shop/all", "shop/gold"}},
				{"order.created", `{"amount":999,"currency":"EUR","customer":{"tier":"silver"}}`, []string{"shop/all"}},
				// No customer: gold's filter fails on a missing field.
				{"order.created", `{"amount":2000,"currency":"EUR"}`, []string{"shop/all", "shop/big-eur"}},
				{"order.refunded", `{"amount":10,"currency":"EUR","customer":{"tier":"gold"}}`, []string{"shop/all", "shop/gold", "shop/refunds"}},
				{"invoice.paid", `{"amount":5000}`, nil},
			} {
				res, err := core.Publish(t.Context(), &Request{Namespace: "shop", Type: tc.typ, Data: []byte(tc.data)})
				if err != nil {
					t.Fatalf("publish %s %s: %v", tc.typ, tc.data, err)
				}
				var got []string
				for _, d := range res.Deliveries {
					got = append(got, d.EndpointID)
				}
				slices.Sort(got)
				if !slices.Equal(got, tc.want) {
					t.Errorf("%s %s: deliveries to %v, want %v", tc.typ, tc.data, got, tc.want)
				}
			}
			if n := metrics.FilterErrors(eventfilter.ReasonNoSuchKey); n != 1 {
				t.Errorf("%v no_such_key errors, want 1 (gold on the event without a customer)", n)
			}
			if n := metrics.FilterErrors(eventfilter.ReasonCompile); n != 5 {
				t.Errorf("%v compile errors, want 5 (broken on each order event)", n)
			}
		})
	}
}

// sourceCommitter is a storeCommitter that knows the filters of the
// endpoints (FilterSource), as the engine does, and hears overruns.
type sourceCommitter struct {
	storeCommitter
	targets  []ledger.FilterTarget
	overruns []string
}

func (c *sourceCommitter) EndpointFilters(string, string) []ledger.FilterTarget { return c.targets }

func (c *sourceCommitter) FilterOverrun(t ledger.FilterTarget, reason string) {
	c.overruns = append(c.overruns, t.EndpointID+"="+reason)
}

func filtered(ns, filter string, names ...string) []ledger.FilterTarget {
	var ts []ledger.FilterTarget
	for _, n := range names {
		ts = append(ts, ledger.FilterTarget{EndpointID: ledger.EndpointID(ns, n), Filter: filter})
	}
	return ts
}

func endpointsOf(res ledger.EventInsertResult) []string {
	var got []string
	for _, d := range res.Deliveries {
		got = append(got, d.EndpointID)
	}
	slices.Sort(got)
	return got
}

// TestFilterBudget: once a fan-out's filters have spent the event's
// budget, the remaining filtered endpoints do not receive the event, each
// counted as budget and told to the overrun sink; the unfiltered ones
// still do.
func TestFilterBudget(t *testing.T) {
	store := openStores()["sqlite"](t)
	for _, n := range []string{"a", "b", "c"} {
		upsertEndpoint(t, store, "shop", n, `data.n > 0`, "*")
	}
	upsertEndpoint(t, store, "shop", "plain", "", "*")
	metrics := NewMetrics(prometheus.NewRegistry())
	committer := &sourceCommitter{storeCommitter: storeCommitter{store}, targets: filtered("shop", `data.n > 0`, "a", "b", "c")}
	// Each reading of the clock is a second later. The core reads it for
	// the event (1), its budget's start (2: the deadline is 5.5), the
	// slot's patience (3), a's time left (4: 1.5 s) and a's evaluation
	// (5); b's time left (6) is past the deadline, and c's.
	clock := filterNow
	core := newTestCore(t, committer, func(c *Config) {
		c.Metrics, c.FilterBudget = metrics, 3500*time.Millisecond
		c.Now = func() time.Time { clock = clock.Add(time.Second); return clock }
	})
	res, err := core.Publish(t.Context(), &Request{Namespace: "shop", Type: "x", Data: []byte(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := endpointsOf(res), []string{"shop/a", "shop/plain"}; !slices.Equal(got, want) {
		t.Errorf("deliveries to %v, want %v", got, want)
	}
	if n := metrics.FilterErrors(ReasonBudget); n != 2 {
		t.Errorf("%v over budget, want 2", n)
	}
	if want := []string{"shop/b=budget", "shop/c=budget"}; !slices.Equal(committer.overruns, want) {
		t.Errorf("overruns heard %v, want %v", committer.overruns, want)
	}
}

// TestFilterSlotsPerNamespace: a namespace whose evaluator is taken (its
// filters busy) gets its filters undecided within its budget, counted as
// budget, while another namespace's filters are decided: one namespace's
// filters hold only its own publishes.
func TestFilterSlotsPerNamespace(t *testing.T) {
	store := openStores()["sqlite"](t)
	for _, ns := range []string{"busy", "calm"} {
		upsertEndpoint(t, store, ns, "f", `data.n > 0`, "*")
		upsertEndpoint(t, store, ns, "plain", "", "*")
	}
	metrics := NewMetrics(prometheus.NewRegistry())
	committer := &sourceCommitter{storeCommitter: storeCommitter{store}}
	core := newTestCore(t, committer, func(c *Config) {
		c.Metrics, c.FilterBudget = metrics, time.Millisecond
		c.Now = func() time.Time { return filterNow }
	})
	release, ok := core.slots.acquire(t.Context(), "busy", 0)
	if !ok {
		t.Fatal("the busy namespace's slot could not be taken")
	}
	defer release()
	for _, tc := range []struct {
		ns   string
		want []string
	}{
		{"busy", []string{"busy/plain"}},
		{"calm", []string{"calm/f", "calm/plain"}},
	} {
		committer.targets = filtered(tc.ns, `data.n > 0`, "f")
		res, err := core.Publish(t.Context(), &Request{Namespace: tc.ns, Type: "x", Data: []byte(`{"n":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		if got := endpointsOf(res); !slices.Equal(got, tc.want) {
			t.Errorf("%s: deliveries to %v, want %v", tc.ns, got, tc.want)
		}
	}
	if want := []string{"busy/f=budget"}; !slices.Equal(committer.overruns, want) {
		t.Errorf("overruns heard %v, want %v", committer.overruns, want)
	}
}

// TestFilterTimeoutIsAnOverrun: an evaluation stopped by its time budget
// (the clock injected, a second a reading: the evaluation reads it every
// few dozen calls) is no match, counted as timeout and told to the sink;
// the event still reaches the endpoints whose filters were decided.
func TestFilterTimeoutIsAnOverrun(t *testing.T) {
	store := openStores()["sqlite"](t)
	const slow = `lists.range(1000).all(i, lists.range(1000).all(j, i + j >= 0))`
	upsertEndpoint(t, store, "shop", "slow", slow, "*")
	upsertEndpoint(t, store, "shop", "fast", `data.n > 0`, "*")
	metrics := NewMetrics(prometheus.NewRegistry())
	committer := &sourceCommitter{storeCommitter: storeCommitter{store},
		targets: append(filtered("shop", `data.n > 0`, "fast"), filtered("shop", slow, "slow")...)}
	clock := filterNow
	core := newTestCore(t, committer, func(c *Config) {
		c.Metrics, c.FilterBudget, c.FilterEvalTimeout = metrics, time.Hour, 2*time.Second
		c.Now = func() time.Time { clock = clock.Add(time.Second); return clock }
	})
	res, err := core.Publish(t.Context(), &Request{Namespace: "shop", Type: "x", Data: []byte(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := endpointsOf(res), []string{"shop/fast"}; !slices.Equal(got, want) {
		t.Errorf("deliveries to %v, want %v", got, want)
	}
	if n := metrics.FilterErrors(eventfilter.ReasonTimeout); n != 1 {
		t.Errorf("%v timeouts, want 1", n)
	}
	if want := []string{"shop/slow=timeout"}; !slices.Equal(committer.overruns, want) {
		t.Errorf("overruns heard %v, want %v", committer.overruns, want)
	}
}

// TestFiltersLearntFromTheLedger: a core whose committer does not know the
// endpoints' filters (or knows an older set) learns them from the
// ledger's refusal and decides them before the event is accepted, once.
func TestFiltersLearntFromTheLedger(t *testing.T) {
	store := openStores()["sqlite"](t)
	upsertEndpoint(t, store, "shop", "big", `data.n > 10`, "*")
	upsertEndpoint(t, store, "shop", "small", `data.n <= 10`, "*")
	committer := &countingCommitter{storeCommitter: storeCommitter{store}}
	core := newTestCore(t, committer)
	res, err := core.Publish(t.Context(), &Request{Namespace: "shop", Type: "x", Data: []byte(`{"n":20}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := endpointsOf(res), []string{"shop/big"}; !slices.Equal(got, want) {
		t.Errorf("deliveries to %v, want %v", got, want)
	}
	if committer.calls != 2 {
		t.Errorf("%d commits, want 2 (refused undecided, then accepted)", committer.calls)
	}
}

type countingCommitter struct {
	storeCommitter
	calls int
}

func (c *countingCommitter) Publish(ctx context.Context, p *ledger.EventInsertParams) (ledger.EventInsertResult, error) {
	c.calls++
	return c.storeCommitter.Publish(ctx, p)
}
