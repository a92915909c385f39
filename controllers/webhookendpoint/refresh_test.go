package webhookendpoint

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func TestTimeDrivenRefresh(t *testing.T) {
	now := time.Date(2030, 5, 6, 10, 20, 30, 0, time.UTC)
	hour := now.Truncate(time.Hour)
	retryable := func(replayFrom time.Time) ledger.ExhaustedDelivery {
		return ledger.ExhaustedDelivery{ReplayFrom: replayFrom}
	}
	for _, tc := range []struct {
		name     string
		obs      endpointObservation
		f        endpointFacts
		memo     *exhaustionMemo
		interval time.Duration
		want     time.Time
	}{
		{name: "at rest: nothing changes with time"},
		{name: "at rest with a counter history: still nothing",
			f: endpointFacts{Deliveries: &deliveryFacts{Stats: ledger.EndpointStats{Delivered: 5, LastSuccessAt: ptr.To(now.Add(-time.Minute))}}}},
		{name: "a rotation's previous secret expires",
			f: endpointFacts{PreviousSecretUntil: now.Add(10 * time.Minute)}, want: now.Add(10 * time.Minute)},
		{name: "a previous secret already past is dropped at once",
			f: endpointFacts{PreviousSecretUntil: now.Add(-time.Second)}, want: now.Add(-time.Second)},
		{name: "a deferral streak ends DeferralWindow after its last deferral",
			obs:  endpointObservation{Deferrals: &ledger.DeferralStreak{Count: 3, First: now.Add(-time.Minute), Last: now.Add(-30 * time.Second)}},
			want: now.Add(-30 * time.Second).Add(ledger.DeferralWindow)},
		{name: "an ended streak changes nothing more",
			obs: endpointObservation{Deferrals: &ledger.DeferralStreak{Count: 3, First: now.Add(-time.Hour), Last: now.Add(-10 * time.Minute)}}},
		{name: "evidence: the oldest bucket leaves the last 24 hours",
			obs: endpointObservation{EvidenceRead: true, Evidence: []ledger.OutcomeBucket{
				{OutcomeKey: ledger.OutcomeKey{Hour: hour.Add(-23 * time.Hour)}}, {OutcomeKey: ledger.OutcomeKey{Hour: hour.Add(-2 * time.Hour)}}}},
			want: hour.Add(time.Hour)},
		{name: "evidence older than a day leaves the week",
			obs: endpointObservation{EvidenceRead: true, Evidence: []ledger.OutcomeBucket{
				{OutcomeKey: ledger.OutcomeKey{Hour: hour.Add(-6*24*time.Hour - 20*time.Hour)}}, {OutcomeKey: ledger.OutcomeKey{Hour: hour.Add(-3 * 24 * time.Hour)}}}},
			want: hour.Add(-6*24*time.Hour - 20*time.Hour).Add(7 * 24 * time.Hour)},
		{name: "evidence not read: the status keeps what it showed",
			obs: endpointObservation{Evidence: []ledger.OutcomeBucket{{OutcomeKey: ledger.OutcomeKey{Hour: hour}}}}},
		{name: "a recent exhausted delivery leaves its replay window",
			f: endpointFacts{Deliveries: &deliveryFacts{ReplayWindow: time.Hour, Recent: []ledger.ExhaustedDelivery{
				retryable(now.Add(-30 * time.Minute)), retryable(now.Add(-10 * time.Minute))}}},
			want: now.Add(30*time.Minute + time.Nanosecond)},
		{name: "its event's validUntil comes first",
			f: endpointFacts{Deliveries: &deliveryFacts{ReplayWindow: time.Hour, Recent: []ledger.ExhaustedDelivery{
				{ReplayFrom: now.Add(-30 * time.Minute), ValidUntil: ptr.To(now.Add(5 * time.Minute))}}}},
			want: now.Add(5 * time.Minute)},
		{name: "a policy override's replay window",
			f: endpointFacts{Deliveries: &deliveryFacts{ReplayWindow: time.Hour, Recent: []ledger.ExhaustedDelivery{
				{ReplayFrom: now.Add(-30 * time.Minute), OverrideReplayWindow: 40 * time.Minute}}}},
			want: now.Add(10*time.Minute + time.Nanosecond)},
		{name: "one that can only be reissued changes no more",
			f: endpointFacts{Deliveries: &deliveryFacts{ReplayWindow: time.Hour, Recent: []ledger.ExhaustedDelivery{
				{ReplayFrom: now.Add(-30 * time.Minute), SecretsScrubbed: true},
				{ReplayFrom: now.Add(-2 * time.Hour)},
				{ReplayFrom: now, ReplayClass: ledger.ReplayNever}}}}},
		{name: "an Event the interval held back is announced when it ends",
			f:    endpointFacts{Deliveries: &deliveryFacts{Stats: ledger.EndpointStats{ExhaustedUnresolved: 7}}},
			memo: &exhaustionMemo{At: now.Add(-20 * time.Second), Count: 5}, interval: time.Minute,
			want: now.Add(40 * time.Second)},
		{name: "a count already announced waits for nothing",
			f:    endpointFacts{Deliveries: &deliveryFacts{Stats: ledger.EndpointStats{ExhaustedUnresolved: 5}}},
			memo: &exhaustionMemo{At: now.Add(-20 * time.Second), Count: 5}, interval: time.Minute},
		{name: "the earliest of several",
			obs:  endpointObservation{Deferrals: &ledger.DeferralStreak{Count: 1, First: now, Last: now}},
			f:    endpointFacts{PreviousSecretUntil: now.Add(time.Hour)},
			want: now.Add(ledger.DeferralWindow)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.obs.Now = now
			got := timeDrivenRefresh(&tc.obs, &tc.f, tc.memo, tc.interval)
			if !got.Equal(tc.want) {
				t.Errorf("timeDrivenRefresh = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRefreshAfter(t *testing.T) {
	now := time.Date(2030, 5, 6, 10, 20, 30, 0, time.UTC)
	const safety = 90 * time.Minute
	for _, tc := range []struct {
		name    string
		waiting bool
		at      time.Time
		want    time.Duration
	}{
		{name: "nothing due: the safety resync", want: safety},
		{name: "waiting for the signing Secret", waiting: true, want: waitingRetry},
		{name: "a second after the status changes with time", at: now.Add(10 * time.Minute), want: 10*time.Minute + time.Second},
		{name: "a change already due: in a second", at: now.Add(-time.Minute), want: time.Second},
		{name: "a change after the safety resync", at: now.Add(3 * time.Hour), want: safety},
		{name: "waiting and a change soon", waiting: true, at: now.Add(500 * time.Millisecond), want: 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := refreshAfter(safety, tc.waiting, tc.at, now); got != tc.want {
				t.Errorf("refreshAfter = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestActivityChanges(t *testing.T) {
	t1 := time.Date(2030, 5, 6, 10, 0, 0, 0, time.UTC)
	act := func(id string, delivered int64, mod ...func(*ledger.EndpointActivity)) ledger.EndpointActivity {
		a := ledger.EndpointActivity{Stats: ledger.EndpointStats{EndpointID: id, Delivered: delivered}}
		for _, m := range mod {
			m(&a)
		}
		return a
	}
	base := []ledger.EndpointActivity{act("a/x", 1), act("a/y", 2), act("b/z", 0)}

	seen := map[string]ledger.EndpointActivity{}
	if moved, want := activityChanges(seen, base), []string{"a/x", "a/y", "b/z"}; !slices.Equal(moved, want) {
		t.Fatalf("first read moved %v, want every endpoint %v", moved, want)
	}

	for _, tc := range []struct {
		name string
		next []ledger.EndpointActivity
		want []string
	}{
		{name: "nothing moved", next: base},
		{name: "nothing read"},
		{name: "a counter", next: []ledger.EndpointActivity{act("a/x", 1), act("a/y", 3), act("b/z", 0)}, want: []string{"a/y"}},
		{name: "a pending delivery", next: []ledger.EndpointActivity{act("a/x", 1, func(a *ledger.EndpointActivity) { a.Stats.Pending = 1 }), act("a/y", 2), act("b/z", 0)},
			want: []string{"a/x"}},
		{name: "the last failure", next: []ledger.EndpointActivity{act("a/x", 1), act("a/y", 2), act("b/z", 0, func(a *ledger.EndpointActivity) {
			a.Stats.LastFailureAt, a.Stats.LastFailureReason = &t1, "HTTP 503"
		})}, want: []string{"b/z"}},
		{name: "the last success", next: []ledger.EndpointActivity{act("a/x", 1, func(a *ledger.EndpointActivity) { a.Stats.LastSuccessAt = &t1 }), act("a/y", 2), act("b/z", 0)},
			want: []string{"a/x"}},
		{name: "an exhaustion", next: []ledger.EndpointActivity{act("a/x", 1), act("a/y", 2, func(a *ledger.EndpointActivity) { a.Stats.ExhaustedUnresolved = 1 }), act("b/z", 0)},
			want: []string{"a/y"}},
		{name: "a deferral", next: []ledger.EndpointActivity{act("a/x", 1), act("a/y", 2), act("b/z", 0, func(a *ledger.EndpointActivity) { a.LastDeferralAt = &t1 })},
			want: []string{"b/z"}},
		{name: "a new endpoint", next: []ledger.EndpointActivity{act("c/new", 0)}, want: []string{"c/new"}},
		{name: "a partial read: what changed", next: []ledger.EndpointActivity{act("a/y", 3)}, want: []string{"a/y"}},
		{name: "a partial read: an unchanged row is not sent",
			next: []ledger.EndpointActivity{act("a/x", 1), act("b/z", 0, func(a *ledger.EndpointActivity) { a.LastDeferralAt = &t1 })},
			want: []string{"b/z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after := maps.Clone(seen)
			if got := activityChanges(after, tc.next); !slices.Equal(got, tc.want) {
				t.Errorf("moved %v, want %v", got, tc.want)
			}
			// The read replaces the entries it has; the others stay.
			want := maps.Clone(seen)
			for _, a := range tc.next {
				want[a.Stats.EndpointID] = a
			}
			if !maps.EqualFunc(after, want, func(a, b ledger.EndpointActivity) bool { return sameActivity(&a, &b) }) {
				t.Errorf("seen after the read = %v, want %v", after, want)
			}
		})
	}

	// The comparison is with the previous read of each: a change shows once.
	next := []ledger.EndpointActivity{act("a/x", 5)}
	if moved := activityChanges(seen, next); !slices.Equal(moved, []string{"a/x"}) {
		t.Fatalf("moved %v, want [a/x]", moved)
	}
	if moved := activityChanges(seen, next); len(moved) != 0 {
		t.Fatalf("the same read again moved %v, want none", moved)
	}
	// Times compare as instants, not as values with a location.
	seen = map[string]ledger.EndpointActivity{}
	activityChanges(seen, []ledger.EndpointActivity{act("a/x", 5, func(a *ledger.EndpointActivity) { a.Stats.LastSuccessAt = &t1 })})
	local := t1.In(time.FixedZone("x", 3600))
	if moved := activityChanges(seen, []ledger.EndpointActivity{act("a/x", 5, func(a *ledger.EndpointActivity) { a.Stats.LastSuccessAt = &local })}); len(moved) != 0 {
		t.Fatalf("the same instant in another zone moved %v", moved)
	}
}

// scriptedActivity answers EndpointActivitySince from a script, one step
// per call, and records the cursors it was asked from.
type scriptedActivity struct {
	steps []activityStep
	asked []ledger.ActivityCursor
}

type activityStep struct {
	list []ledger.EndpointActivity
	next ledger.ActivityCursor
	err  error
}

func (s *scriptedActivity) EndpointActivitySince(_ context.Context, c ledger.ActivityCursor) ([]ledger.EndpointActivity, ledger.ActivityCursor, error) {
	s.asked = append(s.asked, c)
	step := s.steps[len(s.asked)-1]
	return step.list, step.next, step.err
}

// TestActivityPollerCursor: the poller reads from the zero cursor first,
// then from the cursor of its last successful read (a failed read keeps
// it), and sends the endpoints that moved.
func TestActivityPollerCursor(t *testing.T) {
	act := func(id string, delivered int64) ledger.EndpointActivity {
		return ledger.EndpointActivity{Stats: ledger.EndpointStats{EndpointID: id, Delivered: delivered}}
	}
	src := &scriptedActivity{steps: []activityStep{
		{list: []ledger.EndpointActivity{act("a/x", 1), act("a/y", 1)}, next: ledger.ActivityCursor{At: 10}},
		{err: errors.New("ledger unavailable")},
		{list: []ledger.EndpointActivity{act("a/x", 1), act("a/y", 2)}, next: ledger.ActivityCursor{At: 30}},
		{next: ledger.ActivityCursor{At: 40}},
	}}
	p := newActivityPoller(src, time.Second)
	var sent [][]string
	for range src.steps {
		err := p.poll(t.Context())
		var names []string
		for len(p.out) > 0 {
			ev := <-p.out
			names = append(names, ev.Object.GetNamespace()+"/"+ev.Object.GetName())
		}
		sent = append(sent, names)
		if (err != nil) != (len(sent) == 2) {
			t.Fatalf("poll %d: %v", len(sent), err)
		}
	}
	wantCursors := []ledger.ActivityCursor{{}, {At: 10}, {At: 10}, {At: 30}}
	if !slices.Equal(src.asked, wantCursors) {
		t.Errorf("read from %v, want %v", src.asked, wantCursors)
	}
	if want := [][]string{{"a/x", "a/y"}, nil, {"a/y"}, nil}; !slices.EqualFunc(sent, want, slices.Equal) {
		t.Errorf("sent %v, want %v", sent, want)
	}
}
