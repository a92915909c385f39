package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// TestDecideEndpoint: what the engine gets of an endpoint, for every kind
// of gathered fact: which problem wins, which problems pause what the
// engine has and which leave it, and when the endpoint is registered.
func TestDecideEndpoint(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ep := &hookv1.WebhookEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"},
		Spec:       hookv1.WebhookEndpointSpec{URL: "https://hooks.example.com/orders", EventTypes: []hookv1.EventTypePattern{"*"}},
	}
	undecodable := ep.DeepCopy()
	undecodable.Undecodable = []string{`spec.signingRotationGracePeriod: time: invalid duration "9999999999h"`}
	policy := DefaultPolicy()
	secret, older := mustSecret(t), mustSecret(t)
	good := &signingSource{SecretName: "orders-signing", Current: secret}
	badSecret := &signingSource{SecretName: "orders-signing", Problem: &problem{hookv1.ReasonSigningSecretNotFound, `Secret "orders-signing" not found`}}
	send := &problem{hookv1.ReasonDestinationForbidden, "spec.url resolves to 10.0.0.1, a private address"}
	policyProblem := &problem{hookv1.ReasonRetryPolicyNotFound, `RetryPolicy "fast" not found`}

	current := endpointConfig(ep, policy, []ledger.SigningSecret{{Value: secret}})
	paused := current
	paused.Paused = true
	rotated := endpointConfig(ep, policy, []ledger.SigningSecret{{Value: older}})
	otherPolicy := current
	otherPolicy.Policy.ReplayWindow = time.Minute

	tests := []struct {
		name         string
		ep           *hookv1.WebhookEndpoint
		registered   *ledger.Endpoint
		signing      *signingSource
		send, policy *problem
		wantAction   engineAction
		wantReason   string // "" when the spec is in effect
		wantSecrets  int
		wantRemember bool
	}{
		{name: "new endpoint: registered", ep: ep, signing: good, wantAction: actionRegister, wantSecrets: 1},
		{name: "the engine has its configuration: nothing to do", ep: ep, registered: &current, signing: good, wantAction: actionSkip, wantSecrets: 1},
		{name: "the engine has another policy: registered again", ep: ep, registered: &otherPolicy, signing: good, wantAction: actionRegister, wantSecrets: 1},
		{name: "paused for a problem that is gone: registered again (unpaused)", ep: ep, registered: &paused, signing: good, wantAction: actionRegister, wantSecrets: 1},
		{name: "the secret was rotated: registered with both, the previous one remembered", ep: ep, registered: &rotated, signing: good,
			wantAction: actionRegister, wantSecrets: 2, wantRemember: true},

		{name: "undecodable spec, registered: the engine keeps it", ep: undecodable, registered: &current, signing: good, wantAction: actionSkip, wantReason: hookv1.ReasonInvalidSpec},
		{name: "undecodable spec wins over a send problem: nothing paused on a guess", ep: undecodable, registered: &current, signing: good, send: send,
			wantAction: actionSkip, wantReason: hookv1.ReasonInvalidSpec},
		{name: "send problem, registered: paused", ep: ep, registered: &current, signing: good, send: send, wantAction: actionPause, wantReason: hookv1.ReasonDestinationForbidden},
		{name: "send problem, already paused: nothing to do", ep: ep, registered: &paused, signing: good, send: send, wantAction: actionSkip, wantReason: hookv1.ReasonDestinationForbidden},
		{name: "send problem, not registered: not registered", ep: ep, signing: good, send: send, wantAction: actionSkip, wantReason: hookv1.ReasonDestinationForbidden},
		{name: "send problem wins over a policy problem", ep: ep, registered: &current, signing: good, send: send, policy: policyProblem,
			wantAction: actionPause, wantReason: hookv1.ReasonDestinationForbidden},
		{name: "policy problem, registered: the engine keeps its configuration", ep: ep, registered: &current, signing: good, policy: policyProblem,
			wantAction: actionSkip, wantReason: hookv1.ReasonRetryPolicyNotFound},
		{name: "policy problem wins over a secret problem", ep: ep, signing: badSecret, policy: policyProblem, wantAction: actionSkip, wantReason: hookv1.ReasonRetryPolicyNotFound},
		{name: "secret problem, registered: the engine keeps its configuration", ep: ep, registered: &current, signing: badSecret,
			wantAction: actionSkip, wantReason: hookv1.ReasonSigningSecretNotFound},
		{name: "secret problem, not registered: not registered", ep: ep, signing: badSecret, wantAction: actionSkip, wantReason: hookv1.ReasonSigningSecretNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decideEndpoint(&endpointInputs{
				Endpoint: tt.ep, Registered: tt.registered, Policy: policy, PolicyProblem: tt.policy,
				Signing: tt.signing, SendProblem: tt.send, Grace: time.Hour, Now: now,
			})
			if d.Action != tt.wantAction {
				t.Errorf("action = %s, want %s", d.Action, tt.wantAction)
			}
			switch {
			case tt.wantReason == "" && d.Problem != nil:
				t.Fatalf("problem %+v, want none", d.Problem)
			case tt.wantReason != "" && (d.Problem == nil || d.Problem.Reason != tt.wantReason):
				t.Fatalf("problem %+v, want reason %s", d.Problem, tt.wantReason)
			case tt.wantReason != "":
				return
			}
			if len(d.Desired.Secrets) != tt.wantSecrets || d.Desired.Paused {
				t.Errorf("desired configuration has %d secrets (paused %v), want %d, not paused", len(d.Desired.Secrets), d.Desired.Paused, tt.wantSecrets)
			}
			if (d.Rotation.Remember != nil) != tt.wantRemember {
				t.Errorf("remember = %+v, want %v", d.Rotation.Remember, tt.wantRemember)
			}
			if tt.wantRemember && !d.Rotation.PreviousUntil.Equal(now.Add(time.Hour)) {
				t.Errorf("the previous secret is valid until %s, want the grace period from now", d.Rotation.PreviousUntil)
			}
		})
	}
}
