package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	policy := ledger.Policy{
		Backoff: backoff.Policy{
			Strategy: backoff.Schedule, Schedule: []time.Duration{5 * time.Second, time.Minute},
			MaxAttempts: 3, MaxAge: time.Hour, AttemptTimeout: 10 * time.Second, RetryAfterCap: 10 * time.Minute,
		},
		RetryOn: []string{"NetworkError", "Timeout", "429", "5xx"},
	}
	response := &ledger.Endpoint{ID: "ns/a", Policy: policy, AckMode: ledger.AckResponse}
	callback := &ledger.Endpoint{ID: "ns/b", Policy: policy, AckMode: ledger.AckCallback, AckTimeout: 5 * time.Minute}
	noBreaker := policy
	noBreaker.Breaker = &ledger.BreakerPolicy{Disabled: true}
	unguarded := &ledger.Endpoint{ID: "ns/c", Policy: noBreaker, AckMode: ledger.AckResponse}
	first := &ledger.Delivery{Attempts: 0}
	started := t0.Add(-time.Minute)
	second := &ledger.Delivery{Attempts: 1, FirstAttemptAt: &started}
	third := &ledger.Delivery{Attempts: 2, FirstAttemptAt: &started}
	old := t0.Add(-59*time.Minute - 30*time.Second)
	aged := &ledger.Delivery{Attempts: 1, FirstAttemptAt: &old}

	tests := []struct {
		name        string
		ep          *ledger.Endpoint
		d           *ledger.Delivery
		res         dispatch.Result
		want        ledger.Next
		wantFailure string
	}{
		{name: "2xx completes a Response-mode delivery", ep: response, d: first, res: dispatch.Result{StatusCode: 204},
			want: ledger.Next{State: ledger.StateDelivered}},
		{name: "2xx only accepts a Callback-mode delivery", ep: callback, d: first, res: dispatch.Result{StatusCode: 202},
			want: ledger.Next{State: ledger.StateAwaitingAck, AckDeadline: t0.Add(5 * time.Minute)}},
		{name: "503 is retried after the first scheduled delay", ep: response, d: first, res: dispatch.Result{StatusCode: 503},
			want: ledger.Next{State: ledger.StateScheduled, DueAt: t0.Add(5 * time.Second)}, wantFailure: "HTTP 503"},
		{name: "the second retry uses the second delay", ep: response, d: second, res: dispatch.Result{StatusCode: 500},
			want: ledger.Next{State: ledger.StateScheduled, DueAt: t0.Add(time.Minute)}, wantFailure: "HTTP 500"},
		{name: "Retry-After lengthens the delay", ep: response, d: first, res: dispatch.Result{StatusCode: 429, RetryAfter: 2 * time.Minute},
			want: ledger.Next{State: ledger.StateScheduled, DueAt: t0.Add(2 * time.Minute)}, wantFailure: "HTTP 429"},
		{name: "a network error is retried", ep: response, d: first, res: dispatch.Result{Err: errors.New("connection refused"), Class: dispatch.NetworkError},
			want: ledger.Next{State: ledger.StateScheduled, DueAt: t0.Add(5 * time.Second)}, wantFailure: "connection refused"},
		{name: "the last allowed attempt exhausts with MaxAttempts", ep: response, d: third, res: dispatch.Result{StatusCode: 502},
			want: ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustMaxAttempts}, wantFailure: "HTTP 502"},
		{name: "a retry past maxAge exhausts with MaxAge", ep: response, d: aged, res: dispatch.Result{StatusCode: 503},
			want: ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustMaxAge}, wantFailure: "HTTP 503"},
		{name: "410 waits behind the breaker, due at once for its probe", ep: response, d: third, res: dispatch.Result{StatusCode: 410},
			want: ledger.Next{State: ledger.StateScheduled, DueAt: t0}, wantFailure: "HTTP 410"},
		{name: "410 without a breaker exhausts with Gone at once", ep: unguarded, d: first, res: dispatch.Result{StatusCode: 410},
			want: ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustGone}, wantFailure: "HTTP 410"},
		{name: "a status the policy does not retry exhausts with NonRetryable", ep: response, d: first, res: dispatch.Result{StatusCode: 400},
			want: ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable}, wantFailure: "HTTP 400"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decide(tt.ep, &tt.ep.Policy, tt.d, &tt.res, t0, t0, nil)
			if got.next != tt.want {
				t.Errorf("next = %+v, want %+v", got.next, tt.want)
			}
			if got.failure != tt.wantFailure {
				t.Errorf("failure = %q, want %q", got.failure, tt.wantFailure)
			}
		})
	}
}

