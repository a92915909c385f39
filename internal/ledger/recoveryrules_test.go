package ledger

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

func TestBudgetMinuteAndAllowance(t *testing.T) {
	for _, tc := range []struct {
		at   time.Time
		want int64
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(59, 999999999), 0},
		{time.Unix(60, 0), 1},
		{time.Unix(-1, 0), -1}, // floor, not truncation
		{time.Unix(-60, 0), -1},
		{time.Unix(-61, 0), -2},
	} {
		if got := BudgetMinute(tc.at); got != tc.want {
			t.Errorf("BudgetMinute(%v) = %d, want %d", tc.at.UTC(), got, tc.want)
		}
	}
	for _, tc := range []struct {
		b     RetryBudget
		first int64
		want  int64
	}{
		{RetryBudget{RatioPercent: 50, MinPerMinute: 2}, 5, 4}, // 2.5 rounds down
		{RetryBudget{RatioPercent: 10, MinPerMinute: 0}, 9, 0},
		{RetryBudget{RatioPercent: 10, MinPerMinute: 0}, 10, 1},
		{RetryBudget{RatioPercent: 0, MinPerMinute: 3}, 1000, 3},
		{RetryBudget{RatioPercent: 200, MinPerMinute: 1}, 3, 7},
	} {
		if got := tc.b.Allowance(tc.first); got != tc.want {
			t.Errorf("%+v.Allowance(%d) = %d, want %d", tc.b, tc.first, got, tc.want)
		}
	}
	for limit, want := range map[int]int{-1: 100, 0: 100, 1: 1, 10000: 10000, 10001: 10000} {
		if got := ExhaustedLimit(limit); got != want {
			t.Errorf("ExhaustedLimit(%d) = %d, want %d", limit, got, want)
		}
	}
}

// TestResendsSpendTheBudget: which attempts take from the retry budget and
// which count as first attempts, so that a re-send draws on the allowance
// without raising it.
func TestResendsSpendTheBudget(t *testing.T) {
	now := time.Unix(600, 0)
	for _, tc := range []struct {
		name          string
		d             Delivery // as the claim found it, before its attempt
		spends, first bool
	}{
		{"a fresh delivery's first attempt", Delivery{}, false, true},
		{"a fresh delivery's retry", Delivery{Attempts: 1}, true, false},
		{"a re-send's first attempt", Delivery{Resend: true, RetryOf: "dlv_1"}, true, false},
		{"a re-send's retry", Delivery{Resend: true, Attempts: 2}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.d.SpendsRetryBudget(); got != tc.spends {
				t.Errorf("SpendsRetryBudget() = %t, want %t", got, tc.spends)
			}
			recorded := tc.d
			recorded.EndpointID, recorded.Attempts = "ns/ep", recorded.Attempts+1
			fa := FirstAttempts{}
			fa.Note(&AttemptRecordParams{Now: now}, AttemptRecordResult{Delivery: recorded})
			want := []BudgetBucket{}
			if tc.first {
				want = append(want, BudgetBucket{EndpointID: "ns/ep", Minute: 10, Count: 1})
			}
			if got := fa.Buckets(); !slices.Equal(got, want) {
				t.Errorf("first attempts %v, want %v", got, want)
			}
		})
	}
	// A delivery that an event reissuing another creates is a re-send; one
	// of an ordinary event is not.
	for reissueOf, want := range map[string]bool{"": false, "evt_1": true} {
		p := EventInsertParams{ReissueOf: reissueOf, Now: now}
		if got := p.NewDelivery("dlv_2", "evt_2", "ns/ep", false).Resend; got != want {
			t.Errorf("NewDelivery of an event with ReissueOf %q: Resend %t, want %t", reissueOf, got, want)
		}
	}
}

