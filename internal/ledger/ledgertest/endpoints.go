package ledgertest

import (
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/credential"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// fullEndpoint sets every field of an endpoint, so that a round trip
// through the store shows any field it drops.
func fullEndpoint(ns, name string) ledger.Endpoint {
	return ledger.Endpoint{
		ID:         ledger.EndpointID(ns, name),
		Namespace:  ns,
		Name:       name,
		URL:        "https://receiver.example/hooks/" + name,
		EventTypes: []string{"order.created", "invoice.*"},
		Secrets: []ledger.SigningSecret{
			{Value: sensitive.Bytes("whsec_current")},
			{Value: sensitive.Bytes("whsec_previous"), NotAfter: at(time.Hour)},
		},
		Policy: ledger.Policy{
			Backoff: backoff.Policy{
				Strategy:       backoff.Schedule,
				Schedule:       []time.Duration{5 * time.Second, 5 * time.Minute, 2 * time.Hour},
				JitterPercent:  10,
				MaxAttempts:    8,
				MaxAge:         24 * time.Hour,
				AttemptTimeout: 30 * time.Second,
				RetryAfterCap:  time.Hour,
			},
			RetryOn:           []string{"5xx", "Timeout", "429"},
			ReplayWindow:      72 * time.Hour,
			SecretGracePeriod: time.Minute,
			PayloadRetention:  7 * 24 * time.Hour,
			EvidenceRetention: 30 * 24 * time.Hour,
			Budget:            &ledger.RetryBudget{RatioPercent: 20, MinPerMinute: 10},
		},
		AckMode:     ledger.AckCallback,
		AckTimeout:  5 * time.Minute,
		Paused:      true,
		DeadLetter:  ledger.EndpointID(ns, "dlq"),
		Owner:       "team-" + name,
		RateLimit:   ledger.RateLimit{PerSecond: 50, Burst: 100},
		MaxInFlight: 16,
		Headers:     []wire.Header{{Name: "X-Team", Value: "payments"}, {Name: "X-Env", Value: "prod"}},
		Credentials: &credential.Set{
			Headers: []credential.Header{{Name: "X-Api-Key", Value: sensitive.Bytes("key-" + name)}},
			OAuth2: &credential.OAuth2{TokenURL: "https://auth.example/token", ClientID: sensitive.Bytes("client"),
				ClientSecret: sensitive.Bytes("client-secret"), Scopes: []string{"a", "b"}, Audience: "receiver",
				Params: map[string]string{"resource": "orders"}},
			TLS: &credential.TLS{CertPEM: []byte("cert"), KeyPEM: sensitive.Bytes("key"), CAPEM: []byte("ca"), SystemRoots: true},
		},
		Filter: `data.amount > 1000 && type == "order.created"`,
	}
}

func exerciseEndpoints(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"UpsertStoresEveryField": func(t *testing.T, f *fixture) {
			in := fullEndpoint("shop", "orders")
			got := f.upsert(in, t0)
			want := in
			want.Version, want.UpdatedAt = 1, t0
			wantEqual(t, "EndpointUpsert result", got, want)

			read, err := f.s.EndpointGet(f.ctx, in.ID)
			if err != nil {
				t.Fatalf("EndpointGet: %v", err)
			}
			wantEqual(t, "EndpointGet", read, want)
			if string(read.Secrets[1].Value.Reveal()) != "whsec_previous" {
				t.Fatalf("signing secret not stored: %q", read.Secrets[1].Value.Reveal())
			}
			if c := read.Credentials; c == nil || string(c.OAuth2.ClientSecret.Reveal()) != "client-secret" ||
				string(c.Headers[0].Value.Reveal()) != "key-orders" || string(c.TLS.KeyPEM.Reveal()) != "key" {
				t.Fatalf("credentials not stored with their values")
			}
			// Registering without credentials or filter clears them.
			in.Credentials, in.Filter = nil, ""
			f.upsert(in, at(time.Second))
			if read, err = f.s.EndpointGet(f.ctx, in.ID); err != nil || read.Credentials != nil || read.Filter != "" {
				t.Fatalf("after an upsert without them: credentials %v, filter %q, %v", read.Credentials != nil, read.Filter, err)
			}
		},
		"UpsertBumpsVersion": func(t *testing.T, f *fixture) {
			ep := endpoint("shop", "orders", "order.created")
			if v := f.upsert(ep, t0).Version; v != 1 {
				t.Fatalf("version on creation = %d, want 1", v)
			}
			ep.URL = "https://receiver.example/v2"
			ep.Paused = true
			got := f.upsert(ep, at(time.Second))
			want := ep
			want.Version, want.UpdatedAt = 2, at(time.Second)
			wantEqual(t, "second upsert", got, want)
			// Every upsert is a new version, changed or not.
			if v := f.upsert(ep, at(2*time.Second)).Version; v != 3 {
				t.Fatalf("version after third upsert = %d, want 3", v)
			}
			read, err := f.s.EndpointGet(f.ctx, ep.ID)
			if err != nil {
				t.Fatalf("EndpointGet: %v", err)
			}
			if read.Version != 3 || read.URL != ep.URL || !read.Paused || !read.UpdatedAt.Equal(at(2*time.Second)) {
				t.Fatalf("EndpointGet after upserts = %+v", read)
			}
		},
		"ListIsOrderedByID": func(t *testing.T, f *fixture) {
			if got, err := f.s.EndpointList(f.ctx); err != nil || len(got) != 0 {
				t.Fatalf("EndpointList on an empty store = %v, %v; want none", got, err)
			}
			for _, id := range [][2]string{{"zoo", "a"}, {"app", "zeta"}, {"app", "alpha"}, {"mid", "m"}} {
				f.upsert(endpoint(id[0], id[1], "*"), t0)
			}
			got, err := f.s.EndpointList(f.ctx)
			if err != nil {
				t.Fatalf("EndpointList: %v", err)
			}
			var ids []string
			for _, ep := range got {
				ids = append(ids, ep.ID)
				if ep.Version != 1 || !ep.UpdatedAt.Equal(t0) {
					t.Fatalf("listed endpoint %s has version %d, updated %v", ep.ID, ep.Version, ep.UpdatedAt)
				}
			}
			wantEqual(t, "EndpointList IDs", ids, []string{"app/alpha", "app/zeta", "mid/m", "zoo/a"})
		},
		"UnknownIsNotFound": func(t *testing.T, f *fixture) {
			_, err := f.s.EndpointGet(f.ctx, "shop/none")
			wantErr(t, "EndpointGet unknown", err, ledger.ErrNotFound)
			_, err = f.s.EndpointStats(f.ctx, "shop/none")
			wantErr(t, "EndpointStats unknown", err, ledger.ErrNotFound)
			_, err = f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: "shop/none", Now: t0})
			wantErr(t, "EndpointDelete unknown", err, ledger.ErrNotFound)
		},
		"DeleteCancelsLiveDeliveriesAndKeepsHistory": testEndpointDelete,
		"RecreatedEndpointContinuesVersion": func(t *testing.T, f *fixture) {
			ep := endpoint("shop", "orders", "*")
			f.upsert(ep, t0)
			f.upsert(ep, t0)
			if _, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: ep.ID, Now: at(time.Second)}); err != nil {
				t.Fatalf("EndpointDelete: %v", err)
			}
			// The engine notices a changed configuration by its version, so
			// a recreated endpoint never reuses one.
			if v := f.upsert(ep, at(2*time.Second)).Version; v <= 2 {
				t.Fatalf("version of a recreated endpoint = %d, want > 2", v)
			}
			if _, err := f.s.EndpointGet(f.ctx, ep.ID); err != nil {
				t.Fatalf("EndpointGet after recreation: %v", err)
			}
			if got := f.publish("shop", "order.created", at(3*time.Second)); len(got.Deliveries) != 1 {
				t.Fatalf("recreated endpoint got %d deliveries, want 1", len(got.Deliveries))
			}
		},
	})
}

