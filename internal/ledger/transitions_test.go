package ledger

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAttemptTransition(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC)
	started := now.Add(-time.Second)
	earlier := now.Add(-time.Hour)
	due := now.Add(time.Minute)
	deadline := now.Add(30 * time.Second)
	leaseUntil := now.Add(time.Minute)
	// inFlight is a delivery held by "w1", attempted before when attempts > 0.
	inFlight := func(attempts int) Delivery {
		d := Delivery{
			ID: "dlv_1", EventID: "evt_1", EndpointID: "ns/ep", State: StateInFlight,
			DueAt: earlier, LeaseOwner: "w1", LeaseUntil: &leaseUntil, Attempts: attempts,
		}
		if attempts > 0 {
			d.FirstAttemptAt, d.LastStatus, d.LastError = &earlier, 503, "old"
		}
		return d
	}
	for _, tc := range []struct {
		name    string
		before  Delivery
		attempt Attempt
		next    Next
		want    func(d *Delivery) // changes from before
		stats   StatsChange
	}{
		{"first attempt delivered", inFlight(0), Attempt{StartedAt: started, StatusCode: 204},
			Next{State: StateDelivered},
			func(d *Delivery) {
				d.State, d.Attempts, d.FirstAttemptAt, d.LastStatus, d.TerminalAt = StateDelivered, 1, &started, 204, &now
			},
			StatsChange{Counts: counts(int64(CounterInFlight), -1, int64(CounterDelivered), 1), SuccessAt: &now}},
		{"retry scheduled keeps the first attempt time", inFlight(2), Attempt{StartedAt: started, StatusCode: 500},
			Next{State: StateScheduled, DueAt: due},
			func(d *Delivery) {
				d.State, d.Attempts, d.DueAt, d.LastStatus, d.LastError = StateScheduled, 3, due, 500, ""
			},
			StatsChange{Counts: counts(int64(CounterInFlight), -1, int64(CounterPending), 1), FailureAt: &now, FailureReason: "HTTP 500"}},
		{"awaiting ack is neither success nor failure", inFlight(0), Attempt{StatusCode: 202},
			Next{State: StateAwaitingAck, AckDeadline: deadline},
			func(d *Delivery) {
				d.State, d.Attempts, d.FirstAttemptAt, d.AckDeadline, d.LastStatus = StateAwaitingAck, 1, &now, &deadline, 202
			},
			StatsChange{Counts: counts(int64(CounterInFlight), -1, int64(CounterAwaitingAck), 1)}},
		{"exhausted by a network error", inFlight(4), Attempt{StartedAt: started, Error: "connection refused"},
			Next{State: StateExhausted, Reason: ExhaustMaxAttempts},
			func(d *Delivery) {
				d.State, d.Attempts, d.LastStatus, d.LastError = StateExhausted, 5, 0, "connection refused"
				d.ExhaustReason, d.Resolution, d.TerminalAt = ExhaustMaxAttempts, ResolutionUnresolved, &now
			},
			StatsChange{Counts: counts(int64(CounterInFlight), -1, int64(CounterExhaustedUnresolved), 1), FailureAt: &now, FailureReason: "connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &AttemptRecordParams{DeliveryID: tc.before.ID, Owner: "w1", Attempt: tc.attempt, Next: tc.next, Now: now}
			tr, err := p.Transition()
			if err != nil {
				t.Fatal(err)
			}
			got := tc.before
			tr.Apply(&got)
			want := tc.before
			want.LeaseOwner, want.LeaseUntil = "", nil
			tc.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("delivery (-want +got):\n%s", diff)
			}
			s := StatsDelta{}
			tr.Stats(s, got.EndpointID, now)
			if diff := cmp.Diff(tc.stats, *s.Of(got.EndpointID)); diff != "" {
				t.Errorf("stats change (-want +got):\n%s", diff)
			}
		})
	}
	for _, next := range []Next{
		{State: StateScheduled},
		{State: StateAwaitingAck},
		{State: StateExhausted},
		{State: StateInFlight},
		{State: "bogus"},
	} {
		p := &AttemptRecordParams{Next: next, Now: now}
		if _, err := p.Transition(); err == nil {
			t.Errorf("Transition with Next %+v: no error", next)
		}
	}
}

func TestAckTransitionStats(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC)
	processed, _ := (&AckRecordParams{Outcome: AckProcessed, Now: now}).Transition()
	rejected, _ := (&AckRecordParams{Outcome: AckRejected, Reason: "no stock", Now: now}).Transition()
	retry, _ := (&AckTimeoutParams{Next: Next{State: StateScheduled, DueAt: now.Add(time.Minute)}, Now: now}).Transition()
	for _, tc := range []struct {
		name string
		tr   AckTransition
		want StatsChange
	}{
		{"processed", processed, StatsChange{Counts: counts(int64(CounterAwaitingAck), -1, int64(CounterDelivered), 1), SuccessAt: &now}},
		{"rejected", rejected, StatsChange{Counts: counts(int64(CounterAwaitingAck), -1, int64(CounterExhaustedUnresolved), 1),
			FailureAt: &now, FailureReason: AckRejectedReason + ": no stock"}},
		{"timeout retry", retry, StatsChange{Counts: counts(int64(CounterAwaitingAck), -1, int64(CounterPending), 1),
			FailureAt: &now, FailureReason: AckTimeoutReason}},
	} {
		s := StatsDelta{}
		tc.tr.Stats(s, "ns/ep", now)
		if diff := cmp.Diff(tc.want, *s.Of("ns/ep")); diff != "" {
			t.Errorf("%s: stats change (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestNewDelivery(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 1, 0, 0, time.FixedZone("x", 3600))
	until := now.Add(time.Minute)
	scheduled := Delivery{ID: "dlv_1", EventID: "evt_1", EndpointID: "ns/ep", State: StateScheduled, DueAt: now.UTC(), CreatedAt: now.UTC()}
	leased := scheduled
	leased.State, leased.LeaseOwner, leased.LeaseUntil = StateInFlight, "w1", ptrTo(until.UTC())
	for _, tc := range []struct {
		name    string
		leaseTo *Lease
		paused  bool
		want    Delivery
	}{
		{"no lease asked: scheduled", nil, false, scheduled},
		{"lease asked: in flight, leased", &Lease{Owner: "w1", Until: until}, false, leased},
		{"paused endpoint: scheduled despite the lease", &Lease{Owner: "w1", Until: until}, true, scheduled},
		{"paused, no lease: scheduled", nil, true, scheduled},
		{"refused endpoint: scheduled", &Lease{Owner: "w1", Until: until, Admit: func(id string) bool { return id != "ns/ep" }}, false, scheduled},
		{"another endpoint refused: leased", &Lease{Owner: "w1", Until: until, Admit: func(id string) bool { return id != "ns/other" }}, false, leased},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &EventInsertParams{Now: now, LeaseTo: tc.leaseTo}
			got := p.NewDelivery("dlv_1", "evt_1", "ns/ep", tc.paused)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("NewDelivery (-want +got):\n%s", diff)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
