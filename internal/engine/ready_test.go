package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// failingClaims is a real store whose claims fail while fail is set, as
// when the ledger stops answering.
type failingClaims struct {
	ledger.Store
	fail   atomic.Bool
	failed atomic.Int32
}

func (s *failingClaims) DeliveryClaim(ctx context.Context, p *ledger.DeliveryClaimParams) ([]ledger.ClaimedDelivery, error) {
	if s.fail.Load() {
		s.failed.Add(1)
		return nil, errors.New("the ledger does not answer")
	}
	return s.Store.DeliveryClaim(ctx, p)
}

// TestReadyFollowsTheClaimLoop: readiness (issue #44) is the data plane's
// own: not ready before Run has ended a claim round, ready after, not
// ready once no round has succeeded for 15 s (the ledger does not answer),
// ready again after the next good round, and not ready once Run returned.
func TestReadyFollowsTheClaimLoop(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			store := &failingClaims{Store: sf.open(t)}
			clock := &manualClock{now: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
			e, err := engine.New(engine.Options{Store: store, Clock: clock, IdleWait: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Ready(); err == nil || !strings.Contains(err.Error(), "not running") {
				t.Fatalf("Ready before Run: %v; want not running", err)
			}
			r, done := startEngine(t, e)
			eventually(t, "ready after the first claim round", func() bool { return e.Ready() == nil })

			store.fail.Store(true)
			before := store.failed.Load()
			eventually(t, "two claims failing", func() bool { return store.failed.Load() >= before+2 })
			if err := e.Ready(); err != nil {
				t.Fatalf("Ready moments after a claim failed: %v; want ready (a blip is not an outage)", err)
			}
			clock.advance(16 * time.Second)
			if err := e.Ready(); err == nil || !strings.Contains(err.Error(), "no claim round") {
				t.Fatalf("Ready 16 s after the last good round: %v; want not ready", err)
			}
			store.fail.Store(false)
			eventually(t, "ready again after a good round", func() bool { return e.Ready() == nil })

			r.cancel()
			<-done
			if err := e.Ready(); err == nil {
				t.Fatal("Ready after Run returned: nil; want not running")
			}
		})
	}
}
