package ledgertest

import (
	"errors"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// testAddressed: an event addressed to one endpoint (EventInsertParams.
// Endpoint) is delivered to that endpoint only, whatever its event types
// and whoever else subscribes; one addressed to an endpoint absent from its
// namespace (never created, deleted, or in another namespace) is refused
// whole with a *TargetError, and a key used before still answers its
// original.
func testAddressed(t *testing.T, f *fixture) {
	f.upsert(endpoint("shop", "billing", "invoice.*"), t0)
	f.upsert(endpoint("shop", "star", "*"), t0)
	f.upsert(endpoint("shop", "gone", "*"), t0)
	f.upsert(endpoint("other", "orders", "*"), t0)
	if _, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: "shop/gone", Now: t0}); err != nil {
		t.Fatalf("EndpointDelete: %v", err)
	}
	addressed := func(to string, now time.Time) *ledger.EventInsertParams {
		p := event("shop", "hookkeeper.test", now)
		p.Endpoint = to
		return p
	}

	now := at(time.Second)
	keyed := addressed("shop/billing", now)
	keyed.IdempotencyKey = "test-1"
	res := f.insert(keyed, addressed("shop/star", now))
	wantEqual(t, "not subscribed to the type, addressed", endpointsOf(res[0].Deliveries), []string{"shop/billing"})
	wantEqual(t, "subscribed to everything, addressed", endpointsOf(res[1].Deliveries), []string{"shop/star"})
	f.wantCounts("shop/billing", counts{Pending: 1})
	f.wantCounts("shop/star", counts{Pending: 1})

	for _, to := range []string{"shop/nobody", "shop/gone", "other/orders"} {
		p := addressed(to, at(2*time.Second))
		got := f.insert(p)[0]
		wantErr(t, "addressed to "+to, got.Err, ledger.ErrUnknownEndpoint)
		var te *ledger.TargetError
		if !errors.As(got.Err, &te) {
			t.Fatalf("refusal %T is not a *ledger.TargetError", got.Err)
		}
		wantEqual(t, "refusal", *te, ledger.TargetError{Namespace: "shop", Endpoint: to})
		if len(got.Deliveries) != 0 {
			t.Fatalf("refused event has %d deliveries", len(got.Deliveries))
		}
		if _, err := f.s.EventGet(f.ctx, p.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("EventGet(refused event) = %v, want ErrNotFound", err)
		}
	}
	f.wantCounts("shop/star", counts{Pending: 1})

	// The key's endpoint is deleted; its replay still answers the original.
	if _, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: "shop/billing", Now: at(3 * time.Second)}); err != nil {
		t.Fatalf("EndpointDelete: %v", err)
	}
	again := addressed("shop/billing", at(4*time.Second))
	again.IdempotencyKey, again.Data, again.BodyHash = keyed.IdempotencyKey, keyed.Data, keyed.BodyHash
	replay := f.insert(again)[0]
	if replay.Err != nil || !replay.Duplicate || replay.Event.ID != keyed.ID {
		t.Fatalf("replay after the endpoint went: err %v duplicate %v event %s, want the original %s",
			replay.Err, replay.Duplicate, replay.Event.ID, keyed.ID)
	}
}
