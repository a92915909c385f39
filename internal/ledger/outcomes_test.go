package ledger

import (
	"testing"
	"time"
)

func TestSettledOutcome(t *testing.T) {
	created := time.Date(2026, 12, 1, 9, 59, 0, 0, time.UTC)
	now := time.Date(2026, 12, 1, 10, 4, 0, 0, time.FixedZone("x", 3600)) // 09:04 UTC
	for _, tc := range []struct {
		name    string
		d       Delivery
		ok      bool
		outcome string
		ttd     int // histogram bucket, -1 none
	}{
		{"delivered on a retry", Delivery{State: StateDelivered, Attempts: 3}, true, OutcomeDelivered, 4},
		{"exhausted by reason", Delivery{State: StateExhausted, Attempts: 5, ExhaustReason: ExhaustMaxAttempts}, true, "MaxAttempts", -1},
		{"ack rejected", Delivery{State: StateExhausted, Attempts: 1, ExhaustReason: ExhaustAckRejected}, true, "AckRejected", -1},
		{"scheduled (a retry) is not settled", Delivery{State: StateScheduled, Attempts: 1}, false, "", -1},
		{"awaiting_ack is not settled", Delivery{State: StateAwaitingAck, Attempts: 1}, false, "", -1},
		{"cancelled is not an outcome of the schedule", Delivery{State: StateCancelled}, false, "", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.d.EndpointID, tc.d.CreatedAt = "ns/a", created.Add(-time.Hour) // 65m before now
			key, count, ok := SettledOutcome(tc.d, now)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			wantHour := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
			if key.EndpointID != "ns/a" || !key.Hour.Equal(wantHour) || key.Hour.Location() != time.UTC ||
				key.Outcome != tc.outcome || key.Attempt != tc.d.Attempts {
				t.Errorf("key = %+v", key)
			}
			if count.Count != 1 || !count.FirstAt.Equal(now) || !count.LastAt.Equal(now) {
				t.Errorf("count = %+v", count)
			}
			for i, n := range count.TimeToDelivery {
				if want := int64(0); i == tc.ttd {
					want = 1
					if n != want {
						t.Errorf("histogram bucket %d = %d, want 1", i, n)
					}
				} else if n != want {
					t.Errorf("histogram bucket %d = %d, want 0", i, n)
				}
			}
		})
	}
}

func TestOutcomeDeltas(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	o := OutcomeDeltas{}
	o.Note(Delivery{EndpointID: "ns/b", State: StateDelivered, Attempts: 1, CreatedAt: at}, at.Add(2*time.Second))
	o.Note(Delivery{EndpointID: "ns/b", State: StateDelivered, Attempts: 1, CreatedAt: at}, at.Add(time.Second))
	o.Note(Delivery{EndpointID: "ns/a", State: StateExhausted, Attempts: 2, ExhaustReason: ExhaustGone}, at)
	o.Note(Delivery{EndpointID: "ns/a", State: StateScheduled, Attempts: 1}, at)
	keys := o.Keys()
	if len(keys) != 2 || keys[0].EndpointID != "ns/a" || keys[1].EndpointID != "ns/b" {
		t.Fatalf("keys = %+v, want ns/a then ns/b", keys)
	}
	c := o[keys[1]]
	if c.Count != 2 || c.TimeToDelivery[0] != 1 || c.TimeToDelivery[1] != 1 ||
		!c.FirstAt.Equal(at.Add(time.Second)) || !c.LastAt.Equal(at.Add(2*time.Second)) {
		t.Errorf("folded count = %+v", c)
	}
}
