package webhookendpoint

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/internal/testutil"
	"github.com/hookkeeper/hookkeeper/controllers/retrypolicy"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

func TestEndpointConfig(t *testing.T) {
	policy := retrypolicy.DefaultPolicy()
	secrets := []ledger.SigningSecret{{Value: sensitive.Bytes("whsec_current")}}
	objMeta := metav1.ObjectMeta{Namespace: "shop", Name: "orders"}
	minimal := hookv1.WebhookEndpointSpec{URL: "https://example.com/hook", EventTypes: []hookv1.EventTypePattern{"order.*", "refund.created"}}

	tests := []struct {
		name   string
		mutate func(*hookv1.WebhookEndpointSpec)
		want   ledger.Endpoint
	}{
		{
			name: "a minimal spec gets Response mode and 10 in flight",
			want: ledger.Endpoint{ID: "shop/orders", Namespace: "shop", Name: "orders", URL: "https://example.com/hook",
				EventTypes: []string{"order.*", "refund.created"}, Secrets: secrets, Policy: policy,
				AckMode: ledger.AckResponse, MaxInFlight: 10},
		},
		{
			name: "Callback without a timeout waits 15m; the rest is carried over",
			mutate: func(s *hookv1.WebhookEndpointSpec) {
				s.Acknowledgement = &hookv1.Acknowledgement{Mode: hookv1.AcknowledgementCallback}
				s.Paused = true
				s.DeadLetterRef = &hookv1.LocalObjectReference{Name: "dlq"}
				s.RateLimit = &hookv1.RateLimit{PerSecond: 5}
				s.MaxInFlight = ptr.To[int32](3)
				s.Headers = []hookv1.Header{{Name: "X-Tenant", Value: "acme"}}
				s.Owner = "team-payments"
			},
			want: ledger.Endpoint{ID: "shop/orders", Namespace: "shop", Name: "orders", URL: "https://example.com/hook",
				EventTypes: []string{"order.*", "refund.created"}, Secrets: secrets, Policy: policy,
				AckMode: ledger.AckCallback, AckTimeout: 15 * time.Minute, Paused: true, DeadLetter: "shop/dlq", Owner: "team-payments",
				RateLimit: ledger.RateLimit{PerSecond: 5}, MaxInFlight: 3,
				Headers: []wire.Header{{Name: "X-Tenant", Value: "acme"}}},
		},
		{
			name: "Callback with a timeout, a burst, Response mode's timeout ignored",
			mutate: func(s *hookv1.WebhookEndpointSpec) {
				s.Acknowledgement = &hookv1.Acknowledgement{Mode: hookv1.AcknowledgementCallback, Timeout: testutil.Dur("2m")}
				s.RateLimit = &hookv1.RateLimit{PerSecond: 5, Burst: ptr.To[int32](20)}
			},
			want: ledger.Endpoint{ID: "shop/orders", Namespace: "shop", Name: "orders", URL: "https://example.com/hook",
				EventTypes: []string{"order.*", "refund.created"}, Secrets: secrets, Policy: policy,
				AckMode: ledger.AckCallback, AckTimeout: 2 * time.Minute, RateLimit: ledger.RateLimit{PerSecond: 5, Burst: 20}, MaxInFlight: 10},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := &hookv1.WebhookEndpoint{ObjectMeta: objMeta, Spec: *minimal.DeepCopy()}
			if tt.mutate != nil {
				tt.mutate(&ep.Spec)
			}
			got := endpointConfig(ep, policy, secrets)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("endpointConfig (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSameConfigSurvivesTheLedger registers configurations in a real SQLite
// ledger and compares what comes back: an unchanged endpoint must compare
// equal after the round trip, or every periodic reconcile would register it
// again.
func TestSameConfigSurvivesTheLedger(t *testing.T) {
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })

	notAfter := time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.Local)
	schedule := retrypolicy.DefaultRetryPolicySpec()
	schedule.Backoff = hookv1.Backoff{Strategy: hookv1.BackoffSchedule, Schedule: []metav1.Duration{*testutil.Dur("5s"), *testutil.Dur("1m")}}
	schedulePolicy, err := retrypolicy.Config(&schedule)
	if err != nil {
		t.Fatal(err)
	}
	budget := retrypolicy.DefaultPolicy()
	budget.Budget = &ledger.RetryBudget{RatioPercent: 10, MinPerMinute: 1}

	configs := map[string]ledger.Endpoint{
		"minimal": endpointConfig(&hookv1.WebhookEndpoint{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "minimal"},
			Spec:       hookv1.WebhookEndpointSpec{URL: "http://127.0.0.1/x", EventTypes: []hookv1.EventTypePattern{"*"}},
		}, retrypolicy.DefaultPolicy(), []ledger.SigningSecret{{Value: sensitive.Bytes("whsec_a")}}),
		"everything": endpointConfig(&hookv1.WebhookEndpoint{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "everything"},
			Spec: hookv1.WebhookEndpointSpec{
				URL: "https://example.com/x", EventTypes: []hookv1.EventTypePattern{"a.*", "b"},
				Acknowledgement: &hookv1.Acknowledgement{Mode: hookv1.AcknowledgementCallback},
				Paused:          true, DeadLetterRef: &hookv1.LocalObjectReference{Name: "dlq"}, Owner: "payments@example.com",
				RateLimit: &hookv1.RateLimit{PerSecond: 3}, Headers: []hookv1.Header{{Name: "A", Value: "b"}},
			},
		}, schedulePolicy, []ledger.SigningSecret{{Value: sensitive.Bytes("whsec_new")}, {Value: sensitive.Bytes("whsec_old"), NotAfter: notAfter}}),
		"budget": endpointConfig(&hookv1.WebhookEndpoint{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "budget"},
			Spec:       hookv1.WebhookEndpointSpec{URL: "http://127.0.0.1/x", EventTypes: []hookv1.EventTypePattern{"*"}, Headers: []hookv1.Header{}},
		}, budget, []ledger.SigningSecret{{Value: sensitive.Bytes("whsec_a")}}),
	}
	for name, desired := range configs {
		t.Run(name, func(t *testing.T) {
			if _, err := store.EndpointUpsert(context.Background(), &ledger.EndpointUpsertParams{Endpoint: desired, Now: time.Now()}); err != nil {
				t.Fatal(err)
			}
			stored, err := store.EndpointGet(context.Background(), desired.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !sameConfig(desired, stored) {
				t.Errorf("the stored configuration differs from the registered one:\n%s", cmp.Diff(comparableConfig(desired), comparableConfig(stored)))
			}
		})
	}
}

