package ledger

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCounterOf(t *testing.T) {
	for _, tc := range []struct {
		state DeliveryState
		res   Resolution
		want  Counter
		ok    bool
	}{
		{StateScheduled, ResolutionNone, CounterPending, true},
		{StateInFlight, ResolutionNone, CounterInFlight, true},
		{StateAwaitingAck, ResolutionNone, CounterAwaitingAck, true},
		{StateDelivered, ResolutionNone, CounterDelivered, true},
		{StateExhausted, ResolutionUnresolved, CounterExhaustedUnresolved, true},
		{StateExhausted, ResolutionRetried, 0, false},
		{StateExhausted, ResolutionReissued, 0, false},
		{StateExhausted, ResolutionDismissed, 0, false},
		{StateCancelled, ResolutionNone, CounterCancelled, true},
		{"unknown", ResolutionNone, 0, false},
	} {
		c, ok := CounterOf(tc.state, tc.res)
		if ok != tc.ok || (ok && c != tc.want) {
			t.Errorf("CounterOf(%s, %q) = %d, %v; want %d, %v", tc.state, tc.res, c, ok, tc.want, tc.ok)
		}
	}
}

// counts builds a Counts array from pairs of counter and value.
func counts(kv ...int64) [NumCounters]int64 {
	var out [NumCounters]int64
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func TestStatsDelta(t *testing.T) {
	t1 := time.Date(2030, 1, 1, 0, 0, 1, 0, time.UTC)
	t2 := t1.Add(time.Second)
	for _, tc := range []struct {
		name string
		do   func(s StatsDelta)
		want map[string]StatsChange
	}{
		{"insert counts pending", func(s StatsDelta) { s.Add("a", StateScheduled, ResolutionNone, 3) },
			map[string]StatsChange{"a": {Counts: counts(int64(CounterPending), 3)}}},
		{"claim moves pending to in flight", func(s StatsDelta) {
			s.Move("a", StateScheduled, ResolutionNone, StateInFlight, ResolutionNone)
		}, map[string]StatsChange{"a": {Counts: counts(int64(CounterPending), -1, int64(CounterInFlight), 1)}}},
		{"exhaustion counts unresolved", func(s StatsDelta) {
			s.Move("a", StateInFlight, ResolutionNone, StateExhausted, ResolutionUnresolved)
		}, map[string]StatsChange{"a": {Counts: counts(int64(CounterInFlight), -1, int64(CounterExhaustedUnresolved), 1)}}},
		{"resolution leaves exhausted-unresolved", func(s StatsDelta) {
			s.Move("a", StateExhausted, ResolutionUnresolved, StateExhausted, ResolutionDismissed)
		}, map[string]StatsChange{"a": {Counts: counts(int64(CounterExhaustedUnresolved), -1)}}},
		{"moves that cancel out leave the endpoint unchanged", func(s StatsDelta) {
			s.Move("a", StateScheduled, ResolutionNone, StateInFlight, ResolutionNone)
			s.Move("a", StateInFlight, ResolutionNone, StateScheduled, ResolutionNone)
		}, map[string]StatsChange{}},
		{"the latest outcome of a transaction wins, whatever the order", func(s StatsDelta) {
			s.Outcome("a", false, true, t2, "late")
			s.Outcome("a", false, true, t1, "early")
			s.Outcome("a", true, false, t2, "")
			s.Outcome("a", true, false, t1, "")
		}, map[string]StatsChange{"a": {SuccessAt: &t2, FailureAt: &t2, FailureReason: "late"}}},
		{"a later failure at the same instant replaces the reason", func(s StatsDelta) {
			s.Outcome("a", false, true, t1, "first")
			s.Outcome("a", false, true, t1, "second")
		}, map[string]StatsChange{"a": {FailureAt: &t1, FailureReason: "second"}}},
		{"neither success nor failure (awaiting ack) notes nothing", func(s StatsDelta) {
			s.Outcome("a", false, false, t1, "x")
		}, map[string]StatsChange{}},
		{"endpoints stay apart", func(s StatsDelta) {
			s.Add("b", StateScheduled, ResolutionNone, 1)
			s.Add("a", StateCancelled, ResolutionNone, 2)
		}, map[string]StatsChange{
			"a": {Counts: counts(int64(CounterCancelled), 2)},
			"b": {Counts: counts(int64(CounterPending), 1)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := StatsDelta{}
			tc.do(s)
			got := map[string]StatsChange{}
			for _, id := range s.Endpoints() {
				got[id] = *s[id]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("changes (-want +got):\n%s", diff)
			}
			want := make([]string, 0, len(tc.want))
			for id := range tc.want {
				want = append(want, id)
			}
			slices.Sort(want)
			if ids := s.Endpoints(); !slices.Equal(ids, want) {
				t.Fatalf("Endpoints() = %v, want %v (sorted, changed only)", ids, want)
			}
		})
	}
}

func TestStatsChangeApply(t *testing.T) {
	t1 := time.Date(2030, 1, 1, 0, 0, 1, 0, time.UTC)
	t2 := t1.Add(time.Second)
	for _, tc := range []struct {
		name          string
		before, after EndpointStats
		change        StatsChange
	}{
		{"counters add, every one",
			EndpointStats{Pending: 1, InFlight: 2, AwaitingAck: 3, Delivered: 4, ExhaustedUnresolved: 5, Cancelled: 6},
			EndpointStats{Pending: 2, InFlight: 1, AwaitingAck: 5, Delivered: 1, ExhaustedUnresolved: 9, Cancelled: 11},
			StatsChange{Counts: [NumCounters]int64{1, -1, 2, -3, 4, 5}}},
		{"first outcomes are set",
			EndpointStats{},
			EndpointStats{LastSuccessAt: &t1, LastFailureAt: &t1, LastFailureReason: "HTTP 500"},
			StatsChange{SuccessAt: &t1, FailureAt: &t1, FailureReason: "HTTP 500"}},
		{"later outcomes move forward",
			EndpointStats{LastSuccessAt: &t1, LastFailureAt: &t1, LastFailureReason: "old"},
			EndpointStats{LastSuccessAt: &t2, LastFailureAt: &t2, LastFailureReason: "new"},
			StatsChange{SuccessAt: &t2, FailureAt: &t2, FailureReason: "new"}},
		{"earlier outcomes never move back",
			EndpointStats{LastSuccessAt: &t2, LastFailureAt: &t2, LastFailureReason: "kept"},
			EndpointStats{LastSuccessAt: &t2, LastFailureAt: &t2, LastFailureReason: "kept"},
			StatsChange{SuccessAt: &t1, FailureAt: &t1, FailureReason: "older"}},
		{"a failure at the recorded instant replaces the reason",
			EndpointStats{LastFailureAt: &t1, LastFailureReason: "old"},
			EndpointStats{LastFailureAt: &t1, LastFailureReason: "new"},
			StatsChange{FailureAt: &t1, FailureReason: "new"}},
		{"no outcome keeps the last ones",
			EndpointStats{LastSuccessAt: &t1, LastFailureAt: &t2, LastFailureReason: "kept"},
			EndpointStats{LastSuccessAt: &t1, LastFailureAt: &t2, LastFailureReason: "kept"},
			StatsChange{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.before
			tc.change.Apply(&st)
			if diff := cmp.Diff(tc.after, st); diff != "" {
				t.Fatalf("stats (-want +got):\n%s", diff)
			}
		})
	}
}
