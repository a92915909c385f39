package ledgertest

import (
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

func exerciseBrowse(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"DeliveryFilters":     testBrowseDeliveryFilters,
		"DeliveryPages":       testBrowseDeliveryPages,
		"DeliveryReplacement": testBrowseReplacement,
		"Events":              testBrowseEvents,
	})
}

func (f *fixture) browse(p ledger.DeliveryBrowseParams) []ledger.DeliveryView {
	f.t.Helper()
	got, err := f.s.DeliveryBrowse(f.ctx, &p)
	if err != nil {
		f.t.Fatalf("DeliveryBrowse(%+v): %v", p, err)
	}
	return got
}

func viewIDs(vs []ledger.DeliveryView) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.ID
	}
	return out
}

// testBrowseDeliveryFilters checks every filter against the rows it must
// and must not return, and the fields a view adds to its delivery.
func testBrowseDeliveryFilters(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "billing", "order.*"), t0)
	f.upsert(endpoint("shop", "audit", "*"), t0)
	f.upsert(endpoint("bank", "billing", "*"), t0)
	created := f.publish("shop", "order.created", t0)
	paid := f.publish("shop", "order.paid", at(time.Millisecond))
	bank := f.publish("bank", "order.created", at(2*time.Millisecond))
	// Exhaust everything so far, then one more scheduled event.
	f.exhaustAll(at(time.Second))
	late := f.publish("shop", "user.deleted", at(2*time.Second))
	f.apply("op1", deliveryTo(t, paid, "shop/audit"), ledger.RecoveryDismiss, at(3*time.Second))

	ids := func(rs ...ledger.EventInsertResult) []string {
		var out []ledger.Delivery
		for _, r := range rs {
			out = append(out, r.Deliveries...)
		}
		return idsOf(byID(out))
	}
	one := func(r ledger.EventInsertResult, ep string) []string { return []string{deliveryTo(t, r, ep)} }
	cases := []struct {
		name string
		p    ledger.DeliveryBrowseParams
		want []string
	}{
		{"all", ledger.DeliveryBrowseParams{}, ids(created, paid, bank, late)},
		{"namespace", ledger.DeliveryBrowseParams{Namespace: "shop"}, ids(created, paid, late)},
		{"endpoint", ledger.DeliveryBrowseParams{EndpointID: "shop/billing"}, idsOf(byID([]ledger.Delivery{
			{ID: deliveryTo(t, created, "shop/billing")}, {ID: deliveryTo(t, paid, "shop/billing")}}))},
		{"event", ledger.DeliveryBrowseParams{EventID: paid.Event.ID}, ids(paid)},
		{"event type", ledger.DeliveryBrowseParams{EventType: "order.created"}, ids(created, bank)},
		{"event type and namespace", ledger.DeliveryBrowseParams{EventType: "order.created", Namespace: "bank"}, ids(bank)},
		{"state", ledger.DeliveryBrowseParams{States: []ledger.DeliveryState{ledger.StateScheduled}}, ids(late)},
		{"resolution", ledger.DeliveryBrowseParams{Resolution: ledger.ResolutionDismissed}, one(paid, "shop/audit")},
		// Failed states and resolutions have indexes of their own (0009).
		{"failed state", ledger.DeliveryBrowseParams{States: []ledger.DeliveryState{ledger.StateExhausted}}, ids(created, paid, bank)},
		{"failed state of an endpoint", ledger.DeliveryBrowseParams{EndpointID: "shop/billing", States: []ledger.DeliveryState{ledger.StateExhausted}},
			idsOf(byID([]ledger.Delivery{{ID: deliveryTo(t, created, "shop/billing")}, {ID: deliveryTo(t, paid, "shop/billing")}}))},
		{"failed state in a namespace", ledger.DeliveryBrowseParams{Namespace: "bank", States: []ledger.DeliveryState{ledger.StateExhausted}}, ids(bank)},
		{"failed state none has", ledger.DeliveryBrowseParams{States: []ledger.DeliveryState{ledger.StateCancelled}}, []string{}},
		{"two states", ledger.DeliveryBrowseParams{States: []ledger.DeliveryState{ledger.StateExhausted, ledger.StateScheduled}}, ids(created, paid, bank, late)},
		{"resolution of an endpoint", ledger.DeliveryBrowseParams{EndpointID: "shop/audit", Resolution: ledger.ResolutionUnresolved}, one(created, "shop/audit")},
		{"id", ledger.DeliveryBrowseParams{ID: deliveryTo(t, bank, "bank/billing")}, one(bank, "bank/billing")},
		{"id elsewhere", ledger.DeliveryBrowseParams{ID: deliveryTo(t, bank, "bank/billing"), Namespace: "shop"}, []string{}},
	}
	for _, c := range cases {
		got := viewIDs(f.browse(c.p))
		if len(got) == 0 && len(c.want) == 0 {
			continue
		}
		wantEqual(t, "DeliveryBrowse "+c.name, got, c.want)
	}

	v := f.browse(ledger.DeliveryBrowseParams{ID: deliveryTo(t, created, "shop/billing")})[0]
	wantEqual(t, "view delivery", v.Delivery, f.delivery(v.ID))
	wantEqual(t, "view namespace", v.Namespace, "shop")
	wantEqual(t, "view event type", v.EventType, "order.created")
	wantEqual(t, "view replacement", v.ReplacedByDelivery+v.ReplacedByEvent, "")
}

