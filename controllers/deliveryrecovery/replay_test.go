package deliveryrecovery

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// TestReplaySpecHash: a replay's window, types and fallback are its
// identity; the order of its types is not.
func TestReplaySpecHash(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	base := func() hookv1.DeliveryRecoverySpec {
		return hookv1.DeliveryRecoverySpec{
			EndpointRef: hookv1.LocalObjectReference{Name: "billing"}, Action: hookv1.RecoveryModeReplay, Limit: ptr.To[int32](100),
			TTLSecondsAfterFinished: ptr.To[int32](60),
			Replay: &hookv1.ReplaySpec{Since: since, EventTypes: []hookv1.EventTypePattern{"order.*", "invoice.paid"},
				OnUnreplayable: hookv1.ReplayFallbackRefuse},
		}
	}
	hash := func(mutate func(s *hookv1.DeliveryRecoverySpec)) string {
		s := base()
		mutate(&s)
		h, err := recoverySpecHash(&s)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	want := hash(func(*hookv1.DeliveryRecoverySpec) {})
	same := map[string]func(s *hookv1.DeliveryRecoverySpec){
		"eventTypes": func(s *hookv1.DeliveryRecoverySpec) {
			s.Replay.EventTypes = []hookv1.EventTypePattern{"invoice.paid", "order.*"}
		},
		"ttlSecondsAfterFinished": func(s *hookv1.DeliveryRecoverySpec) { s.TTLSecondsAfterFinished = nil },
	}
	differ := map[string]func(s *hookv1.DeliveryRecoverySpec){
		"since":          func(s *hookv1.DeliveryRecoverySpec) { s.Replay.Since = metav1.NewTime(since.Add(time.Second)) },
		"until":          func(s *hookv1.DeliveryRecoverySpec) { s.Replay.Until = ptr.To(metav1.NewTime(since.Add(time.Hour))) },
		"eventTypes":     func(s *hookv1.DeliveryRecoverySpec) { s.Replay.EventTypes = []hookv1.EventTypePattern{"order.*"} },
		"onUnreplayable": func(s *hookv1.DeliveryRecoverySpec) { s.Replay.OnUnreplayable = hookv1.ReplayFallbackReissue },
	}
	for name, m := range same {
		if hash(m) != want {
			t.Errorf("changing %s changed the identity of the replay", name)
		}
	}
	for name, m := range differ {
		if hash(m) == want {
			t.Errorf("changing %s kept the identity of the replay", name)
		}
	}
	for f := range reflect.TypeFor[hookv1.ReplaySpec]().Fields() {
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if differ[name] == nil {
			t.Errorf("replay field %s is not covered: decide whether it is part of the operation's identity", name)
		}
	}
}

// TestReplaySelection: the window ends at the operation's start at the
// latest, so that a replay applied again never selects newer events.
func TestReplaySelection(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	since := metav1.NewTime(start.Add(-3 * time.Hour))
	rec := func(until *time.Time, limit *int32, fb hookv1.ReplayFallback) *hookv1.DeliveryRecovery {
		r := &hookv1.DeliveryRecovery{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "r"}, Spec: hookv1.DeliveryRecoverySpec{
			Action: hookv1.RecoveryModeReplay, Limit: limit,
			Replay: &hookv1.ReplaySpec{Since: since, EventTypes: []hookv1.EventTypePattern{"order.*"}, OnUnreplayable: fb},
		}}
		if until != nil {
			r.Spec.Replay.Until = ptr.To(metav1.NewTime(*until))
		}
		return r
	}
	for _, tc := range []struct {
		name      string
		rec       *hookv1.DeliveryRecovery
		wantUntil time.Time
		wantLimit int
		wantFB    ledger.ReplayFallback
	}{
		{"no until: the start", rec(nil, nil, hookv1.ReplayFallbackRefuse), start, 100, ledger.ReplayRefuse},
		{"an earlier until", rec(ptr.To(start.Add(-time.Hour)), ptr.To[int32](7), hookv1.ReplayFallbackReissue), start.Add(-time.Hour), 7, ledger.ReplayReissue},
		{"a later until: the start", rec(ptr.To(start.Add(time.Hour)), nil, ""), start, 100, ledger.ReplayRefuse},
	} {
		p, fb := replaySelection(tc.rec, start)
		if p.Namespace != "shop" || !p.Since.Equal(since.Time) || !p.Until.Equal(tc.wantUntil) || p.Limit != tc.wantLimit ||
			len(p.EventTypes) != 1 || p.EventTypes[0] != "order.*" || fb != tc.wantFB {
			t.Errorf("%s: replaySelection = %+v, %s", tc.name, p, fb)
		}
	}
	if p, _ := replaySelection(&hookv1.DeliveryRecovery{}, start); p != nil {
		t.Errorf("a recovery without a replay block selected %+v", p)
	}
}

