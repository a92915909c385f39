package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// BenchmarkOneEndpointWriters measures the transactions of ONE endpoint
// competing for its stats: 8 goroutines each insert an event, claim a
// delivery and record it delivered (three transactions an iteration), all
// of the same endpoint. It reports transactions per second and the p50 and
// p99 latency of each kind of transaction.
func BenchmarkOneEndpointWriters(b *testing.B) {
	const workers = 8
	s := pgtest.NewSchemaStore(b, postgres.WithMaxConns(2*workers))
	upsert(b, s, endpoint("shop", "hot", "*"))
	ctx := context.Background()
	claimAt, recordAt := at(time.Second), at(2*time.Second)

	var (
		mu   sync.Mutex
		lat  = map[string][]time.Duration{}
		next atomic.Int64
		wg   sync.WaitGroup
	)
	b.ResetTimer()
	for w := range workers {
		owner := fmt.Sprintf("worker%d", w)
		wg.Go(func() {
			mine := map[string][]time.Duration{}
			timed := func(kind string, f func() error) {
				start := time.Now()
				if err := f(); err != nil {
					b.Errorf("%s: %v", kind, err)
				}
				mine[kind] = append(mine[kind], time.Since(start))
			}
			for next.Add(1) <= int64(b.N) {
				timed("insert", func() error {
					_, err := s.EventInsertMany(ctx, events(1, "shop", t0))
					return err
				})
				var got []ledger.ClaimedDelivery
				timed("claim", func() (err error) {
					got, err = s.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: owner, Now: claimAt, LeaseFor: time.Hour, Limit: 1})
					return err
				})
				for _, c := range got {
					timed("record", func() error {
						res, err := s.AttemptRecordMany(ctx, []*ledger.AttemptRecordParams{{
							DeliveryID: c.Delivery.ID, Owner: owner, Now: recordAt,
							Attempt: ledger.Attempt{StartedAt: recordAt, Duration: time.Millisecond, StatusCode: 204},
							Next:    ledger.Next{State: ledger.StateDelivered},
						}})
						if err == nil {
							err = res[0].Err
						}
						return err
					})
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for k, v := range mine {
				lat[k] = append(lat[k], v...)
			}
		})
	}
	wg.Wait()
	b.StopTimer()

	var all []time.Duration
	for _, kind := range []string{"insert", "claim", "record"} {
		d := lat[kind]
		all = append(all, d...)
		slices.Sort(d)
		if len(d) > 0 {
			b.ReportMetric(ms(d[len(d)*99/100]), kind+"-p99-ms")
		}
	}
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "tx/s")
	b.ReportMetric(ms(all[len(all)/2]), "p50-ms")
	b.ReportMetric(ms(all[len(all)*99/100]), "p99-ms")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