// testBrowseDeliveryPages pages through deliveries by AfterID while new ones
// are written between pages: every delivery that existed at the start is
// seen exactly once, in ID order, and no page exceeds the limit.
func testBrowseDeliveryPages(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "all", "*"), t0)
	for i := range 10 {
		f.publish("shop", "order.created", at(time.Duration(i)*time.Millisecond))
	}
	before := viewIDs(f.browse(ledger.DeliveryBrowseParams{Namespace: "shop", Limit: 1000}))
	seen := map[string]int{}
	var order []string
	after := ""
	for i := range 100 {
		page := f.browse(ledger.DeliveryBrowseParams{Namespace: "shop", AfterID: after, Limit: 3})
		if len(page) > 3 {
			t.Fatalf("page of %d with Limit 3", len(page))
		}
		if len(page) == 0 {
			break
		}
		for _, v := range page {
			seen[v.ID]++
			order = append(order, v.ID)
		}
		after = page[len(page)-1].ID
		f.publish("shop", "order.paid", at(time.Second+time.Duration(i)*time.Millisecond))
	}
	for _, id := range before {
		if seen[id] != 1 {
			t.Fatalf("delivery %s seen %d times across pages", id, seen[id])
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("delivery %s seen %d times across pages", id, n)
		}
	}
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			t.Fatalf("pages out of ID order: %s after %s", order[i], order[i-1])
		}
	}
}

// testBrowseReplacement: a retried delivery names its retry, a reissued one
// its new event and delivery.
func testBrowseReplacement(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "all", "*"), t0)
	f.publish("shop", "order.created", t0)
	f.publish("shop", "order.created", at(time.Millisecond))
	ex := f.exhaustAll(at(time.Second))
	retry := f.apply("op", ex[0].ID, ledger.RecoveryRetry, at(2*time.Second))
	reissue := f.apply("op", ex[1].ID, ledger.RecoveryReissue, at(2*time.Second))
	if retry.Outcome != ledger.OutcomeRetried || reissue.Outcome != ledger.OutcomeReissued {
		t.Fatalf("outcomes %s, %s; want Retried, Reissued", retry.Outcome, reissue.Outcome)
	}
	for _, c := range []struct {
		id         string
		dlv, event string
	}{
		{ex[0].ID, retry.NewDeliveryID, retry.NewEventID},
		{ex[1].ID, reissue.NewDeliveryID, reissue.NewEventID},
	} {
		v := f.browse(ledger.DeliveryBrowseParams{ID: c.id})
		if len(v) != 1 {
			t.Fatalf("DeliveryBrowse(%s): %d rows", c.id, len(v))
		}
		wantEqual(t, "replaced by delivery of "+c.id, v[0].ReplacedByDelivery, c.dlv)
		wantEqual(t, "replaced by event of "+c.id, v[0].ReplacedByEvent, c.event)
		if c.dlv == "" {
			t.Fatalf("recovery of %s created no delivery", c.id)
		}
	}
}

// testBrowseEvents checks EventBrowse's filters, paging and that it never
// returns secrets.
func testBrowseEvents(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "all", "*"), t0)
	secret := event("shop", "user.created", t0)
	secret.Secrets = sensitive.Bytes(`{"token":"tok_1"}`)
	secret.SecretNames = []string{"token"}
	f.insert(secret)
	a := f.publish("shop", "order.created", at(time.Millisecond))
	b := f.publish("bank", "order.created", at(2*time.Millisecond))
	browse := func(p ledger.EventBrowseParams) []string {
		t.Helper()
		got, err := f.s.EventBrowse(f.ctx, &p)
		if err != nil {
			t.Fatalf("EventBrowse(%+v): %v", p, err)
		}
		out := []string{}
		for _, e := range got {
			if e.Secrets != nil {
				t.Fatalf("EventBrowse returned the secrets of %s", e.ID)
			}
			out = append(out, e.ID)
		}
		return out
	}
	wantEqual(t, "all", browse(ledger.EventBrowseParams{}), []string{secret.ID, a.Event.ID, b.Event.ID})
	wantEqual(t, "namespace", browse(ledger.EventBrowseParams{Namespace: "shop"}), []string{secret.ID, a.Event.ID})
	wantEqual(t, "type", browse(ledger.EventBrowseParams{Type: "order.created"}), []string{a.Event.ID, b.Event.ID})
	wantEqual(t, "id", browse(ledger.EventBrowseParams{ID: b.Event.ID}), []string{b.Event.ID})
	wantEqual(t, "page", browse(ledger.EventBrowseParams{AfterID: secret.ID, Limit: 1}), []string{a.Event.ID})
	got, err := f.s.EventBrowse(f.ctx, &ledger.EventBrowseParams{ID: secret.ID})
	if err != nil || len(got) != 1 {
		t.Fatalf("EventBrowse(%s) = %v, %v", secret.ID, got, err)
	}
	wantEqual(t, "secret names stay", got[0].SecretNames, []string{"token"})
	wantEqual(t, "data", string(canon(t, got[0].Data)), string(canon(t, secret.Data)))
}
