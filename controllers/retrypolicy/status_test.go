package retrypolicy

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/internal/testutil"
)

func TestRetryPolicyStatus(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	exponential := hookv1.RetryPolicySpec{
		Backoff:        hookv1.Backoff{Strategy: hookv1.BackoffExponential, InitialDelay: testutil.Dur("10s"), MaxDelay: testutil.Dur("10m"), JitterPercent: ptr.To[int32](0)},
		Horizon:        hookv1.Horizon{MaxAttempts: ptr.To[int32](5)},
		AttemptTimeout: testutil.Dur("30s"),
		ReplayWindow:   *testutil.Dur("24h"),
	}
	standard := hookv1.RetryPolicySpec{
		Backoff: hookv1.Backoff{Strategy: hookv1.BackoffSchedule, JitterPercent: ptr.To[int32](10), Schedule: []metav1.Duration{
			*testutil.Dur("5s"), *testutil.Dur("5m"), *testutil.Dur("30m"), *testutil.Dur("2h"), *testutil.Dur("5h"), *testutil.Dur("10h"), *testutil.Dur("10h"),
		}},
		Horizon:        hookv1.Horizon{MaxAttempts: ptr.To[int32](8)},
		AttemptTimeout: testutil.Dur("30s"),
		ReplayWindow:   *testutil.Dur("72h"),
	}
	tooShort := standard
	tooShort.ReplayWindow = *testutil.Dur("24h")
	badFactor := exponential
	badFactor.Backoff.Factor = "two"
	fixedByAge := hookv1.RetryPolicySpec{
		Backoff:        hookv1.Backoff{Strategy: hookv1.BackoffFixed, InitialDelay: testutil.Dur("1s"), JitterPercent: ptr.To[int32](0)},
		Horizon:        hookv1.Horizon{MaxAge: testutil.Dur("720h")},
		AttemptTimeout: testutil.Dur("1s"),
		ReplayWindow:   *testutil.Dur("720h"),
	}

	tests := []struct {
		name          string
		spec          hookv1.RetryPolicySpec
		wantReady     metav1.ConditionStatus
		wantReason    string
		wantMessage   string
		wantSchedule  []string
		wantAttempts  int64
		wantHorizon   string
		wantTruncated bool
	}{
		{
			name: "exponential with the default factor of 2, capped", spec: exponential,
			wantReady: metav1.ConditionTrue, wantReason: hookv1.ReasonReconciled,
			wantMessage:  "up to 5 attempts, exhausted at most 5m after the first; replayable for 1d",
			wantSchedule: []string{"0s", "10s", "30s", "1m10s", "2m30s"}, wantAttempts: 5, wantHorizon: "5m",
		},
		{
			name: "the standard schedule with jitter", spec: standard,
			wantReady: metav1.ConditionTrue, wantReason: hookv1.ReasonReconciled,
			wantSchedule: []string{"0s", "5s", "5m5s", "35m5s", "2h35m", "7h35m", "17h35m", "1d3h"}, wantAttempts: 8, wantHorizon: "1d6h",
		},
		{
			name: "a replay window shorter than the attempt horizon", spec: tooShort,
			wantReady: metav1.ConditionFalse, wantReason: hookv1.ReasonReplayWindowTooShort,
			wantMessage:  "replayWindow 1d is shorter than the latest an automatic retry can start (1d6h after the first attempt): raise spec.replayWindow or shorten spec.horizon",
			wantSchedule: []string{"0s", "5s", "5m5s", "35m5s", "2h35m", "7h35m", "17h35m", "1d3h"}, wantAttempts: 8, wantHorizon: "1d6h",
		},
		{
			name: "an age-bounded fixed policy lists 25 attempts of many", spec: fixedByAge,
			wantReady: metav1.ConditionTrue, wantReason: hookv1.ReasonReconciled,
			wantAttempts: 2_592_001, wantHorizon: "30d", wantTruncated: true,
		},
		{
			name: "a spec admission should have refused names the field", spec: badFactor,
			wantReady: metav1.ConditionFalse, wantReason: hookv1.ReasonInvalidSpec,
			wantMessage: `spec.backoff.factor: "two" is not a decimal number`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy := &hookv1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 3}, Spec: tt.spec}
			got := retryPolicyStatus(policy, 2, now)

			if got.ObservedGeneration != 3 || got.Endpoints != 2 {
				t.Errorf("observedGeneration=%d endpoints=%d, want 3 and 2", got.ObservedGeneration, got.Endpoints)
			}
			ready := meta.FindStatusCondition(got.Conditions, hookv1.ConditionReady)
			if ready == nil {
				t.Fatal("no Ready condition")
			}
			if ready.Status != tt.wantReady || ready.Reason != tt.wantReason {
				t.Errorf("Ready = %s/%s (%q), want %s/%s", ready.Status, ready.Reason, ready.Message, tt.wantReady, tt.wantReason)
			}
			if !strings.Contains(ready.Message, tt.wantMessage) {
				t.Errorf("Ready message %q, want it to contain %q", ready.Message, tt.wantMessage)
			}
			if ready.ObservedGeneration != 3 || !ready.LastTransitionTime.Time.Equal(now) {
				t.Errorf("Ready generation/transition = %d/%s, want 3/%s", ready.ObservedGeneration, ready.LastTransitionTime, now)
			}
			if tt.wantSchedule != nil && strings.Join(got.Schedule, ",") != strings.Join(tt.wantSchedule, ",") {
				t.Errorf("schedule = %v, want %v", got.Schedule, tt.wantSchedule)
			}
			if tt.wantTruncated && len(got.Schedule) != ScheduleEntries {
				t.Errorf("schedule has %d entries, want %d", len(got.Schedule), ScheduleEntries)
			}
			if got.ScheduleTruncated != tt.wantTruncated {
				t.Errorf("scheduleTruncated = %v, want %v", got.ScheduleTruncated, tt.wantTruncated)
			}
			if got.Attempts != tt.wantAttempts || got.Horizon != tt.wantHorizon {
				t.Errorf("attempts/horizon = %d/%q, want %d/%q", got.Attempts, got.Horizon, tt.wantAttempts, tt.wantHorizon)
			}
		})
	}
}

