package ledgertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

func exerciseEvents(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"FanOutByNamespaceAndType":     testFanOut,
		"FanOutLimitRefusesWholeEvent": testFanOutLimit,
		"FanOutLimitKeepsIdempotency":  testFanOutLimitIdempotency,
		"AddressedToOneEndpoint":       testAddressed,
		"EventIsStoredAsGiven": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "orders", "order.created"), t0)
			p := event("shop", "order.created", at(time.Second))
			p.Data = json.RawMessage(`{"order": {"id": "o-1", "lines": [1, 2, 3]}, "note": "ünïcode"}`)
			p.BodyHash = hash(p.Data)
			p.Secrets = sensitive.Bytes(`{"confirmToken":"tok_s3cr3t"}`)
			p.SecretNames = []string{"confirmToken"}
			p.ReissueOf = "evt_00000000000000000000000000"
			p.IdempotencyKey = "order-o-1"
			res := f.insert(p)[0]
			if res.Err != nil || res.Duplicate {
				t.Fatalf("EventInsertMany item: err %v, duplicate %v", res.Err, res.Duplicate)
			}
			want := ledger.Event{
				ID: p.ID, Namespace: p.Namespace, Type: p.Type, Data: canon(t, p.Data),
				Secrets: p.Secrets, SecretNames: p.SecretNames, ReissueOf: p.ReissueOf,
				IdempotencyKey: p.IdempotencyKey, BodyHash: p.BodyHash, CreatedAt: p.Now,
			}
			wantEqual(t, "inserted event", canonEvent(t, res.Event), want)
			got, err := f.s.EventGet(f.ctx, p.ID)
			if err != nil {
				t.Fatalf("EventGet: %v", err)
			}
			wantEqual(t, "EventGet", canonEvent(t, got), want)
			if string(got.Secrets.Reveal()) != `{"confirmToken":"tok_s3cr3t"}` {
				t.Fatalf("secrets read back as %q", got.Secrets.Reveal())
			}
			if got.SecretsScrubAt != nil {
				t.Fatalf("fresh event has SecretsScrubAt %v", got.SecretsScrubAt)
			}
		},
		"EventWithoutSecrets": func(t *testing.T, f *fixture) {
			res := f.publish("shop", "order.created", t0)
			got, err := f.s.EventGet(f.ctx, res.Event.ID)
			if err != nil {
				t.Fatalf("EventGet: %v", err)
			}
			if len(got.Secrets) != 0 || len(got.SecretNames) != 0 {
				t.Fatalf("event without secrets reads back secrets %q names %v", got.Secrets.Reveal(), got.SecretNames)
			}
			if len(res.Deliveries) != 0 {
				t.Fatalf("event without subscribers has %d deliveries", len(res.Deliveries))
			}
		},
		"SecretsNeverFormatted": testSecretsNeverFormatted,
		"FilterDecidesAmongMatchingTypes": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			big := endpoint("shop", "big", "order.*")
			big.Filter = "big"
			f.upsert(big, t0)
			other := endpoint("shop", "other", "invoice.*")
			other.Filter = "any"
			f.upsert(other, t0)
			withFilter := func(match bool) *ledger.EventInsertParams {
				p := event("shop", "order.created", t0)
				p.Decided = ledger.FilterDecisions{{EndpointID: "shop/big", Filter: "big"}: match}
				return p
			}
			res := f.insert(withFilter(true), withFilter(false))
			for i, r := range res {
				if r.Err != nil {
					t.Fatalf("item %d: %v", i, r.Err)
				}
			}
			// The filter of an endpoint whose types do not match the
			// event's is neither needed nor asked for.
			wantEqual(t, "deliveries per item", [][]string{
				endpointsOf(res[0].Deliveries), endpointsOf(res[1].Deliveries),
			}, [][]string{{"shop/all", "shop/big"}, {"shop/all"}})
		},
		"UndecidedFilterRefusesWholeEvent": testUndecidedFilter,
		"BatchAppliesInOrderAcrossNamespaces": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("a", "all", "*"), t0)
			f.upsert(endpoint("b", "all", "*"), t0)
			ps := []*ledger.EventInsertParams{event("a", "x", t0), event("b", "y", t0), event("a", "z", t0), event("c", "x", t0)}
			res := f.insert(ps...)
			for i, r := range res {
				if r.Err != nil || r.Event.ID != ps[i].ID {
					t.Fatalf("result %d: event %s err %v, want event %s", i, r.Event.ID, r.Err, ps[i].ID)
				}
			}
			wantEqual(t, "deliveries per item", [][]string{
				endpointsOf(res[0].Deliveries), endpointsOf(res[1].Deliveries),
				endpointsOf(res[2].Deliveries), endpointsOf(res[3].Deliveries),
			}, [][]string{{"a/all"}, {"b/all"}, {"a/all"}, nil})
			f.wantCounts("a/all", counts{Pending: 2})
			f.wantCounts("b/all", counts{Pending: 1})
		},
		"BatchErrorCommitsNothing": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			taken := f.publish("shop", "order.created", t0)
			fresh := event("shop", "order.created", t0)
			fresh.IdempotencyKey = "fresh"
			reused := event("shop", "order.created", t0)
			reused.ID = taken.Event.ID // an event ID may be used once
			if _, err := f.s.EventInsertMany(f.ctx, []*ledger.EventInsertParams{fresh, reused}); err == nil {
				t.Fatal("EventInsertMany with a reused event ID succeeded")
			}
			_, err := f.s.EventGet(f.ctx, fresh.ID)
			wantErr(t, "EventGet of an event from a failed batch", err, ledger.ErrNotFound)
			f.wantCounts("shop/all", counts{Pending: 1})
			// Its idempotency key was not taken either.
			res := f.insert(fresh)[0]
			if res.Err != nil || res.Duplicate {
				t.Fatalf("retrying the batch's event: err %v duplicate %v", res.Err, res.Duplicate)
			}
		},
		"IdempotentReplayReturnsOriginal": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "one", "order.*"), t0)
			f.upsert(endpoint("shop", "two", "*"), t0)
			p := event("shop", "order.created", t0)
			p.IdempotencyKey = "k1"
			p.Secrets, p.SecretNames = sensitive.Bytes(`{"t":"tok"}`), []string{"t"}
			orig := f.insert(p)[0]
			if orig.Err != nil || orig.Duplicate || len(orig.Deliveries) != 2 {
				t.Fatalf("first insert: err %v duplicate %v deliveries %d", orig.Err, orig.Duplicate, len(orig.Deliveries))
			}
			// A third endpoint appears and a delivery moves on: the replay
			// still answers with the original event and its deliveries.
			f.upsert(endpoint("shop", "three", "*"), at(time.Second))
			f.claim("w", at(time.Second), time.Minute, 1)

			again := event("shop", "order.created", at(time.Minute))
			again.Data, again.BodyHash, again.IdempotencyKey = p.Data, p.BodyHash, "k1"
			res := f.insert(again)[0]
			if res.Err != nil || !res.Duplicate {
				t.Fatalf("replay: err %v duplicate %v, want a duplicate", res.Err, res.Duplicate)
			}
			wantEqual(t, "replayed event", canonEvent(t, res.Event), canonEvent(t, orig.Event))
			var current []ledger.Delivery
			for _, d := range orig.Deliveries {
				current = append(current, f.delivery(d.ID))
			}
			wantEqual(t, "replayed deliveries", byID(res.Deliveries), byID(current))
			_, err := f.s.EventGet(f.ctx, again.ID)
			wantErr(t, "EventGet of the replay's own ID", err, ledger.ErrNotFound)
			if all := f.list(ledger.DeliveryBrowseParams{}); len(all) != 2 {
				t.Fatalf("deliveries after replay: %d, want 2", len(all))
			}
			f.wantCounts("shop/three", counts{})
		},
		"IdempotencyConflictIsPerItem": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			p := event("shop", "order.created", t0)
			p.IdempotencyKey = "k1"
			orig := f.insert(p)[0]

			clash := event("shop", "order.created", at(time.Second))
			clash.IdempotencyKey = "k1" // same key, different body
			ok := event("shop", "order.created", at(time.Second))
			res := f.insert(clash, ok)
			wantErr(t, "reused key with another body", res[0].Err, ledger.ErrIdempotencyConflict)
			if res[0].Duplicate {
				t.Fatal("a conflict is not a duplicate")
			}
			if res[1].Err != nil || len(res[1].Deliveries) != 1 {
				t.Fatalf("item after a conflict: err %v, %d deliveries; want it inserted", res[1].Err, len(res[1].Deliveries))
			}
			_, err := f.s.EventGet(f.ctx, clash.ID)
			wantErr(t, "EventGet of the conflicting event", err, ledger.ErrNotFound)
			got, err := f.s.EventGet(f.ctx, orig.Event.ID)
			if err != nil || string(got.BodyHash) != string(p.BodyHash) {
				t.Fatalf("original after conflict: %v, hash changed: %v", err, string(got.BodyHash) != string(p.BodyHash))
			}
			f.wantCounts("shop/all", counts{Pending: 2})
		},
		"KeyRepeatedWithinBatch": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			first := event("shop", "order.created", t0)
			first.IdempotencyKey = "k"
			same := event("shop", "order.created", t0)
			same.Data, same.BodyHash, same.IdempotencyKey = first.Data, first.BodyHash, "k"
			other := event("shop", "order.created", t0)
			other.IdempotencyKey = "k"
			res := f.insert(first, same, other)
			if res[0].Err != nil || res[0].Duplicate || len(res[0].Deliveries) != 1 {
				t.Fatalf("first: %+v", res[0])
			}
			if res[1].Err != nil || !res[1].Duplicate || res[1].Event.ID != first.ID {
				t.Fatalf("same key and body in the batch: err %v duplicate %v event %s, want duplicate of %s", res[1].Err, res[1].Duplicate, res[1].Event.ID, first.ID)
			}
			wantEqual(t, "duplicate's deliveries", idsOf(res[1].Deliveries), idsOf(res[0].Deliveries))
			wantErr(t, "same key, other body in the batch", res[2].Err, ledger.ErrIdempotencyConflict)
			f.wantCounts("shop/all", counts{Pending: 1})
		},
		"EmptyKeyNeverDedupes": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			a := event("shop", "order.created", t0)
			b := event("shop", "order.created", t0)
			b.Data, b.BodyHash = a.Data, a.BodyHash
			res := f.insert(a, b)
			res = append(res, f.insert(event("shop", "order.created", t0))...)
			for i, r := range res {
				if r.Err != nil || r.Duplicate || len(r.Deliveries) != 1 {
					t.Fatalf("item %d without key: err %v duplicate %v deliveries %d", i, r.Err, r.Duplicate, len(r.Deliveries))
				}
			}
			f.wantCounts("shop/all", counts{Pending: 3})
		},
		"KeysAreScopedPerNamespace": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("a", "all", "*"), t0)
			f.upsert(endpoint("b", "all", "*"), t0)
			pa := event("a", "order.created", t0)
			pa.IdempotencyKey = "shared"
			pb := event("b", "order.created", t0)
			pb.IdempotencyKey = "shared" // and another body
			res := f.insert(pa, pb)
			for i, r := range res {
				if r.Err != nil || r.Duplicate || len(r.Deliveries) != 1 {
					t.Fatalf("item %d: err %v duplicate %v deliveries %d", i, r.Err, r.Duplicate, len(r.Deliveries))
				}
			}
		},
	})
}

