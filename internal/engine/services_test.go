package engine_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// manualClock is a clock the test moves.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestRetentionDrainsABacklog: more expired events than one retention
// round removes are all gone without waiting for further PruneIntervals,
// so that retention keeps up with a sustained ingest rate.
func TestRetentionDrainsABacklog(t *testing.T) {
	const events = 7_000 // one round removes at most 10 batches of 500
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := sf.open(t)
			start := time.Now()
			for i := 0; i < events; i += 1000 {
				batch := make([]*ledger.EventInsertParams, 1000)
				for j := range batch {
					batch[j] = &ledger.EventInsertParams{ID: ledger.NewID("evt", start), Namespace: "quiet",
						Type: "order.created", Data: json.RawMessage(`{}`), Now: start}
				}
				if _, err := store.EventInsertMany(ctx, batch); err != nil {
					t.Fatal(err)
				}
			}

			clock := &manualClock{now: start}
			swept := make(chan struct{}, 1)
			reg := prometheus.NewPedanticRegistry()
			run(t, engine.Options{Store: &sweepSignal{Store: store, swept: swept}, Clock: clock, Metrics: engine.NewMetrics(reg, store),
				SweepInterval: 5 * time.Millisecond, PruneInterval: time.Hour, CompactInterval: time.Hour,
				DefaultPayloadRetention: time.Minute, DefaultEvidenceRetention: time.Minute})

			// Once the background work runs, one PruneInterval passes and
			// every event is past its retention. The clock stands still
			// from here: only backlog rounds can remove more than the
			// first round's 5,000.
			<-swept
			clock.advance(time.Hour)
			eventually(t, "every expired event pruned", func() bool { return prunedEvents(t, reg) == events })
		})
	}
}

// sweepSignal reports the engine's first background sweep, after which
// the engine has read the clock its retention rounds are paced from.
type sweepSignal struct {
	ledger.Store
	swept chan struct{}
}

func (s *sweepSignal) SecretsScrubDue(ctx context.Context, now time.Time, limit int) (int, error) {
	select {
	case s.swept <- struct{}{}:
	default:
	}
	return s.Store.SecretsScrubDue(ctx, now, limit)
}

// prunedEvents reads hookkeeper_retention_pruned_total{kind="event"}.
func prunedEvents(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "hookkeeper_retention_pruned_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == "event" {
					return int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return 0
}
