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