// testFanOut checks which endpoints an event fans out to and what its
// deliveries look like.
func testFanOut(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "exact", "order.created"), t0)
	f.upsert(endpoint("shop", "prefix", "order.*"), t0)
	f.upsert(endpoint("shop", "star", "*"), t0)
	f.upsert(endpoint("shop", "other-type", "invoice.paid", "order.cancelled"), t0)
	f.upsert(endpoint("shop", "deep", "order.created.*"), t0)
	paused := endpoint("shop", "paused", "order.created")
	paused.Paused = true
	f.upsert(paused, t0)
	f.upsert(endpoint("shop", "deleted", "*"), t0)
	if _, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: "shop/deleted", Now: t0}); err != nil {
		t.Fatalf("EndpointDelete: %v", err)
	}
	f.upsert(endpoint("elsewhere", "star", "*"), t0)
	f.upsert(endpoint("shopping", "star", "*"), t0)

	now := at(time.Second)
	res := f.publish("shop", "order.created", now)
	wantEqual(t, "endpoints for order.created", endpointsOf(res.Deliveries),
		[]string{"shop/exact", "shop/paused", "shop/prefix", "shop/star"})
	seen := map[string]bool{}
	for _, d := range res.Deliveries {
		want := ledger.Delivery{
			ID: d.ID, EventID: res.Event.ID, EndpointID: d.EndpointID,
			State: ledger.StateScheduled, DueAt: now, CreatedAt: now,
		}
		wantEqual(t, "new delivery", d, want)
		wantEqual(t, "DeliveryGet", f.delivery(d.ID), want)
		if d.ID == "" || seen[d.ID] {
			t.Fatalf("delivery ID %q empty or repeated", d.ID)
		}
		seen[d.ID] = true
	}
	listed := f.list(ledger.DeliveryBrowseParams{EventID: res.Event.ID})
	wantEqual(t, "DeliveryBrowse by event", listed, byID(res.Deliveries))

	// "prefix.*" matches below the prefix only; "*" everything.
	wantEqual(t, "endpoints for order", endpointsOf(f.publish("shop", "order", now).Deliveries),
		[]string{"shop/star"})
	wantEqual(t, "endpoints for order.created.v2", endpointsOf(f.publish("shop", "order.created.v2", now).Deliveries),
		[]string{"shop/deep", "shop/prefix", "shop/star"})
	wantEqual(t, "endpoints for invoice.paid", endpointsOf(f.publish("shop", "invoice.paid", now).Deliveries),
		[]string{"shop/other-type", "shop/star"})
	wantEqual(t, "endpoints in another namespace", endpointsOf(f.publish("elsewhere", "order.created", now).Deliveries),
		[]string{"elsewhere/star"})
	f.wantCounts("shop/star", counts{Pending: 4})
	f.wantCounts("shop/paused", counts{Pending: 1})
}

