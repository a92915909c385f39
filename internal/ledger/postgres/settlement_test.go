package postgres_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

func token(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "tok_" + hex.EncodeToString(b[:])
}

func withToken(p *ledger.EventInsertParams, secret string) *ledger.EventInsertParams {
	p.Secrets, p.SecretNames = sensitive.Bytes(`{"confirmToken":"`+secret+`"}`), []string{"confirmToken"}
	return p
}

// heapHolds reports whether any page of event_secrets (its heap, read raw
// with pageinspect in schema ext) contains value.
func heapHolds(t *testing.T, conn *pgx.Conn, ext, schema, value string) bool {
	t.Helper()
	rows, err := conn.Query(context.Background(), `
		SELECT `+ext+`.get_raw_page('`+schema+`.event_secrets', g::int)
		FROM generate_series(0, pg_relation_size('`+schema+`.event_secrets') / current_setting('block_size')::int - 1) g`)
	if err != nil {
		t.Fatalf("read event_secrets pages: %v", err)
	}
	pages, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatalf("read event_secrets pages: %v", err)
	}
	for _, p := range pages {
		if bytes.Contains(p, []byte(value)) {
			return true
		}
	}
	return false
}

// TestScrubDeletesTheSecretsRow shows the scrub on the table: the event's
// row in event_secrets is deleted in the transaction that ends its last
// delivery, and Compact rewrites the table so that the deleted bytes are
// not left in its pages either (a plain VACUUM would only mark their space
// free), while a pending event's secret stays.
func TestScrubDeletesTheSecretsRow(t *testing.T) {
	// A database of its own: Compact's VACUUM FULL keeps a deleted row
	// that a transaction of the same database may still see, and other
	// packages' tests run theirs in the shared one meanwhile.
	t.Setenv(pgtest.EnvDSN, pgtest.NewDatabase(t))
	ctx := context.Background()
	schema := pgtest.NewSchema(t)
	s := pgtest.OpenStore(t, schema)
	conn := rawConn(t, schema)
	upsert(t, s, endpoint("shop", "all", "order.*"))
	scrubbed, pending := token(t), token(t)
	// The pending event's row first: the scrubbed one is then the last
	// tuple of the page, whose space a plain VACUUM frees without moving
	// another tuple over it.
	kept := insert(t, s, []*ledger.EventInsertParams{withToken(event("shop", "order.created", at(time.Hour), 64), pending)})[0]
	ev := insert(t, s, []*ledger.EventInsertParams{withToken(event("shop", "order.created", t0, 64), scrubbed)})[0]

	secretRows := func(id string) int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM event_secrets WHERE event_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if secretRows(ev.Event.ID) != 1 || secretRows(kept.Event.ID) != 1 {
		t.Fatal("the secrets are not stored in event_secrets")
	}

	// pageinspect reads the raw pages; it lives in this test's schema and
	// goes with it.
	ext := schema
	var have string
	err := conn.QueryRow(ctx, `SELECT n.nspname FROM pg_extension x JOIN pg_namespace n ON n.oid = x.extnamespace
		WHERE x.extname = 'pageinspect'`).Scan(&have)
	switch {
	case err == nil:
		ext = have
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := conn.Exec(ctx, `CREATE EXTENSION pageinspect SCHEMA `+schema); err != nil {
			t.Logf("pageinspect is not available (%v): checking rows only", err)
			ext = ""
		}
	default:
		t.Fatal(err)
	}

	claimed, err := s.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: "w", Now: t0, LeaseFor: time.Minute, Limit: 10})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("DeliveryClaim = %d, %v", len(claimed), err)
	}
	res, err := s.AttemptRecordMany(ctx, []*ledger.AttemptRecordParams{{
		DeliveryID: claimed[0].Delivery.ID, Owner: "w", Now: at(time.Second),
		Attempt: ledger.Attempt{StartedAt: t0, StatusCode: 204}, Next: ledger.Next{State: ledger.StateDelivered},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("AttemptRecordMany = %+v, %v", res, err)
	}
	if n := secretRows(ev.Event.ID); n != 0 {
		t.Fatalf("event_secrets still has %d row(s) of the delivered event", n)
	}
	got, err := s.EventGet(ctx, ev.Event.ID)
	if err != nil || got.Secrets != nil || got.SecretsScrubAt == nil || !got.SecretsScrubAt.Equal(at(time.Second)) {
		t.Fatalf("EventGet after the scrub: %+v, %v", got, err)
	}
	if ext != "" {
		if !heapHolds(t, conn, ext, schema, scrubbed) {
			t.Fatal("the deleted secret is not in the heap before Compact: the search cannot fail")
		}
		// What a plain VACUUM leaves behind.
		if _, err := conn.Exec(ctx, `VACUUM event_secrets`); err != nil {
			t.Fatal(err)
		}
		t.Logf("after a plain VACUUM the deleted secret is still in the pages: %v", heapHolds(t, conn, ext, schema, scrubbed))
	}

	if err := s.Compact(ctx); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if secretRows(kept.Event.ID) != 1 {
		t.Fatal("Compact lost a pending event's secrets")
	}
	if ext != "" {
		if heapHolds(t, conn, ext, schema, scrubbed) {
			t.Fatalf("scrubbed secret %s is still in the pages of event_secrets after Compact", scrubbed)
		}
		if !heapHolds(t, conn, ext, schema, pending) {
			t.Fatal("a pending event's secret is not found in the pages: the search is blind")
		}
	}
	if err := s.Compact(ctx); err != nil {
		t.Fatalf("Compact again: %v", err)
	}
}

// TestLastDeliveriesEndingTogether ends the last two pending deliveries
// of an event in two processes at once, many times: whichever commits
// second must see the first and scrub the secrets (the event row lock
// orders them), so that no event keeps its secrets with nothing pending.
func TestLastDeliveriesEndingTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.NewSchema(t)
	stores := []*postgres.Store{pgtest.OpenStore(t, schema), pgtest.OpenStore(t, schema)}
	upsert(t, stores[0], endpoint("shop", "a", "*"))
	upsert(t, stores[0], endpoint("shop", "b", "*"))
	const events = 30
	var ids []string
	for i := range events {
		now := at(time.Duration(i) * time.Second)
		res := insert(t, stores[0], []*ledger.EventInsertParams{withToken(event("shop", "order.created", now, 64), token(t))})[0]
		ids = append(ids, res.Event.ID)
		for p, ep := range []string{"shop/a", "shop/b"} {
			got, err := stores[p].DeliveryClaim(ctx, &ledger.DeliveryClaimParams{
				Owner: ep, Now: now, LeaseFor: time.Hour, Limit: 1, ExcludeEndpoints: []string{[]string{"shop/b", "shop/a"}[p]},
			})
			if err != nil || len(got) != 1 {
				t.Fatalf("claim: %v, %v", got, err)
			}
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for p, d := range res.Deliveries {
			owner := d.EndpointID
			wg.Go(func() {
				<-start
				r, err := stores[p].AttemptRecordMany(ctx, []*ledger.AttemptRecordParams{{
					DeliveryID: d.ID, Owner: owner, Now: now,
					Attempt: ledger.Attempt{StartedAt: now, StatusCode: 200}, Next: ledger.Next{State: ledger.StateDelivered},
				}})
				if err != nil || r[0].Err != nil {
					t.Errorf("AttemptRecordMany: %v, %+v", err, r)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	for _, id := range ids {
		ev, err := stores[0].EventGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Secrets != nil || ev.SecretsScrubAt == nil {
			t.Fatalf("event %s kept its secrets after both deliveries ended", id)
		}
	}
	wantCountersMatchRecount(t, stores[0], schema)
}
