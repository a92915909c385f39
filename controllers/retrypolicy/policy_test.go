package retrypolicy

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/controllers/internal/testutil"
	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func TestDefaultPolicyIsReady(t *testing.T) {
	policy := &hookv1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 1}, Spec: DefaultRetryPolicySpec()}
	status := retryPolicyStatus(policy, 0, time.Now())
	if ready := meta.FindStatusCondition(status.Conditions, hookv1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Fatalf("the built-in default policy is not Ready: %+v", ready)
	}
	if status.Attempts != 12 {
		t.Errorf("default policy attempts = %d, want 12", status.Attempts)
	}

	p := DefaultPolicy()
	want := ledger.Policy{
		Backoff: backoff.Policy{
			Strategy: backoff.Exponential, InitialDelay: 5 * time.Second, FactorMilli: 2000, MaxDelay: time.Hour,
			JitterPercent: 10, MaxAttempts: 12, MaxAge: 24 * time.Hour, AttemptTimeout: 30 * time.Second, RetryAfterCap: time.Hour,
		},
		RetryOn:           []string{"NetworkError", "Timeout", "408", "429", "5xx"},
		ReplayWindow:      72 * time.Hour,
		PayloadRetention:  168 * time.Hour,
		EvidenceRetention: 720 * time.Hour,
		Breaker:           &ledger.DefaultBreakerPolicy,
	}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("DefaultPolicy() (-want +got):\n%s", diff)
	}
}

func TestPolicyConfig(t *testing.T) {
	base := hookv1.RetryPolicySpec{
		Backoff:        hookv1.Backoff{Strategy: hookv1.BackoffFixed, InitialDelay: testutil.Dur("1m"), JitterPercent: ptr.To[int32](0)},
		Horizon:        hookv1.Horizon{MaxAttempts: ptr.To[int32](3)},
		AttemptTimeout: testutil.Dur("10s"),
		ReplayWindow:   *testutil.Dur("2h"),
	}
	fixed := backoff.Policy{Strategy: backoff.Fixed, InitialDelay: time.Minute, MaxAttempts: 3, AttemptTimeout: 10 * time.Second}

	tests := []struct {
		name    string
		mutate  func(*hookv1.RetryPolicySpec)
		want    ledger.Policy
		wantErr string
	}{
		{
			name: "unset retryOn and retention take the CRD defaults",
			want: ledger.Policy{Backoff: fixed, RetryOn: DefaultRetryOn, ReplayWindow: 2 * time.Hour,
				PayloadRetention: 168 * time.Hour, EvidenceRetention: 720 * time.Hour, Breaker: &ledger.DefaultBreakerPolicy},
		},
		{
			name: "retryOn, retention and budget are carried over",
			mutate: func(s *hookv1.RetryPolicySpec) {
				s.RetryOn = []hookv1.RetryClass{"5xx", "429"}
				s.Retention = &hookv1.Retention{SecretGracePeriod: testutil.Dur("1h"), Payloads: testutil.Dur("24h"), Evidence: testutil.Dur("48h")}
				s.RetryBudget = &hookv1.RetryBudget{RatioPercent: 20, MinRetriesPerMinute: ptr.To[int32](3)}
			},
			want: ledger.Policy{Backoff: fixed, RetryOn: []string{"5xx", "429"}, ReplayWindow: 2 * time.Hour,
				SecretGracePeriod: time.Hour, PayloadRetention: 24 * time.Hour, EvidenceRetention: 48 * time.Hour,
				Budget: &ledger.RetryBudget{RatioPercent: 20, MinPerMinute: 3}, Breaker: &ledger.DefaultBreakerPolicy},
		},
		{
			name: "a budget without a floor gets the CRD's 10 per minute",
			mutate: func(s *hookv1.RetryPolicySpec) {
				s.Retention = &hookv1.Retention{}
				s.RetryBudget = &hookv1.RetryBudget{RatioPercent: 50}
			},
			want: ledger.Policy{Backoff: fixed, RetryOn: DefaultRetryOn, ReplayWindow: 2 * time.Hour,
				PayloadRetention: 168 * time.Hour, EvidenceRetention: 720 * time.Hour,
				Budget: &ledger.RetryBudget{RatioPercent: 50, MinPerMinute: 10}, Breaker: &ledger.DefaultBreakerPolicy},
		},
		{
			name: "circuitBreaker is carried over, the CRD's defaults for what it leaves unset",
			mutate: func(s *hookv1.RetryPolicySpec) {
				s.CircuitBreaker = &hookv1.CircuitBreaker{Failures: ptr.To[int32](3), MinDuration: testutil.Dur("0s"), ProbeInterval: testutil.Dur("1s"), GoneProbeInterval: testutil.Dur("1h")}
			},
			want: ledger.Policy{Backoff: fixed, RetryOn: DefaultRetryOn, ReplayWindow: 2 * time.Hour,
				PayloadRetention: 168 * time.Hour, EvidenceRetention: 720 * time.Hour,
				Breaker: &ledger.BreakerPolicy{Failures: 3, MinDuration: 0, ProbeInterval: time.Second, MaxProbeInterval: 10 * time.Minute,
					GoneProbeInterval: time.Hour, Ramp: time.Minute}},
		},
		{
			name:   "a disabled breaker",
			mutate: func(s *hookv1.RetryPolicySpec) { s.CircuitBreaker = &hookv1.CircuitBreaker{Disabled: true} },
			want: ledger.Policy{Backoff: fixed, RetryOn: DefaultRetryOn, ReplayWindow: 2 * time.Hour,
				PayloadRetention: 168 * time.Hour, EvidenceRetention: 720 * time.Hour,
				Breaker: &ledger.BreakerPolicy{Disabled: true, Failures: 10, MinDuration: time.Minute, ProbeInterval: 30 * time.Second,
					MaxProbeInterval: 10 * time.Minute, Ramp: time.Minute}},
		},
		{
			name: "a probeInterval above maxProbeInterval is an error naming the field",
			mutate: func(s *hookv1.RetryPolicySpec) {
				s.CircuitBreaker = &hookv1.CircuitBreaker{ProbeInterval: testutil.Dur("20m")}
			},
			wantErr: "spec.circuitBreaker.maxProbeInterval: must be at least circuitBreaker.probeInterval",
		},
		{
			name:    "a breaker that opens on no failure is an error naming the field",
			mutate:  func(s *hookv1.RetryPolicySpec) { s.CircuitBreaker = &hookv1.CircuitBreaker{Failures: ptr.To[int32](0)} },
			wantErr: "spec.circuitBreaker.failures: must be at least 1",
		},
		{
			name:    "an invalid backoff is an error naming the field",
			mutate:  func(s *hookv1.RetryPolicySpec) { s.Backoff.InitialDelay = nil },
			wantErr: "initialDelay",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := *base.DeepCopy()
			if tt.mutate != nil {
				tt.mutate(&spec)
			}
			got, err := Config(&spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(conditions.Message(err), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("policyConfig (-want +got):\n%s", diff)
			}
		})
	}
}