func TestSameConfigNoticesChanges(t *testing.T) {
	base := endpointConfig(&hookv1.WebhookEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ep"},
		Spec:       hookv1.WebhookEndpointSpec{URL: "http://127.0.0.1/x", EventTypes: []hookv1.EventTypePattern{"*"}},
	}, retrypolicy.DefaultPolicy(), []ledger.SigningSecret{{Value: sensitive.Bytes("whsec_a")}})
	changes := map[string]func(*ledger.Endpoint){
		"url":          func(e *ledger.Endpoint) { e.URL += "y" },
		"event types":  func(e *ledger.Endpoint) { e.EventTypes = []string{"a"} },
		"paused":       func(e *ledger.Endpoint) { e.Paused = true },
		"secret value": func(e *ledger.Endpoint) { e.Secrets = []ledger.SigningSecret{{Value: sensitive.Bytes("whsec_b")}} },
		"second secret": func(e *ledger.Endpoint) {
			e.Secrets = append(e.Secrets, ledger.SigningSecret{Value: []byte("whsec_c"), NotAfter: time.Now()})
		},
		"policy":        func(e *ledger.Endpoint) { e.Policy.Backoff.MaxAttempts++ },
		"replay window": func(e *ledger.Endpoint) { e.Policy.ReplayWindow++ },
		"headers":       func(e *ledger.Endpoint) { e.Headers = []wire.Header{{Name: "A", Value: "b"}} },
		"dead letter":   func(e *ledger.Endpoint) { e.DeadLetter = "ns/dlq" },
		"owner":         func(e *ledger.Endpoint) { e.Owner = "team-payments" },
	}
	for name, change := range changes {
		changed := base
		changed.Secrets = append([]ledger.SigningSecret(nil), base.Secrets...)
		changed.Policy.RetryOn = append([]string(nil), base.Policy.RetryOn...)
		change(&changed)
		if sameConfig(base, changed) {
			t.Errorf("a change of %s went unnoticed", name)
		}
	}
	stamped := base
	stamped.Version, stamped.UpdatedAt = 7, time.Now()
	if !sameConfig(base, stamped) {
		t.Error("the ledger's version and timestamp count as a change")
	}
}
