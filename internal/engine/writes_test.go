package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/groupcommit"
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

// ingestBarrier is a real store whose first two commits of inserts wait
// for each other before they reach it: they complete only if the engine
// runs them at once. Wrapping hides ledger.SerialWriter.
type ingestBarrier struct {
	ledger.Store
	mu      sync.Mutex
	calls   int
	both    sync.WaitGroup
	entered chan struct{} // a commit of inserts reached the barrier
}

func (s *ingestBarrier) WriteMany(ctx context.Context, w *ledger.WriteBatch) (ledger.WriteResult, error) {
	if len(w.Events) > 0 {
		s.mu.Lock()
		s.calls++
		first := s.calls <= 2
		s.mu.Unlock()
		if first {
			s.entered <- struct{}{}
			s.both.Done()
			s.both.Wait()
		}
	}
	return s.Store.WriteMany(ctx, w)
}

// TestPublishesCommitAtOnceOnAConcurrentStore: on a store that commits
// concurrently, with two ingest committers (WriteBatch.Committers), a
// publish that arrives while another's commit runs gets a commit of its
// own at once instead of waiting for that one to end. With one committer
// this test would hang at the barrier.
func TestPublishesCommitAtOnceOnAConcurrentStore(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			store := &ingestBarrier{Store: sf.open(t), entered: make(chan struct{}, 2)}
			store.both.Add(2)
			e := run(t, engine.Options{Store: store, WriteBatch: groupcommit.Options{Committers: 2}})
			var wg sync.WaitGroup
			wg.Go(func() { publish(t, e, "shop", "order.created", `{"n":1}`) })
			<-store.entered // the first publish's commit runs
			wg.Go(func() { publish(t, e, "shop", "order.created", `{"n":2}`) })
			wg.Wait()
		})
	}
}

// TestConcurrentIngestCommitsLoseAndDoubleNothing: publishes of the same
// idempotency keys from many callers at once, committed by several ingest
// commits in flight (on PostgreSQL; SQLite keeps one), store each key's
// event once, answer every caller with it, and deliver it once.
func TestConcurrentIngestCommitsLoseAndDoubleNothing(t *testing.T) {
	const keys, callersPerKey = 60, 4
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			store := sf.open(t)
			rcv := newReceiver(t, func(int) int { return 204 })
			e := run(t, engine.Options{Store: store, WriteBatch: groupcommit.Options{MaxDelay: -1, Committers: 4, MaxBatch: 8}})
			ctx := context.Background()
			if _, err := e.RegisterEndpoint(ctx, endpoint(t, "shop", "orders", rcv.URL, []string{"*"}, policy(3, time.Millisecond))); err != nil {
				t.Fatal(err)
			}
			type answer struct {
				key, event string
				duplicate  bool
			}
			answers := make(chan answer, keys*callersPerKey)
			var wg sync.WaitGroup
			for c := range callersPerKey {
				wg.Go(func() {
					for k := range keys {
						k = (k + c*keys/callersPerKey) % keys // callers meet on keys in different orders
						data := fmt.Sprintf(`{"k":%d}`, k)
						hash := sha256.Sum256([]byte(data))
						now := time.Now()
						res, err := e.Publish(ctx, &ledger.EventInsertParams{
							ID: ledger.NewID("evt", now), Namespace: "shop", Type: "order.created",
							Data: json.RawMessage(data), Now: now,
							IdempotencyKey: fmt.Sprint("key-", k), BodyHash: hash[:],
						})
						if err != nil || res.Err != nil {
							t.Errorf("publish of key %d: %v / %v", k, err, res.Err)
							return
						}
						answers <- answer{fmt.Sprint("key-", k), res.Event.ID, res.Duplicate}
					}
				})
			}
			wg.Wait()
			close(answers)
			events := map[string]string{}
			originals := map[string]int{}
			for a := range answers {
				if id, ok := events[a.key]; ok && id != a.event {
					t.Errorf("%s answered with events %s and %s", a.key, id, a.event)
				}
				events[a.key] = a.event
				if !a.duplicate {
					originals[a.key]++
				}
			}
			if len(events) != keys {
				t.Fatalf("%d keys answered, want %d", len(events), keys)
			}
			for k, n := range originals {
				if n != 1 {
					t.Errorf("%s stored %d times", k, n)
				}
			}
			if len(originals) != keys {
				t.Errorf("%d keys stored, want %d", len(originals), keys)
			}
			eventually(t, "every event delivered", func() bool {
				s, _ := e.EndpointStats(ctx, "shop/orders")
				return s.Delivered == keys
			})
			for _, id := range events {
				if n := rcv.count(id); n != 1 {
					t.Errorf("event %s received %d times, want once", id, n)
				}
			}
			if s, _ := e.EndpointStats(ctx, "shop/orders"); s.Delivered != keys || s.Pending != 0 || s.InFlight != 0 {
				t.Errorf("endpoint stats %+v, want %d delivered and nothing else", s, keys)
			}
		})
	}
}
