package ledger

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

func TestPlanReplay(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	first := now.Add(-time.Hour)
	facts := func(edits ...func(f *ReplayFacts)) *ReplayFacts {
		f := &ReplayFacts{
			Event:      Event{ID: "evt_1", Namespace: "shop", Type: "order.created", Data: []byte(`{}`)},
			EndpointID: "shop/billing",
			Policy:     Policy{ReplayWindow: time.Hour},
			ReplayFrom: first,
		}
		for _, e := range edits {
			e(f)
		}
		return f
	}
	scrubbed := func(f *ReplayFacts) { f.Event.SecretNames = []string{"token"} }
	withSecrets := func(f *ReplayFacts) {
		f.Event.SecretNames, f.Event.Secrets = []string{"token"}, sensitive.Bytes("{}")
	}
	pruned := func(f *ReplayFacts) { f.Event.Data = nil }
	late := func(f *ReplayFacts) { f.ReplayFrom = first.Add(-time.Nanosecond) }
	pending := func(f *ReplayFacts) { f.Pending = true }
	unresolved := func(f *ReplayFacts) { f.Unresolved = &Delivery{ID: "dlv_x"} }
	class := func(c ReplayClass) func(*ReplayFacts) { return func(f *ReplayFacts) { f.Event.ReplayClass = c } }
	expired := func(f *ReplayFacts) { f.Event.ValidUntil = &now }
	longWindow := func(f *ReplayFacts) { f.Event.PolicyOverride = &Policy{ReplayWindow: 2 * time.Hour} }
	for _, tc := range []struct {
		name     string
		fallback ReplayFallback
		edits    []func(*ReplayFacts)
		step     RecoveryStep
		reason   string
	}{
		{"replay", ReplayRefuse, nil, StepReplay, ""},
		{"replay with secrets present", ReplayRefuse, []func(*ReplayFacts){withSecrets}, StepReplay, ""},
		{"replay at the window's end", ReplayRefuse, nil, StepReplay, ""},
		{"replay of an event whose delivery there was exhausted", ReplayRefuse, []func(*ReplayFacts){unresolved}, StepReplay, ""},
		{"replay without a window", ReplayRefuse, []func(*ReplayFacts){late, func(f *ReplayFacts) { f.Policy.ReplayWindow = 0 }}, StepReplay, ""},
		{"already on its way", ReplayRefuse, []func(*ReplayFacts){pending}, StepSkip, SkippedAlreadyPending},
		{"on its way outranks every refusal", ReplayReissue, []func(*ReplayFacts){pending, scrubbed, late, pruned}, StepSkip, SkippedAlreadyPending},
		{"scrubbed secrets refused", ReplayRefuse, []func(*ReplayFacts){scrubbed}, StepRefuse, RefusedReissueRequired},
		{"past the window refused", ReplayRefuse, []func(*ReplayFacts){late}, StepRefuse, RefusedReplayWindowExceeded},
		{"pruned payload refused", ReplayRefuse, []func(*ReplayFacts){pruned}, StepRefuse, RefusedPayloadExpired},
		{"scrubbed outranks the window and pruning", ReplayRefuse, []func(*ReplayFacts){scrubbed, late, pruned}, StepRefuse, RefusedReissueRequired},
		{"the window outranks pruning", ReplayRefuse, []func(*ReplayFacts){late, pruned}, StepRefuse, RefusedReplayWindowExceeded},
		{"scrubbed secrets reissued: asked of the producer", ReplayReissue, []func(*ReplayFacts){scrubbed}, StepReissueRequest, ""},
		{"pruned payload reissued: asked of the producer", ReplayReissue, []func(*ReplayFacts){pruned}, StepReissueRequest, ""},
		{"past the window reissued: a copy", ReplayReissue, []func(*ReplayFacts){late}, StepReissueCopy, ""},
		{"reissue mode replays what it can", ReplayReissue, []func(*ReplayFacts){withSecrets}, StepReplay, ""},
		{"Never refused", ReplayRefuse, []func(*ReplayFacts){class(ReplayNever)}, StepRefuse, RefusedNotReplayable},
		{"Never not reissued either", ReplayReissue, []func(*ReplayFacts){class(ReplayNever)}, StepRefuse, RefusedNotReplayable},
		{"ReissueOnly refused", ReplayRefuse, []func(*ReplayFacts){class(ReplayReissueOnly), withSecrets}, StepRefuse, RefusedReissueRequired},
		{"ReissueOnly reissued", ReplayReissue, []func(*ReplayFacts){class(ReplayReissueOnly), withSecrets}, StepReissueRequest, ""},
		{"expired refused", ReplayRefuse, []func(*ReplayFacts){expired}, StepRefuse, RefusedExpired},
		{"expired reissued: asked of the producer", ReplayReissue, []func(*ReplayFacts){expired}, StepReissueRequest, ""},
		{"the type's window", ReplayRefuse, []func(*ReplayFacts){late, longWindow}, StepReplay, ""},
	} {
		step, reason, err := PlanReplay(tc.fallback, facts(tc.edits...), now)
		if err != nil || step != tc.step || reason != tc.reason {
			t.Errorf("%s: PlanReplay = %v, %q, %v; want %v, %q", tc.name, step, reason, err, tc.step, tc.reason)
		}
	}
	for _, tc := range []struct {
		name     string
		fallback ReplayFallback
		edit     func(*ReplayFacts)
		is       error
	}{
		{"deleted endpoint", ReplayRefuse, func(f *ReplayFacts) { f.EndpointDeleted = true }, ErrEndpointDeleted},
		{"another namespace", ReplayRefuse, func(f *ReplayFacts) { f.EndpointID = "other/billing" }, ErrReplayNamespace},
		{"a namespace that only shares a prefix", ReplayRefuse, func(f *ReplayFacts) { f.EndpointID = "shopping/billing" }, ErrReplayNamespace},
		{"the engine's own event", ReplayRefuse, func(f *ReplayFacts) { f.Event.Type = DeadLetterEventType }, nil},
		{"unknown fallback", "Auto", nil, nil},
	} {
		f := facts()
		if tc.edit != nil {
			tc.edit(f)
		}
		_, _, err := PlanReplay(tc.fallback, f, now)
		if err == nil || tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: PlanReplay error %v, want %v", tc.name, err, tc.is)
		}
	}
	for step, want := range map[RecoveryStep][2]string{
		StepReplay: {string(OutcomeReplayed), string(ResolutionRetried)},
		StepSkip:   {string(OutcomeSkipped), ""},
	} {
		if got := [2]string{string(step.Outcome()), string(step.Resolution())}; got != want {
			t.Errorf("step %d: outcome, resolution = %v, want %v", step, got, want)
		}
	}
}

