package postgres_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// t0 is the pinned clock of these tests.
var t0 = time.Date(2030, time.March, 4, 5, 6, 7, 123456789, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func endpoint(ns, name string, types ...string) ledger.Endpoint {
	return ledger.Endpoint{
		ID: ledger.EndpointID(ns, name), Namespace: ns, Name: name,
		URL: "https://receiver.example/" + name, EventTypes: types, AckMode: ledger.AckResponse,
	}
}

func upsert(t testing.TB, s ledger.Store, ep ledger.Endpoint) {
	t.Helper()
	if _, err := s.EndpointUpsert(context.Background(), &ledger.EndpointUpsertParams{Endpoint: ep, Now: t0}); err != nil {
		t.Fatalf("EndpointUpsert(%s): %v", ep.ID, err)
	}
}

// event returns insert params with a payload of size bytes.
func event(ns, typ string, now time.Time, size int) *ledger.EventInsertParams {
	id := ledger.NewID("evt", now)
	pad := make([]byte, max(0, size-64))
	for i := range pad {
		pad[i] = 'x'
	}
	data := json.RawMessage(fmt.Sprintf(`{"id":%q,"pad":%q}`, id, pad))
	sum := sha256.Sum256(data)
	return &ledger.EventInsertParams{ID: id, Namespace: ns, Type: typ, Data: data, BodyHash: sum[:], Now: now}
}

func events(n int, ns string, now time.Time) []*ledger.EventInsertParams {
	out := make([]*ledger.EventInsertParams, n)
	for i := range out {
		out[i] = event(ns, "order.created", now, 64)
	}
	return out
}

func insert(t testing.TB, s ledger.Store, ps []*ledger.EventInsertParams) []ledger.EventInsertResult {
	t.Helper()
	res, err := s.EventInsertMany(context.Background(), ps)
	if err != nil {
		t.Fatalf("EventInsertMany: %v", err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("EventInsertMany item %d: %v", i, r.Err)
		}
	}
	return res
}

// rawConn connects to the store's schema directly, to look under the hood.
func rawConn(t testing.TB, schema string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = schema
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// wantCountersMatchRecount checks every endpoint's counters against a
// recount of the deliveries table: the counters are maintained
// incrementally, so any lost or doubled update shows here.
func wantCountersMatchRecount(t *testing.T, s ledger.Store, schema string) {
	t.Helper()
	rows, err := rawConn(t, schema).Query(context.Background(), `
		SELECT st.endpoint_id,
			count(d.id) FILTER (WHERE d.state = 'scheduled'),
			count(d.id) FILTER (WHERE d.state = 'in_flight'),
			count(d.id) FILTER (WHERE d.state = 'awaiting_ack'),
			count(d.id) FILTER (WHERE d.state = 'delivered'),
			count(d.id) FILTER (WHERE d.state = 'exhausted' AND d.resolution = 'unresolved'),
			count(d.id) FILTER (WHERE d.state = 'cancelled')
		FROM (SELECT DISTINCT endpoint_id FROM endpoint_stats) st
			LEFT JOIN deliveries d ON d.endpoint_id = st.endpoint_id
		GROUP BY st.endpoint_id ORDER BY st.endpoint_id`)
	if err != nil {
		t.Fatalf("recount: %v", err)
	}
	type counts [6]int64
	var (
		id   string
		want counts
		n    int
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &want[0], &want[1], &want[2], &want[3], &want[4], &want[5]}, func() error {
		n++
		st, err := s.EndpointStats(context.Background(), id)
		if err != nil {
			return err
		}
		got := counts{st.Pending, st.InFlight, st.AwaitingAck, st.Delivered, st.ExhaustedUnresolved, st.Cancelled}
		if got != want {
			t.Errorf("EndpointStats(%s) = %v, recount %v (pending, in flight, awaiting ack, delivered, exhausted, cancelled)", id, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("recount: %v", err)
	}
	if n == 0 {
		t.Fatal("recount found no endpoint")
	}
}
