package sqlite_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
)

// benchStore opens a durable (synchronous=FULL) store with one endpoint
// subscribed to everything.
func benchStore(b *testing.B) *sqlite.Store {
	b.Helper()
	s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "ledger.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	_, err = s.EndpointUpsert(b.Context(), &ledger.EndpointUpsertParams{
		Endpoint: ledger.Endpoint{ID: "bench/all", Namespace: "bench", Name: "all", URL: "https://r.example", EventTypes: []string{"*"}},
		Now:      time.Now(),
	})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// payload is a 1 KiB JSON object.
var payload = json.RawMessage(`{"pad":"` + strings.Repeat("x", 1024-10) + `"}`)

func batch(n int, now time.Time) []*ledger.EventInsertParams {
	h := sha256.Sum256(payload)
	out := make([]*ledger.EventInsertParams, n)
	for i := range out {
		id := ledger.NewID("evt", now)
		out[i] = &ledger.EventInsertParams{
			ID: id, Namespace: "bench", Type: "order.created", Data: payload,
			IdempotencyKey: id, BodyHash: h[:], Now: now,
		}
	}
	return out
}

// BenchmarkEventInsertMany measures one durable commit of a batch of
// events with 1 KiB payloads and idempotency keys, fanned out to one
// endpoint.
func BenchmarkEventInsertMany(b *testing.B) {
	for _, n := range []int{1, 64, 100} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			s := benchStore(b)
			ctx := b.Context()
			for b.Loop() {
				b.StopTimer()
				ps := batch(n, time.Now())
				b.StartTimer()
				if _, err := s.EventInsertMany(ctx, ps); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkDeliveryCycle measures the ledger's share of delivering a
// batch of 100 events: insert, claim, record; three durable commits.
func BenchmarkDeliveryCycle(b *testing.B) {
	s := benchStore(b)
	ctx := b.Context()
	const n = 100
	for b.Loop() {
		now := time.Now()
		if _, err := s.EventInsertMany(ctx, batch(n, now)); err != nil {
			b.Fatal(err)
		}
		cycle(ctx, b, s, n, now)
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
}

func cycle(ctx context.Context, b *testing.B, s *sqlite.Store, n int, now time.Time) {
	claimed, err := s.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: "w", Now: now, LeaseFor: time.Minute, Limit: n})
	if err != nil {
		b.Fatal(err)
	}
	if len(claimed) != n {
		b.Fatalf("claimed %d, want %d", len(claimed), n)
	}
	ps := make([]*ledger.AttemptRecordParams, len(claimed))
	for i, c := range claimed {
		ps[i] = &ledger.AttemptRecordParams{
			DeliveryID: c.Delivery.ID, Owner: "w", Now: now,
			Attempt: ledger.Attempt{StartedAt: now, Duration: time.Millisecond, StatusCode: 200, ResponseExcerpt: []byte("ok")},
			Next:    ledger.Next{State: ledger.StateDelivered},
		}
	}
	res, err := s.AttemptRecordMany(ctx, ps)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
}
