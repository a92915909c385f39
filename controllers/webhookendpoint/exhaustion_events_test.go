package webhookendpoint

import (
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func TestExhaustionEventsNeverBlock(t *testing.T) {
	x := NewExhaustionEvents(2)
	notice := func(endpoint string) engine.ExhaustedNotice {
		return engine.ExhaustedNotice{Delivery: ledger.Delivery{ID: "dlv_1", EndpointID: endpoint}}
	}
	x.Notify(notice("shop/orders"))
	x.Notify(notice("not-an-id"))
	x.Notify(notice("shop/refunds"))
	x.Notify(notice("shop/orders")) // the buffer is full: dropped, not blocked

	if x.Dropped() != 1 {
		t.Errorf("dropped %d notices, want 1", x.Dropped())
	}
	for _, want := range []string{"shop/orders", "shop/refunds"} {
		ev := <-x.Events()
		if got := ev.Object.GetNamespace() + "/" + ev.Object.GetName(); got != want {
			t.Errorf("event for %s, want %s", got, want)
		}
	}
	select {
	case ev := <-x.Events():
		t.Errorf("unexpected event for %s", ev.Object.GetName())
	default:
	}
}