// testSecretsNeverFormatted checks that no fmt verb prints an event's
// secrets or an endpoint's signing secret.
func testSecretsNeverFormatted(t *testing.T, f *fixture) {
	ep := endpoint("shop", "all", "*")
	ep.Secrets = []ledger.SigningSecret{{Value: sensitive.Bytes("whsec_TOPSECRETSIGNING")}}
	f.upsert(ep, t0)
	p := event("shop", "order.created", t0)
	p.Secrets = sensitive.Bytes(`{"token":"TOPSECRETTOKEN"}`)
	p.SecretNames = []string{"token"}
	res := f.insert(p)[0]
	got, err := f.s.EventGet(f.ctx, p.ID)
	if err != nil {
		t.Fatalf("EventGet: %v", err)
	}
	claimed := f.claimOne("w", t0)
	readEp, err := f.s.EndpointGet(f.ctx, ep.ID)
	if err != nil {
		t.Fatalf("EndpointGet: %v", err)
	}
	for _, v := range []any{got, &got, res, claimed, p, readEp} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			out := fmt.Sprintf(verb, v)
			if strings.Contains(out, "TOPSECRET") || strings.Contains(out, fmt.Sprintf("%x", "TOPSECRET")) {
				t.Fatalf("fmt %s of %T prints a secret: %s", verb, v, out)
			}
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json.Marshal(%T): %v", v, err)
		}
		if strings.Contains(string(b), "TOPSECRET") {
			t.Fatalf("JSON of %T contains a secret: %s", v, b)
		}
	}
}