// testEndpointDelete puts deliveries of one endpoint in every state, deletes
// it, and checks that only the live ones were cancelled.
func testEndpointDelete(t *testing.T, f *fixture) {
	gone := endpoint("shop", "gone", "order.*")
	gone.AckMode = ledger.AckCallback
	f.upsert(gone, t0)
	f.upsert(endpoint("shop", "stays", "order.*"), t0)

	// One event each at t0..t0+4s; claim one delivery of "gone" at a time.
	var ids [5]string
	for i := range ids {
		ids[i] = deliveryTo(t, f.publish("shop", "order.created", at(time.Duration(i)*time.Second)), gone.ID)
	}
	owner := "worker"
	now := at(10 * time.Second)
	claimed := f.claim(owner, now, time.Hour, 4, "shop/stays")
	wantEqual(t, "claimed", claimedIDs(claimed), ids[:4])
	f.mustRecord(attempt(ids[0], owner, now, 200, ledger.Next{State: ledger.StateDelivered}))
	f.mustRecord(attempt(ids[1], owner, now, 500, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable}))
	f.mustRecord(attempt(ids[2], owner, now, 202, ledger.Next{State: ledger.StateAwaitingAck, AckDeadline: at(time.Hour)}))
	// ids[3] stays in flight, ids[4] scheduled.

	delAt := at(20 * time.Second)
	n, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: gone.ID, Now: delAt})
	if err != nil {
		t.Fatalf("EndpointDelete: %v", err)
	}
	if n != 3 {
		t.Fatalf("EndpointDelete cancelled %d deliveries, want 3 (awaiting_ack, in_flight, scheduled)", n)
	}
	wantStates := []ledger.DeliveryState{ledger.StateDelivered, ledger.StateExhausted, ledger.StateCancelled, ledger.StateCancelled, ledger.StateCancelled}
	for i, id := range ids {
		d := f.delivery(id)
		if d.State != wantStates[i] {
			t.Fatalf("delivery %d state = %s, want %s", i, d.State, wantStates[i])
		}
		if d.State == ledger.StateCancelled {
			if d.TerminalAt == nil || !d.TerminalAt.Equal(delAt) {
				t.Fatalf("cancelled delivery %d TerminalAt = %v, want %v", i, d.TerminalAt, delAt)
			}
			if d.LeaseOwner != "" || d.LeaseUntil != nil {
				t.Fatalf("cancelled delivery %d keeps its lease: %q %v", i, d.LeaseOwner, d.LeaseUntil)
			}
			if d.Resolution != ledger.ResolutionNone {
				t.Fatalf("cancelled delivery %d resolution = %q, want none", i, d.Resolution)
			}
		}
	}
	// History stays.
	if hist := f.list(ledger.DeliveryBrowseParams{EndpointID: gone.ID}); len(hist) != 5 {
		t.Fatalf("deliveries of the deleted endpoint: %d, want 5", len(hist))
	}
	if att, err := f.s.AttemptList(f.ctx, ids[0]); err != nil || len(att) != 1 {
		t.Fatalf("AttemptList after delete = %v, %v; want one attempt", att, err)
	}
	// Gone from reads, matching and claims; stats stay readable.
	_, err = f.s.EndpointGet(f.ctx, gone.ID)
	wantErr(t, "EndpointGet after delete", err, ledger.ErrNotFound)
	list, err := f.s.EndpointList(f.ctx)
	if err != nil || len(list) != 1 || list[0].ID != "shop/stays" {
		t.Fatalf("EndpointList after delete = %v, %v; want only shop/stays", list, err)
	}
	res := f.publish("shop", "order.created", at(21*time.Second))
	wantEqual(t, "endpoints matched after delete", endpointsOf(res.Deliveries), []string{"shop/stays"})
	for _, c := range f.claim("other", at(time.Hour), time.Minute, 100) {
		if c.Delivery.EndpointID == gone.ID {
			t.Fatalf("claimed delivery %s of a deleted endpoint", c.Delivery.ID)
		}
	}
	// The former lease holder can no longer record.
	r := f.record(attempt(ids[3], owner, at(30*time.Second), 200, ledger.Next{State: ledger.StateDelivered}))
	wantErr(t, "AttemptRecordMany on a cancelled delivery", r.Err, ledger.ErrLeaseLost)
	f.wantCounts(gone.ID, counts{Delivered: 1, ExhaustedUnresolved: 1, Cancelled: 3})

	_, err = f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: gone.ID, Now: at(time.Minute)})
	wantErr(t, "EndpointDelete twice", err, ledger.ErrNotFound)
}
