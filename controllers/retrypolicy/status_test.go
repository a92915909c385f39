package controllers

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

func dur(s string) *metav1.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: d}
}

func TestRetryPolicyStatus(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	exponential := hookv1.RetryPolicySpec{
		Backoff:        hookv1.Backoff{Strategy: hookv1.BackoffExponential, InitialDelay: dur("10s"), MaxDelay: dur("10m"), JitterPercent: ptr.To[int32](0)},
		Horizon:        hookv1.Horizon{MaxAttempts: ptr.To[int32](5)},
		AttemptTimeout: dur("30s"),
		ReplayWindow:   *dur("24h"),
	}
	standard := hookv1.RetryPolicySpec{
		Backoff: hookv1.Backoff{Strategy: hookv1.BackoffSchedule, JitterPercent: ptr.To[int32](10), Schedule: []metav1.Duration{
			*dur("5s"), *dur("5m"), *dur("30m"), *dur("2h"), *dur("5h"), *dur("10h"), *dur("10h"),
		}},
		Horizon:        hookv1.Horizon{MaxAttempts: ptr.To[int32](8)},
		AttemptTimeout: dur("30s"),
		ReplayWindow:   *dur("72h"),
	}
	tooShort := standard
	tooShort.ReplayWindow = *dur("24h")
	badFactor := exponential
	badFactor.Backoff.Factor = "two"
	fixedByAge := hookv1.RetryPolicySpec{
		Backoff:        hookv1.Backoff{Strategy: hookv1.BackoffFixed, InitialDelay: dur("1s"), JitterPercent: ptr.To[int32](0)},
		Horizon:        hookv1.Horizon{MaxAge: dur("720h")},
		AttemptTimeout: dur("1s"),
		ReplayWindow:   *dur("720h"),
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
			if tt.wantTruncated && len(got.Schedule) != scheduleEntries {
				t.Errorf("schedule has %d entries, want %d", len(got.Schedule), scheduleEntries)
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
			Backoff:      hookv1.Backoff{Strategy: hookv1.BackoffLinear, InitialDelay: dur("1m")},
			Horizon:      hookv1.Horizon{MaxAttempts: ptr.To[int32](3)},
			ReplayWindow: *dur("1h"),
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
		Backoff:        hookv1.Backoff{Strategy: hookv1.BackoffExponential, InitialDelay: dur("2s"), Factor: "1.5", MaxDelay: dur("1m"), JitterPercent: ptr.To[int32](20)},
		Horizon:        hookv1.Horizon{MaxAttempts: ptr.To[int32](7), MaxAge: dur("1h")},
		AttemptTimeout: dur("10s"),
		RetryAfterCap:  dur("5m"),
		ReplayWindow:   *dur("2h"),
	}
	p, err := backoffPolicy(&spec)
	if err != nil {
		t.Fatal(err)
	}
	if p.FactorMilli != 1500 || p.InitialDelay != 2*time.Second || p.MaxDelay != time.Minute || p.JitterPercent != 20 ||
		p.MaxAttempts != 7 || p.MaxAge != time.Hour || p.AttemptTimeout != 10*time.Second || p.RetryAfterCap != 5*time.Minute {
		t.Errorf("backoffPolicy = %+v", p)
	}

	spec.Backoff.Strategy = ""
	spec.Backoff.Factor = ""
	p, err = backoffPolicy(&spec)
	if err != nil {
		t.Fatal(err)
	}
	if p.Strategy != "Exponential" || p.FactorMilli != 2000 {
		t.Errorf("an unset strategy and factor should mean Exponential ×2, got %s ×%d/1000", p.Strategy, p.FactorMilli)
	}
}
