package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// recordCommits is a real store that counts the attempt records of each
// WriteMany carrying any. Wrapping hides ledger.SerialWriter, so the
// engine treats either store as one that commits concurrently.
type recordCommits struct {
	ledger.Store
	mu      sync.Mutex
	records []int
}

func (s *recordCommits) WriteMany(ctx context.Context, w *ledger.WriteBatch) (ledger.WriteResult, error) {
	if len(w.Attempts) > 0 {
		s.mu.Lock()
		s.records = append(s.records, len(w.Attempts))
		s.mu.Unlock()
	}
	return s.Store.WriteMany(ctx, w)
}

func (s *recordCommits) seen() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.records...)
}

// TestRecordsWaitForEachOtherOnAConcurrentStore: on a store whose
// records have a group commit of their own, a record waits (up to
// RecordWait) for the records that follow it, so that two attempts
// answered together cost one transaction, not two (ADR 0041).
func TestRecordsWaitForEachOtherOnAConcurrentStore(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			store := &recordCommits{Store: sf.open(t)}
			// The receiver answers neither attempt before both arrived, so
			// their records queue together.
			var both sync.WaitGroup
			both.Add(2)
			rcv := newReceiver(t, func(int) int {
				both.Done()
				both.Wait()
				return 204
			})
			e := run(t, engine.Options{Store: store, RecordWait: 3 * time.Second})
			ctx := context.Background()
			if _, err := e.RegisterEndpoint(ctx, endpoint(t, "shop", "orders", rcv.URL, []string{"*"}, policy(3, time.Millisecond))); err != nil {
				t.Fatal(err)
			}
			publish(t, e, "shop", "order.created", `{"n":1}`)
			publish(t, e, "shop", "order.created", `{"n":2}`)
			eventually(t, "both delivered", func() bool {
				s, _ := e.EndpointStats(ctx, "shop/orders")
				return s.Delivered == 2
			})
			if got := store.seen(); len(got) != 1 || got[0] != 2 {
				t.Errorf("attempt records per commit: %v, want one commit of both", got)
			}
		})
	}
}