func TestReplaySelects(t *testing.T) {
	for _, tc := range []struct {
		patterns []string
		typ      string
		want     bool
	}{
		{[]string{"order.*"}, "order.created", true},
		{[]string{"order.*"}, "invoice.paid", false},
		{[]string{"order.created", "invoice.*"}, "invoice.paid", true},
		{[]string{"*"}, "order.created", true},
		{[]string{"*"}, DeadLetterEventType, false},
		{[]string{"*"}, ReissueRequestedEventType, false},
		{[]string{"hookkeeper.*"}, "hookkeeper.test", false},
		{nil, "order.created", false},
	} {
		if got := ReplaySelects(tc.patterns, tc.typ); got != tc.want {
			t.Errorf("ReplaySelects(%v, %s) = %v, want %v", tc.patterns, tc.typ, got, tc.want)
		}
	}
}

func TestReplayTarget(t *testing.T) {
	d := func(id string, s DeliveryState, r Resolution) Delivery {
		return Delivery{ID: id, State: s, Resolution: r}
	}
	for _, tc := range []struct {
		name       string
		ds         []Delivery
		pending    bool
		unresolved string
	}{
		{"none", nil, false, ""},
		{"delivered", []Delivery{d("dlv_1", StateDelivered, "")}, false, ""},
		{"cancelled", []Delivery{d("dlv_1", StateCancelled, "")}, false, ""},
		{"scheduled", []Delivery{d("dlv_1", StateScheduled, "")}, true, ""},
		{"in flight", []Delivery{d("dlv_1", StateInFlight, "")}, true, ""},
		{"awaiting an ack", []Delivery{d("dlv_1", StateAwaitingAck, "")}, true, ""},
		{"exhausted and resolved", []Delivery{d("dlv_1", StateExhausted, ResolutionRetried), d("dlv_2", StateDelivered, "")}, false, ""},
		{"the latest unresolved", []Delivery{d("dlv_3", StateExhausted, ResolutionUnresolved), d("dlv_1", StateExhausted, ResolutionUnresolved), d("dlv_2", StateExhausted, ResolutionDismissed)}, false, "dlv_3"},
		{"unresolved and a retry on its way", []Delivery{d("dlv_1", StateExhausted, ResolutionUnresolved), d("dlv_2", StateScheduled, "")}, true, "dlv_1"},
	} {
		pending, unresolved := ReplayTarget(tc.ds)
		got := ""
		if unresolved != nil {
			got = unresolved.ID
		}
		if pending != tc.pending || got != tc.unresolved {
			t.Errorf("%s: ReplayTarget = %v, %q; want %v, %q", tc.name, pending, got, tc.pending, tc.unresolved)
		}
	}
}

func TestIDFloorAndItemKeys(t *testing.T) {
	at := time.Date(2030, 1, 1, 12, 0, 0, 500_000_000, time.UTC)
	floor := IDFloor("evt", at)
	if len(floor) != len(NewID("evt", at)) || !strings.HasPrefix(floor, "evt_") {
		t.Fatalf("IDFloor = %q, not shaped like an ID", floor)
	}
	for i := 0; i < 100; i++ {
		if id := NewID("evt", at); id < floor {
			t.Fatalf("NewID at %v = %s sorts before IDFloor %s", at, id, floor)
		}
		if id := NewID("evt", at.Add(-time.Millisecond)); id >= floor {
			t.Fatalf("NewID a millisecond earlier = %s does not sort before IDFloor %s", id, floor)
		}
	}
	if IDFloor("evt", at.Add(time.Millisecond)) <= floor || IDFloor("evt", time.Unix(-5, 0)) != IDFloor("evt", time.Unix(0, 0)) {
		t.Error("IDFloor does not follow time, or does not clamp before 1970")
	}
	if got := ItemDeliveryID(RecoveryReplay, ReplayItemKey("evt_1")); got != "" {
		t.Errorf("a replay item's DeliveryID = %q, want none", got)
	}
	if got := ItemDeliveryID(RecoveryRetry, "dlv_1"); got != "dlv_1" {
		t.Errorf("a recovery item's DeliveryID = %q, want its key", got)
	}
}
