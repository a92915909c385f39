package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// BenchmarkEventInsertMany measures ingest: batches of 1 and 64 events of
// 1 KiB, each fanning out to one endpoint. With fsync on, a batch costs
// about one commit, so events/s should grow nearly with the batch size.
func BenchmarkEventInsertMany(b *testing.B) {
	for _, size := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s := pgtest.NewSchemaStore(b)
			upsert(b, s, endpoint("shop", "all", "*"))
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				batch := make([]*ledger.EventInsertParams, size)
				for i := range batch {
					batch[i] = event("shop", "order.created", t0, 1024)
				}
				b.StartTimer()
				if _, err := s.EventInsertMany(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkEventInsertManyHistory measures a batch of 100 events with
// idempotency keys on an empty ledger and on one with 200,000 events of
// history: the cost of a batch should not depend on the ledger's size.
func BenchmarkEventInsertManyHistory(b *testing.B) {
	for _, history := range []int{0, 200000} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			schema := pgtest.NewSchema(b)
			s := pgtest.OpenStore(b, schema)
			upsert(b, s, endpoint("shop", "all", "*"))
			fillHistory(b, rawConn(b, schema), history, 0)
			ctx := context.Background()
			n := 0
			for b.Loop() {
				b.StopTimer()
				batch := make([]*ledger.EventInsertParams, 100)
				for i := range batch {
					n++
					batch[i] = event("shop", "order.created", t0, 1024)
					batch[i].IdempotencyKey = fmt.Sprintf("bench-%d", n)
				}
				b.StartTimer()
				if _, err := s.EventInsertMany(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkExhaustedListFirst measures what an endpoint status refresh
// asks: the first of an endpoint's 1,000 unresolved exhausted deliveries.
// The loop runs the cached statement long enough to reach the generic plan.
func BenchmarkExhaustedListFirst(b *testing.B) {
	schema := pgtest.NewSchema(b)
	s := pgtest.OpenStore(b, schema)
	fillHistory(b, rawConn(b, schema), 200000, 1000)
	ctx := context.Background()
	for b.Loop() {
		got, err := s.ExhaustedList(ctx, &ledger.ExhaustedListParams{EndpointID: "shop/billing", Limit: 1})
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != 1 {
			b.Fatalf("ExhaustedList returned %d deliveries, want 1", len(got))
		}
	}
}