// testFanOutLimit: an event matching more endpoints than MaxFanOut is
// refused whole (no event, no delivery, no counter moves) while the other
// items of its batch go in; exactly MaxFanOut matches is allowed.
func testFanOutLimit(t *testing.T, f *fixture) {
	for _, name := range []string{"a", "b", "c"} {
		f.upsert(endpoint("shop", name, "order.*"), t0)
	}
	f.upsert(endpoint("shop", "billing", "invoice.paid"), t0)

	over := event("shop", "order.created", at(time.Second))
	over.MaxFanOut = 2
	other := event("shop", "invoice.paid", at(time.Second))
	other.MaxFanOut = 2
	atLimit := event("shop", "order.paid", at(time.Second))
	atLimit.MaxFanOut = 3
	res := f.insert(over, other, atLimit)

	wantErr(t, "over the limit", res[0].Err, ledger.ErrFanOutLimit)
	var foe *ledger.FanOutError
	if !errors.As(res[0].Err, &foe) {
		t.Fatalf("refusal %T is not a *ledger.FanOutError", res[0].Err)
	}
	wantEqual(t, "refusal", *foe, ledger.FanOutError{Namespace: "shop", Type: "order.created", Matches: 3, Max: 2})
	if len(res[0].Deliveries) != 0 {
		t.Fatalf("refused event has %d deliveries", len(res[0].Deliveries))
	}
	if _, err := f.s.EventGet(f.ctx, over.ID); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("EventGet(refused event) = %v, want ErrNotFound", err)
	}
	if res[1].Err != nil || len(res[1].Deliveries) != 1 {
		t.Fatalf("event within the limit: err %v, %d deliveries, want 1", res[1].Err, len(res[1].Deliveries))
	}
	if res[2].Err != nil || len(res[2].Deliveries) != 3 {
		t.Fatalf("event at the limit: err %v, %d deliveries, want 3", res[2].Err, len(res[2].Deliveries))
	}
	for _, id := range []string{"shop/a", "shop/b", "shop/c"} {
		f.wantCounts(id, counts{Pending: 1})
	}
	f.wantCounts("shop/billing", counts{Pending: 1})
}

