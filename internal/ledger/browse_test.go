package ledger

import "testing"

func TestSelectsFailed(t *testing.T) {
	for _, c := range []struct {
		states []DeliveryState
		want   bool
	}{
		{nil, false},
		{[]DeliveryState{StateExhausted}, true},
		{[]DeliveryState{StateCancelled}, true},
		{[]DeliveryState{StateScheduled}, false},
		{[]DeliveryState{StateInFlight}, false},
		{[]DeliveryState{StateAwaitingAck}, false},
		{[]DeliveryState{StateDelivered}, false},
		// Two walks of the index would have to be merged.
		{[]DeliveryState{StateExhausted, StateCancelled}, false},
		{[]DeliveryState{StateExhausted, StateDelivered}, false},
	} {
		p := &DeliveryBrowseParams{States: c.states}
		if got := p.SelectsFailed(); got != c.want {
			t.Errorf("SelectsFailed(%v) = %v, want %v", c.states, got, c.want)
		}
	}
}
