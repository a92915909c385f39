package sqlite_test

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// BenchmarkLowRate measures what an event costs the ledger at a steady
// 500 events/s, as the engine writes on SQLite: each commit inserts
// per-commit events whose deliveries are handed to their publisher
// (LeaseTo) and records the previous commit's successful attempts
// (WriteMany), one commit every per-commit × 2 ms. It reports the commit's
// latency (p50, p99) and this process's CPU per event, which is the
// store's. Pacing only spaces the commits as the engine's would be; run it
// with a fixed count, e.g. -benchtime=2000x.
func BenchmarkLowRate(b *testing.B) {
	for _, k := range []int{1, 2, 5, 10} {
		b.Run(fmt.Sprintf("per-commit=%d", k), func(b *testing.B) { lowRate(b, k) })
	}
}

func lowRate(b *testing.B, k int) {
	pace := time.Duration(k) * 2 * time.Millisecond
	s := benchStore(b)
	ctx := b.Context()
	now := time.Now()
	events := batch(b.N*k+k, now)
	for _, e := range events {
		e.LeaseTo = &ledger.Lease{Owner: "w", Until: now.Add(time.Hour)}
	}
	write := func(w *ledger.WriteBatch) ledger.WriteResult {
		res, err := s.WriteMany(ctx, w)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res.Attempts {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		return res
	}
	record := func(r ledger.EventInsertResult) *ledger.AttemptRecordParams {
		if len(r.Leased) != 1 {
			b.Fatalf("leased %d deliveries, want 1", len(r.Leased))
		}
		return &ledger.AttemptRecordParams{DeliveryID: r.Leased[0].Delivery.ID, Owner: "w", Now: now, Leased: &r.Leased[0],
			Attempt: ledger.Attempt{StartedAt: now, Duration: time.Millisecond, StatusCode: 204},
			Next:    ledger.Next{State: ledger.StateDelivered}}
	}
	var prev []*ledger.AttemptRecordParams
	for _, r := range write(&ledger.WriteBatch{Events: events[:k]}).Events {
		prev = append(prev, record(r))
	}
	lat := make([]time.Duration, b.N)
	cpu0 := processCPU(b)
	b.ResetTimer()
	next := time.Now()
	for i := range b.N {
		time.Sleep(time.Until(next)) // pacing, not synchronisation
		next = next.Add(pace)
		start := time.Now()
		res := write(&ledger.WriteBatch{Attempts: prev, Events: events[(i+1)*k : (i+2)*k]})
		lat[i] = time.Since(start)
		prev = prev[:0]
		for _, r := range res.Events {
			prev = append(prev, record(r))
		}
	}
	b.StopTimer()
	cpu := processCPU(b) - cpu0
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*k), "cpu-µs/event")
}

// processCPU is the CPU time this process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