// TestReplayStatus: a replay's items count as replayed and skipped, a
// replayed item follows its delivery, and the messages speak of events.
func TestReplayStatus(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rec := &hookv1.DeliveryRecovery{ObjectMeta: metav1.ObjectMeta{Generation: 1, UID: "u"},
		Spec: hookv1.DeliveryRecoverySpec{Action: hookv1.RecoveryModeReplay}}
	op := &ledger.RecoveryOperation{ObjectUID: "u", StartedAt: now}
	item := func(outcome ledger.RecoveryOutcome, reason string, state ledger.DeliveryState) ledger.RecoveryItem {
		it := ledger.RecoveryItem{EventID: "evt_" + string(outcome) + string(state), Action: ledger.RecoveryReplay, Outcome: outcome, Reason: reason, NewDeliveryState: state}
		if state != "" {
			it.NewDeliveryID = "dlv_new"
		}
		return it
	}
	running := []ledger.RecoveryItem{
		item(ledger.OutcomeReplayed, "", ledger.StateScheduled),
		item(ledger.OutcomeReplayed, "", ledger.StateDelivered),
		item(ledger.OutcomeSkipped, ledger.SkippedAlreadyPending, ""),
		item(ledger.OutcomeRefused, ledger.RefusedReissueRequired, ""),
	}
	st := recoveryStatus(rec, &recoveryProgress{Operation: op, Items: running}, now)
	wantCounts := hookv1.RecoveryCounts{Matched: 4, Replayed: 2, Skipped: 1, Refused: 1, Delivered: 1}
	if st.State != hookv1.RecoveryRunning || st.Counts != wantCounts {
		t.Errorf("running replay: state %s, counts %+v; want Running, %+v", st.State, st.Counts, wantCounts)
	}
	var outcomes []hookv1.ItemOutcome
	for _, it := range st.Items {
		outcomes = append(outcomes, it.Outcome)
		if it.DeliveryID != "" || it.Action != hookv1.RecoveryReplay {
			t.Errorf("replay item %+v", it)
		}
	}
	if want := []hookv1.ItemOutcome{hookv1.ItemReplayed, hookv1.ItemDelivered, hookv1.ItemSkipped, hookv1.ItemRefused}; !reflect.DeepEqual(outcomes, want) {
		t.Errorf("item outcomes %v, want %v", outcomes, want)
	}
	if st.Items[2].Reason != hookv1.SkippedAlreadyPending || st.Items[2].Message == "" {
		t.Errorf("skipped item %+v", st.Items[2])
	}
	rr := meta.FindStatusCondition(st.Conditions, hookv1.ConditionReissueRequired)
	if rr == nil || rr.Status != metav1.ConditionTrue || !strings.Contains(rr.Message, "onUnreplayable: Reissue") {
		t.Errorf("ReissueRequired of a replay: %+v", rr)
	}

	running[0].NewDeliveryState = ledger.StateExhausted
	st = recoveryStatus(rec, &recoveryProgress{Operation: op, Items: running}, now)
	c := meta.FindStatusCondition(st.Conditions, hookv1.ConditionComplete)
	if st.State != hookv1.RecoveryComplete || c == nil || c.Reason != hookv1.ReasonAllItemsSettled ||
		!strings.Contains(c.Message, "1 skipped") || st.Counts.FailedAgain != 1 {
		t.Errorf("settled replay: %s, %+v, %+v", st.State, c, st.Counts)
	}
	st = recoveryStatus(rec, &recoveryProgress{Operation: op}, now)
	if c := meta.FindStatusCondition(st.Conditions, hookv1.ConditionComplete); c == nil || c.Reason != hookv1.ReasonNothingMatched ||
		!strings.Contains(c.Message, "no event") {
		t.Errorf("empty replay: %+v", c)
	}
}
