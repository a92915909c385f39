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

// TestFilterBudget: once a fan-out's filters have spent its budget, the
// remaining filtered endpoints do not receive the event, counted as
// canceled; the unfiltered ones still do.
func TestFilterBudget(t *testing.T) {
	store := openStores()["sqlite"](t)
	upsertEndpoint(t, store, "shop", "a", `data.n > 0`, "*")
	upsertEndpoint(t, store, "shop", "b", `data.n > 0`, "*")
	upsertEndpoint(t, store, "shop", "c", `data.n > 0`, "*")
	upsertEndpoint(t, store, "shop", "plain", "", "*")
	metrics := NewMetrics(prometheus.NewRegistry())
	// Each reading of the clock is a second later: the first evaluation
	// sets a deadline of one second, the second sees it reached, the
	// third passed.
	clock := filterNow
	core := newTestCore(t, storeCommitter{store}, func(c *Config) {
		c.Metrics, c.FilterBudget = metrics, time.Second
		c.Now = func() time.Time { clock = clock.Add(time.Second); return clock }
	})
	res, err := core.Publish(t.Context(), &Request{Namespace: "shop", Type: "x", Data: []byte(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	// Which two of a, b and c is the ledger's order of asking.
	var got []string
	for _, d := range res.Deliveries {
		got = append(got, d.EndpointID)
	}
	if len(got) != 3 || !slices.Contains(got, "shop/plain") {
		t.Errorf("deliveries to %v, want plain and two of a, b, c", got)
	}
	if n := metrics.FilterErrors(eventfilter.ReasonCanceled); n != 1 {
		t.Errorf("%v canceled, want 1", n)
	}
}
