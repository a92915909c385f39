package deliveryapi

import (
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// TestDeliveryShowsItsTraceID: a delivery shows the trace ID of the
// publish its event was stored with, in its spec and in the Trace column
// of kubectl get -o wide; none when the event was published untraced.
func TestDeliveryShowsItsTraceID(t *testing.T) {
	c := tableConvertor{now: func() time.Time { return time.Unix(1_700_000_000, 0) }}
	traced := ledger.DeliveryView{Delivery: ledger.Delivery{ID: "dlv_1", EventID: "evt_1", EndpointID: "shop/orders", State: ledger.StateDelivered},
		Namespace: "shop", EventType: "order.created",
		EventTrace: ledger.TraceContext{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	plain := traced
	plain.EventTrace = ledger.TraceContext{}
	for _, tt := range []struct {
		name string
		v    ledger.DeliveryView
		want string
	}{{"traced", traced, "4bf92f3577b34da6a3ce929d0e0e4736"}, {"untraced", plain, ""}} {
		d := toDelivery(tt.v, nil)
		if d.Spec.TraceID != tt.want {
			t.Fatalf("%s: spec.traceID %q; want %q", tt.name, d.Spec.TraceID, tt.want)
		}
		row := c.deliveryRow(&d)
		if got := row.Cells[len(deliveryColumns)-1]; deliveryColumns[len(deliveryColumns)-1].Name != "Trace" || got != tt.want {
			t.Fatalf("%s: the Trace column shows %v; want %q", tt.name, got, tt.want)
		}
	}
}