func TestRetryPolicyStatusIsStableAcrossReconciles(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	policy := &hookv1.RetryPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1},
		Spec: hookv1.RetryPolicySpec{
			Backoff:      hookv1.Backoff{Strategy: hookv1.BackoffLinear, InitialDelay: testutil.Dur("1m")},
			Horizon:      hookv1.Horizon{MaxAttempts: ptr.To[int32](3)},
			ReplayWindow: *testutil.Dur("1h"),
		},
	}
	other := metav1.Condition{Type: "Audited", Status: metav1.ConditionTrue, Reason: "ByAnotherWriter", LastTransitionTime: metav1.NewTime(t0)}
	policy.Status.Conditions = []metav1.Condition{other}

	policy.Status = retryPolicyStatus(policy, 0, t0)
	second := retryPolicyStatus(policy, 0, t0.Add(time.Hour))

	ready := meta.FindStatusCondition(second.Conditions, hookv1.ConditionReady)
	if !ready.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("an unchanged Ready condition moved its transition time to %s", ready.LastTransitionTime)
	}
	if meta.FindStatusCondition(second.Conditions, "Audited") == nil {
		t.Error("another writer's condition was dropped")
	}
}

func TestBackoffPolicyConversion(t *testing.T) {
	spec := hookv1.RetryPolicySpec{
		Backoff:        hookv1.Backoff{Strategy: hookv1.BackoffExponential, InitialDelay: testutil.Dur("2s"), Factor: "1.5", MaxDelay: testutil.Dur("1m"), JitterPercent: ptr.To[int32](20)},
		Horizon:        hookv1.Horizon{MaxAttempts: ptr.To[int32](7), MaxAge: testutil.Dur("1h")},
		AttemptTimeout: testutil.Dur("10s"),
		RetryAfterCap:  testutil.Dur("5m"),
		ReplayWindow:   *testutil.Dur("2h"),
	}
	p, err := Backoff(&spec)
	if err != nil {
		t.Fatal(err)
	}
	if p.FactorMilli != 1500 || p.InitialDelay != 2*time.Second || p.MaxDelay != time.Minute || p.JitterPercent != 20 ||
		p.MaxAttempts != 7 || p.MaxAge != time.Hour || p.AttemptTimeout != 10*time.Second || p.RetryAfterCap != 5*time.Minute {
		t.Errorf("backoffPolicy = %+v", p)
	}

	spec.Backoff.Strategy = ""
	spec.Backoff.Factor = ""
	p, err = Backoff(&spec)
	if err != nil {
		t.Fatal(err)
	}
	if p.Strategy != "Exponential" || p.FactorMilli != 2000 {
		t.Errorf("an unset strategy and factor should mean Exponential ×2, got %s ×%d/1000", p.Strategy, p.FactorMilli)
	}
}