// testFanOutLimitIdempotency: a key accepted before the namespace grew
// past the limit still answers its original; a refused key stays free.
// testUndecidedFilter: an event whose type selects a filter the insert
// does not decide (none given, or one decided for an older expression) is
// refused as a whole with the filters to decide; nothing is inserted and
// its key stays free, while a key accepted before still answers its
// original.
func testUndecidedFilter(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "all", "*"), t0)
	ep := endpoint("shop", "big", "order.*")
	ep.Filter = "data.total > 100"
	f.upsert(ep, t0)
	keyed := func(key string, decided ledger.FilterDecisions) *ledger.EventInsertParams {
		p := event("shop", "order.created", t0)
		p.Data = json.RawMessage(`{"order":"` + key + `"}`)
		p.BodyHash = hash(p.Data)
		p.IdempotencyKey = key
		p.Decided = decided
		return p
	}
	current := ledger.FilterTarget{EndpointID: "shop/big", Filter: ep.Filter}
	stale := ledger.FilterTarget{EndpointID: "shop/big", Filter: "data.total > 10"}
	accepted := f.insert(keyed("before", ledger.FilterDecisions{current: true}))[0]
	if accepted.Err != nil || len(accepted.Deliveries) != 2 {
		t.Fatalf("decided publish: err %v, %d deliveries, want 2", accepted.Err, len(accepted.Deliveries))
	}
	res := f.insert(
		keyed("none", nil),
		keyed("stale", ledger.FilterDecisions{stale: true}),
		keyed("before", nil),
	)
	for i, r := range res[:2] {
		wantErr(t, fmt.Sprintf("item %d", i), r.Err, ledger.ErrUndecided)
		ue, ok := errors.AsType[*ledger.UndecidedError](r.Err)
		if !ok {
			t.Fatalf("item %d: error %T, want *ledger.UndecidedError", i, r.Err)
		}
		wantEqual(t, fmt.Sprintf("item %d filters to decide", i), ue.Filters, []ledger.FilterTarget{current})
		if r.Event.ID != "" || len(r.Deliveries) != 0 {
			t.Fatalf("item %d refused but returned event %q with %d deliveries", i, r.Event.ID, len(r.Deliveries))
		}
	}
	if !res[2].Duplicate || res[2].Event.ID != accepted.Event.ID {
		t.Fatalf("replay of an accepted key without decisions: duplicate %v event %q err %v, want the original %s",
			res[2].Duplicate, res[2].Event.ID, res[2].Err, accepted.Event.ID)
	}
	later := f.insert(keyed("none", ledger.FilterDecisions{current: false}))[0]
	if later.Err != nil || later.Duplicate || len(later.Deliveries) != 1 {
		t.Fatalf("refused key once decided: err %v duplicate %v, %d deliveries, want a new event with 1",
			later.Err, later.Duplicate, len(later.Deliveries))
	}
}

func testFanOutLimitIdempotency(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "a", "*"), t0)
	f.upsert(endpoint("shop", "b", "*"), t0)
	keyed := func(key string, now time.Time) *ledger.EventInsertParams {
		p := event("shop", "order.created", now)
		p.Data = json.RawMessage(`{"order":"` + key + `"}`)
		p.BodyHash = hash(p.Data)
		p.IdempotencyKey = key
		p.MaxFanOut = 2
		return p
	}
	accepted := f.insert(keyed("before", t0))[0]
	if accepted.Err != nil || len(accepted.Deliveries) != 2 {
		t.Fatalf("first publish: err %v, %d deliveries", accepted.Err, len(accepted.Deliveries))
	}
	f.upsert(endpoint("shop", "c", "*"), at(time.Second))

	res := f.insert(keyed("before", at(2*time.Second)), keyed("after", at(2*time.Second)), keyed("after", at(2*time.Second)))
	if !res[0].Duplicate || res[0].Err != nil || res[0].Event.ID != accepted.Event.ID {
		t.Fatalf("replay of an accepted key: duplicate %v err %v event %s, want the original %s",
			res[0].Duplicate, res[0].Err, res[0].Event.ID, accepted.Event.ID)
	}
	wantEqual(t, "replayed deliveries", idsOf(byID(res[0].Deliveries)), idsOf(byID(accepted.Deliveries)))
	wantErr(t, "new key over the limit", res[1].Err, ledger.ErrFanOutLimit)
	wantErr(t, "same key again in the batch", res[2].Err, ledger.ErrFanOutLimit)

	if _, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: "shop/c", Now: at(3 * time.Second)}); err != nil {
		t.Fatalf("EndpointDelete: %v", err)
	}
	later := f.insert(keyed("after", at(4*time.Second)))[0]
	if later.Err != nil || later.Duplicate || len(later.Deliveries) != 2 {
		t.Fatalf("refused key once within the limit: err %v duplicate %v, %d deliveries, want a new event with 2",
			later.Err, later.Duplicate, len(later.Deliveries))
	}
}
