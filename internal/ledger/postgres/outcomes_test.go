package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// TestTwoStoresLoseNoOutcome settles deliveries of the same endpoints, into
// the same bucket rows, from two stores (two engine processes) at once,
// attempts and acknowledgements alike, and checks that the outcome counts
// equal a recount of the deliveries.
func TestTwoStoresLoseNoOutcome(t *testing.T) {
	t.Parallel()
	schema := pgtest.NewSchema(t)
	stores := []ledger.Store{pgtest.OpenStore(t, schema), pgtest.OpenStore(t, schema)}
	for i := range 3 {
		ep := endpoint("shop", fmt.Sprintf("ep%d", i), "*")
		ep.Policy.Name, ep.Policy.Generation = "standard", 1
		upsert(t, stores[0], ep)
	}
	now := at(time.Second)
	ctx := context.Background()
	var wg sync.WaitGroup
	produced := produce(&wg, publishing(t, stores, 10)...)
	for p, s := range stores {
		for w := range 2 {
			owner := fmt.Sprintf("process%d-worker%d", p, w)
			rng := rand.New(rand.NewPCG(uint64(p), uint64(w)))
			wg.Go(func() { work(t, s, owner, now, rng, produced) })
		}
	}
	wg.Wait()

	// Both stores acknowledge the waiting deliveries at once.
	waiting, err := stores[0].DeliveryBrowse(ctx, &ledger.DeliveryBrowseParams{States: []ledger.DeliveryState{ledger.StateAwaitingAck}, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(waiting) == 0 {
		t.Fatal("the workload left no delivery awaiting an acknowledgement")
	}
	for i, d := range waiting {
		outcome := ledger.AckProcessed
		if i%3 == 0 {
			outcome = ledger.AckRejected
		}
		s := stores[i%2]
		wg.Go(func() {
			if _, err := s.AckRecord(ctx, &ledger.AckRecordParams{DeliveryID: d.ID, Outcome: outcome, Now: now}); err != nil {
				t.Errorf("AckRecord(%s): %v", d.ID, err)
			}
		})
	}
	wg.Wait()

	type key struct {
		endpoint, outcome string
		attempt           int
	}
	want := map[key]int64{}
	rows, err := rawConn(t, schema).Query(ctx, `
		SELECT endpoint_id, CASE WHEN state = 'delivered' THEN 'Delivered' ELSE exhaust_reason END, attempts, count(*)
		FROM deliveries WHERE state IN ('delivered', 'exhausted') GROUP BY 1, 2, 3`)
	if err != nil {
		t.Fatal(err)
	}
	var (
		k key
		n int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&k.endpoint, &k.outcome, &k.attempt, &n}, func() error { want[k] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	buckets, err := stores[1].OutcomeList(ctx, &ledger.OutcomeListParams{Namespace: "shop", PolicyName: "standard"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[key]int64{}
	var delivered, histogram int64
	for _, b := range buckets {
		got[key{b.EndpointID, b.Outcome, b.Attempt}] += b.Count
		if b.Outcome == ledger.OutcomeDelivered {
			delivered += b.Count
			for _, h := range b.TimeToDelivery {
				histogram += h
			}
		}
	}
	if len(want) < 4 {
		t.Fatalf("the workload settled too few kinds of outcome to test: %v", want)
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(key{})); diff != "" {
		t.Errorf("outcome counts differ from the recount of the deliveries (-recount +outcomes):\n%s", diff)
	}
	if histogram != delivered {
		t.Errorf("the time-to-delivery histogram counts %d deliveries, %d were delivered", histogram, delivered)
	}
}