func TestPlanRecovery(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	first := now.Add(-time.Hour)
	facts := func(edit func(f *RecoveryFacts)) *RecoveryFacts {
		f := &RecoveryFacts{
			Delivery:   Delivery{ID: "dlv_1", State: StateExhausted, Resolution: ResolutionUnresolved},
			Event:      Event{ID: "evt_1", Data: []byte(`{}`)},
			Policy:     Policy{ReplayWindow: time.Hour},
			ReplayFrom: first,
		}
		if edit != nil {
			edit(f)
		}
		return f
	}
	scrubbed := func(f *RecoveryFacts) { f.Event.SecretNames = []string{"token"} }
	withSecrets := func(f *RecoveryFacts) {
		f.Event.SecretNames, f.Event.Secrets = []string{"token"}, sensitive.Bytes("{}")
	}
	pruned := func(f *RecoveryFacts) { f.Event.Data = nil }
	late := func(f *RecoveryFacts) { f.ReplayFrom = first.Add(-time.Nanosecond) }
	class := func(c ReplayClass) func(*RecoveryFacts) { return func(f *RecoveryFacts) { f.Event.ReplayClass = c } }
	expired := func(f *RecoveryFacts) { f.Event.ValidUntil = &now }
	valid := func(f *RecoveryFacts) { t := now.Add(time.Nanosecond); f.Event.ValidUntil = &t }
	longWindow := func(f *RecoveryFacts) { f.Event.PolicyOverride = &Policy{ReplayWindow: 2 * time.Hour} }
	shortWindow := func(f *RecoveryFacts) { f.Event.PolicyOverride = &Policy{ReplayWindow: time.Minute} }
	all := func(edits ...func(*RecoveryFacts)) func(*RecoveryFacts) {
		return func(f *RecoveryFacts) {
			for _, e := range edits {
				e(f)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		action RecoveryAction
		edit   func(*RecoveryFacts)
		step   RecoveryStep
		reason string
	}{
		{"retry", RecoveryRetry, nil, StepRetry, ""},
		{"retry with secrets present", RecoveryRetry, withSecrets, StepRetry, ""},
		{"retry at the window's end", RecoveryRetry, nil, StepRetry, ""},
		{"retry past the window", RecoveryRetry, late, StepRefuse, RefusedReplayWindowExceeded},
		{"retry without a window", RecoveryRetry, all(late, func(f *RecoveryFacts) { f.Policy.ReplayWindow = 0 }), StepRetry, ""},
		{"retry of scrubbed secrets", RecoveryRetry, scrubbed, StepRefuse, RefusedReissueRequired},
		{"retry of a pruned payload", RecoveryRetry, pruned, StepRefuse, RefusedPayloadExpired},
		{"scrubbed outranks the window and pruning", RecoveryRetry, all(scrubbed, late, pruned), StepRefuse, RefusedReissueRequired},
		{"the window outranks pruning", RecoveryRetry, all(late, pruned), StepRefuse, RefusedReplayWindowExceeded},
		{"reissue copies", RecoveryReissue, nil, StepReissueCopy, ""},
		{"reissue of secrets asks", RecoveryReissue, withSecrets, StepReissueRequest, ""},
		{"reissue of scrubbed secrets asks", RecoveryReissue, scrubbed, StepReissueRequest, ""},
		{"reissue of a pruned payload asks", RecoveryReissue, pruned, StepReissueRequest, ""},
		{"reissue past the window", RecoveryReissue, late, StepReissueCopy, ""},
		{"dismiss", RecoveryDismiss, all(scrubbed, late, pruned), StepDismiss, ""},
		{"resolved", RecoveryRetry, func(f *RecoveryFacts) { f.Delivery.Resolution = ResolutionDismissed }, StepRefuse, RefusedAlreadyResolved},
		{"not exhausted", RecoveryDismiss, func(f *RecoveryFacts) { f.Delivery.State, f.Delivery.Resolution = StateDelivered, "" }, StepRefuse, RefusedAlreadyResolved},
		{"dismiss of a deleted endpoint's delivery", RecoveryDismiss, func(f *RecoveryFacts) { f.EndpointDeleted = true }, StepDismiss, ""},
		// The type's contract (docs/adr/0038).
		{"retry of a Retryable type", RecoveryRetry, class(ReplayRetryable), StepRetry, ""},
		{"retry of a ReissueOnly type with its secrets", RecoveryRetry, all(class(ReplayReissueOnly), withSecrets), StepRefuse, RefusedReissueRequired},
		{"reissue of a ReissueOnly type copies", RecoveryReissue, class(ReplayReissueOnly), StepReissueCopy, ""},
		{"retry of a Never type", RecoveryRetry, class(ReplayNever), StepRefuse, RefusedNotReplayable},
		{"Never outranks scrubbed secrets", RecoveryRetry, all(class(ReplayNever), scrubbed, late), StepRefuse, RefusedNotReplayable},
		{"reissue of a Never type", RecoveryReissue, class(ReplayNever), StepRefuse, RefusedNotReplayable},
		{"dismiss of a Never type", RecoveryDismiss, class(ReplayNever), StepDismiss, ""},
		{"retry at ValidUntil", RecoveryRetry, expired, StepRefuse, RefusedExpired},
		{"retry before ValidUntil", RecoveryRetry, valid, StepRetry, ""},
		{"reissue at ValidUntil asks for a fresh event", RecoveryReissue, expired, StepReissueRequest, ""},
		{"the type's longer window", RecoveryRetry, all(late, longWindow), StepRetry, ""},
		{"the type's shorter window", RecoveryRetry, shortWindow, StepRefuse, RefusedReplayWindowExceeded},
	} {
		step, reason, err := PlanRecovery(tc.action, facts(tc.edit), now)
		if err != nil || step != tc.step || reason != tc.reason {
			t.Errorf("%s: PlanRecovery = %v, %q, %v; want %v, %q", tc.name, step, reason, err, tc.step, tc.reason)
		}
	}
	if _, _, err := PlanRecovery(RecoveryRetry, facts(func(f *RecoveryFacts) { f.EndpointDeleted = true }), now); !errors.Is(err, ErrEndpointDeleted) || !errors.Is(err, ErrNotFound) {
		t.Errorf("retry to a deleted endpoint: %v", err)
	}
	if _, _, err := PlanRecovery("Resend", facts(nil), now); err == nil {
		t.Error("PlanRecovery accepted an unknown action")
	}
	for step, want := range map[RecoveryStep][2]string{
		StepRefuse: {string(OutcomeRefused), ""}, StepRetry: {string(OutcomeRetried), string(ResolutionRetried)},
		StepReissueCopy: {string(OutcomeReissued), string(ResolutionReissued)}, StepReissueRequest: {string(OutcomeAwaitingReissue), ""},
		StepDismiss: {string(OutcomeDismissed), string(ResolutionDismissed)},
	} {
		if got := [2]string{string(step.Outcome()), string(step.Resolution())}; got != want {
			t.Errorf("step %d: outcome, resolution = %v, want %v", step, got, want)
		}
	}
}