func TestDecideAckTimeout(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ep := &ledger.Endpoint{Policy: ledger.Policy{Backoff: backoff.Policy{
		Strategy: backoff.Fixed, InitialDelay: time.Minute, MaxAttempts: 3, MaxAge: time.Hour,
	}}}
	first := t0.Add(-10 * time.Minute)
	old := t0.Add(-59*time.Minute - 30*time.Second)
	tests := []struct {
		name string
		d    ledger.Delivery
		want ledger.Next
	}{
		{"the accepted first attempt counts as failed and is retried", ledger.Delivery{Attempts: 1, FirstAttemptAt: &first},
			ledger.Next{State: ledger.StateScheduled, DueAt: t0.Add(time.Minute)}},
		{"the last allowed attempt exhausts with AckTimeout", ledger.Delivery{Attempts: 3, FirstAttemptAt: &first},
			ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustAckTimeout}},
		{"past the age horizon exhausts with AckTimeout", ledger.Delivery{Attempts: 1, FirstAttemptAt: &old},
			ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustAckTimeout}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decideAckTimeout(&ep.Policy, &tt.d, t0, nil); got != tt.want {
				t.Errorf("decideAckTimeout = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// decide follows the policy in force: a type's policy replaces the
// endpoint's retried classes and schedule; the endpoint's breaker stays.
func TestDecideUsesThePolicyInForce(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ep := &ledger.Endpoint{ID: "ns/a", AckMode: ledger.AckResponse, Policy: ledger.Policy{
		Backoff: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: time.Minute, MaxAttempts: 5},
		RetryOn: []string{"5xx"},
		Breaker: &ledger.BreakerPolicy{Disabled: true},
	}}
	typed := ledger.Event{PolicyOverride: &ledger.Policy{
		Backoff: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: 5 * time.Second, MaxAttempts: 2},
		RetryOn: []string{"429"},
	}}
	pol := typed.PolicyFor(&ep.Policy)
	first := &ledger.Delivery{}
	started := t0.Add(-time.Second)
	second := &ledger.Delivery{Attempts: 1, FirstAttemptAt: &started}
	for _, tc := range []struct {
		name string
		pol  *ledger.Policy
		d    *ledger.Delivery
		res  dispatch.Result
		want ledger.Next
	}{
		{"the endpoint's schedule", &ep.Policy, first, dispatch.Result{StatusCode: 503}, ledger.Next{State: ledger.StateScheduled, DueAt: t0.Add(time.Minute)}},
		{"the type's schedule", pol, first, dispatch.Result{StatusCode: 429}, ledger.Next{State: ledger.StateScheduled, DueAt: t0.Add(5 * time.Second)}},
		{"the endpoint retries 5xx, the type does not", pol, first, dispatch.Result{StatusCode: 503}, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable}},
		{"the type's horizon", pol, second, dispatch.Result{StatusCode: 429}, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustMaxAttempts}},
		{"the endpoint's breaker (disabled: 410 exhausts)", pol, first, dispatch.Result{StatusCode: 410}, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustGone}},
	} {
		if got := decide(ep, tc.pol, tc.d, &tc.res, t0, t0, nil).next; got != tc.want {
			t.Errorf("%s: next = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if got := decideAckTimeout(pol, &ledger.Delivery{Attempts: 2, FirstAttemptAt: &started}, t0, nil); got != (ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustAckTimeout}) {
		t.Errorf("an acknowledgement timeout past the type's horizon: %+v", got)
	}
}

func TestReplayUntil(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	earlier := t0.Add(-3 * time.Hour)
	pol := func(window, timeout time.Duration) *ledger.Policy {
		return &ledger.Policy{ReplayWindow: window, Backoff: backoff.Policy{AttemptTimeout: timeout}}
	}
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	for _, tc := range []struct {
		name       string
		pol        *ledger.Policy
		validUntil *time.Time
		first      *time.Time
		want       time.Time // zero: no header
	}{
		{"a first attempt: its start + the window + the timeout", pol(72*time.Hour, 10*time.Second), nil, nil, t0.Add(72*time.Hour + 10*time.Second)},
		{"a retry: from the delivery's first attempt", pol(72*time.Hour, 10*time.Second), nil, &earlier, earlier.Add(72*time.Hour + 10*time.Second)},
		{"no timeout set: the default's 30s", pol(time.Hour, 0), nil, nil, t0.Add(time.Hour + 30*time.Second)},
		{"ValidUntil before the window's end bounds it", pol(72*time.Hour, 10*time.Second), at(time.Hour), nil, t0.Add(time.Hour + 10*time.Second)},
		{"ValidUntil after the window's end does not", pol(time.Hour, 10*time.Second), at(2 * time.Hour), nil, t0.Add(time.Hour + 10*time.Second)},
		{"no window: ValidUntil alone", pol(0, 10*time.Second), at(time.Hour), nil, t0.Add(time.Hour + 10*time.Second)},
		{"no window and no bound: no header", pol(0, 10*time.Second), nil, nil, time.Time{}},
		{"a fraction of a second rounds up", pol(0, 10*time.Second), at(time.Hour + time.Millisecond), nil, t0.Add(time.Hour + 11*time.Second)},
	} {
		ev := &ledger.Event{ValidUntil: tc.validUntil}
		got, ok := replayUntil(tc.pol, ev, &ledger.Delivery{FirstAttemptAt: tc.first}, t0)
		if ok != !tc.want.IsZero() || !got.Equal(tc.want) || (ok && got.Location() != time.UTC) {
			t.Errorf("%s: replayUntil = %v, %t; want %v", tc.name, got, ok, tc.want)
		}
	}
	// The header's form: RFC 3339, UTC, whole seconds, never earlier.
	if got := dispatch.FormatReplayUntil(time.Date(2026, 11, 29, 13, 0, 0, 1, time.FixedZone("CET", 3600))); got != "2026-11-29T12:00:01Z" {
		t.Errorf("FormatReplayUntil = %q", got)
	}
}
