package postgres_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// BenchmarkLowRate measures calls paced every 4 ms (about 250 calls per
// second), as an engine at a low rate writes: the latency of an
// EventInsertMany and an AttemptRecordMany (p50 and p99) of one item, and of
// ten (insert10, record10: what a group commit gathers at a few thousand
// events per second), and the CPU the server's backends spend per call
// (read from /proc, so the server must run on this machine; 0 otherwise).
// Run it with a fixed count, e.g. -benchtime=2000x.
func BenchmarkLowRate(b *testing.B) { benchmarkLowRate(b, false) }

// BenchmarkLowRateAnalyzed is BenchmarkLowRate on tables with statistics
// (ANALYZE after the setup), as autovacuum keeps them on a ledger in
// service: the server chooses its plans, and whether to plan a statement
// anew on every execution, from them.
func BenchmarkLowRateAnalyzed(b *testing.B) { benchmarkLowRate(b, true) }

func benchmarkLowRate(b *testing.B, analyze bool) {
	const pace = 4 * time.Millisecond
	for _, n := range []int{1, 10} {
		suffix := ""
		if n > 1 {
			suffix = strconv.Itoa(n)
		}
		b.Run("insert"+suffix, func(b *testing.B) { benchmarkPacedInsert(b, pace, n, analyze) })
		b.Run("record"+suffix, func(b *testing.B) { benchmarkPacedRecord(b, pace, n, analyze) })
	}
}

// analyzeLedger gives the ledger's tables statistics.
func analyzeLedger(b *testing.B, s *postgres.Store) {
	b.Helper()
	if _, err := s.Pool().Exec(context.Background(), `ANALYZE events, event_secrets, deliveries, endpoints,
		attempts, endpoint_stats, retry_budgets, outcome_buckets`); err != nil {
		b.Fatalf("analyze: %v", err)
	}
}

// benchmarkPacedInsert inserts n events of one endpoint per call; with
// analyze, into a ledger of 2,000 events with statistics.
func benchmarkPacedInsert(b *testing.B, pace time.Duration, n int, analyze bool) {
	s := pgtest.NewSchemaStore(b)
	upsert(b, s, endpoint("shop", "all", "*"))
	ctx := context.Background()
	if analyze {
		for range 20 {
			insert(b, s, events(100, "shop", t0))
		}
		analyzeLedger(b, s)
	}
	batches := make([][]*ledger.EventInsertParams, b.N)
	for i := range batches {
		for range n {
			batches[i] = append(batches[i], event("shop", "order.created", t0, 1024))
		}
	}
	insert(b, s, events(n, "shop", t0)) // warm the statement cache
	paced(b, s, pace, func(i int) error {
		_, err := s.EventInsertMany(ctx, batches[i])
		return err
	})
}

// benchmarkPacedRecord records n delivered first attempts per call; with
// analyze, the ledger's tables have statistics.
func benchmarkPacedRecord(b *testing.B, pace time.Duration, n int, analyze bool) {
	s := pgtest.NewSchemaStore(b)
	upsert(b, s, endpoint("shop", "all", "*"))
	ctx := context.Background()
	total := (b.N + 1) * n
	for i := 0; i < total; i += 100 {
		insert(b, s, events(min(100, total-i), "shop", t0))
	}
	claimed, err := s.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: "w", Now: t0, LeaseFor: time.Hour, Limit: total})
	if err != nil || len(claimed) != total {
		b.Fatalf("DeliveryClaim = %d, %v", len(claimed), err)
	}
	if analyze {
		analyzeLedger(b, s)
	}
	params := make([]*ledger.AttemptRecordParams, len(claimed))
	for i, c := range claimed {
		params[i] = &ledger.AttemptRecordParams{DeliveryID: c.Delivery.ID, Owner: "w", Now: t0,
			Attempt: ledger.Attempt{StartedAt: t0, StatusCode: 204}, Next: ledger.Next{State: ledger.StateDelivered}}
	}
	if _, err := s.AttemptRecordMany(ctx, params[b.N*n:]); err != nil { // warm the statement cache
		b.Fatal(err)
	}
	paced(b, s, pace, func(i int) error {
		res, err := s.AttemptRecordMany(ctx, params[i*n:(i+1)*n])
		for _, r := range res {
			if err == nil {
				err = r.Err
			}
		}
		return err
	})
}

// paced runs op b.N times, one every pace, and reports its latency
// percentiles, the server's CPU per operation and this process's (the
// store's client side, with the loop's small share).
func paced(b *testing.B, s *postgres.Store, pace time.Duration, op func(i int) error) {
	lat := make([]time.Duration, b.N)
	cpu0 := backendCPU(b, s, nil)
	client0 := processCPU(b)
	b.ResetTimer()
	next := time.Now()
	for i := range b.N {
		time.Sleep(time.Until(next)) // pacing, not synchronisation
		next = next.Add(pace)
		start := time.Now()
		if err := op(i); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(start)
	}
	b.StopTimer()
	client := processCPU(b) - client0
	cpu := backendCPU(b, s, cpu0)
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	var total time.Duration
	for _, d := range cpu {
		total += d
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "server-cpu-µs/op")
	b.ReportMetric(float64(client.Microseconds())/float64(b.N), "client-cpu-µs/op")
}

// processCPU is the CPU time this process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// backendCPU returns the CPU time of the server backends of s's pool, less
// base.
func backendCPU(b *testing.B, s *postgres.Store, base map[uint32]time.Duration) map[uint32]time.Duration {
	out := make(map[uint32]time.Duration)
	for _, c := range s.Pool().AcquireAllIdle(context.Background()) {
		pid := c.Conn().PgConn().PID()
		c.Release()
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
		if err != nil {
			continue // the server runs elsewhere
		}
		ns, err := strconv.ParseInt(strings.Fields(string(raw))[0], 10, 64)
		if err != nil {
			b.Fatalf("schedstat of %d: %v", pid, err)
		}
		out[pid] = time.Duration(ns) - base[pid]
	}
	return out
}
