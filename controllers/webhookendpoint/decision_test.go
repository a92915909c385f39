package webhookendpoint

import (
	"errors"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/controllers/internal/testutil"
	"github.com/hookkeeper/hookkeeper/controllers/retrypolicy"
	"github.com/hookkeeper/hookkeeper/controllers/signingsecret"
	"github.com/hookkeeper/hookkeeper/internal/credential"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// TestDecideEndpoint: what the engine gets of an endpoint, for every kind
// of gathered fact: which problem wins, which problems pause what the
// engine has and which leave it, and when the endpoint is registered.
func TestDecideEndpoint(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ep := &hookv1.WebhookEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"},
		Spec: hookv1.WebhookEndpointSpec{URL: "https://hooks.example.com/orders", EventTypes: []hookv1.EventTypePattern{"*"},
			SigningRotationGracePeriod: &metav1.Duration{Duration: time.Hour}},
	}
	undecodable := ep.DeepCopy()
	undecodable.Undecodable = []string{`spec.signingRotationGracePeriod: time: invalid duration "9999999999h"`}
	policy := retrypolicy.DefaultPolicy()
	secret, older := testutil.MustSecret(t), testutil.MustSecret(t)
	good := &signingsecret.Source{SecretName: "orders-signing", Current: secret}
	rememberedRotation := &signingsecret.Source{SecretName: "orders-signing", Current: secret, Remembered: &signingsecret.Previous{Value: older, RotatedAt: now}}
	owed := &signingsecret.Source{SecretName: "orders-signing", Owed: true}
	badSecret := &signingsecret.Source{SecretName: "orders-signing", Problem: &conditions.Problem{Reason: hookv1.ReasonSigningSecretNotFound, Message: `Secret "orders-signing" not found`}}
	send := &conditions.Problem{Reason: hookv1.ReasonDestinationForbidden, Message: "spec.url resolves to 10.0.0.1, a private address"}
	policyProblem := &conditions.Problem{Reason: hookv1.ReasonRetryPolicyNotFound, Message: `RetryPolicy "fast" not found`}

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
		signing      *signingsecret.Source
		send, policy *conditions.Problem
		terminating  bool
		err          error
		wantAction   engineAction
		wantReason   string // "" when the spec is in effect
		wantWaiting  bool
		wantInternal bool
		wantSecrets  int
	}{
		{name: "new endpoint: registered", ep: ep, signing: good, wantAction: actionRegister, wantSecrets: 1},
		{name: "the engine has its configuration: nothing to do", ep: ep, registered: &current, signing: good, wantAction: actionSkip, wantSecrets: 1},
		{name: "the engine has another policy: registered again", ep: ep, registered: &otherPolicy, signing: good, wantAction: actionRegister, wantSecrets: 1},
		{name: "paused for a problem that is gone: registered again (unpaused)", ep: ep, registered: &paused, signing: good, wantAction: actionRegister, wantSecrets: 1},
		{name: "the secret was rotated: waits until the signing-secret controller remembers the previous one", ep: ep, registered: &rotated, signing: good,
			wantAction: actionSkip, wantWaiting: true},
		{name: "the rotation is remembered: registered with both", ep: ep, registered: &rotated, signing: rememberedRotation,
			wantAction: actionRegister, wantSecrets: 2},
		{name: "the generated secret is owed: waits for it", ep: ep, registered: &current, signing: owed, wantAction: actionSkip, wantWaiting: true},
		{name: "owed in a namespace being deleted: says so", ep: ep, registered: &current, signing: owed, terminating: true,
			wantAction: actionSkip, wantReason: hookv1.ReasonNamespaceTerminating},
		{name: "a read failed: internal error, the engine keeps its configuration", ep: ep, registered: &current, signing: good,
			err: &stepError{"reading the RetryPolicy", errors.New("connection refused")}, wantAction: actionSkip, wantReason: hookv1.ReasonInternalError, wantInternal: true},
		{name: "a read failed wins over a send problem: nothing paused on a guess", ep: ep, registered: &current, signing: good, send: send,
			err: &stepError{"reading the RetryPolicy", errors.New("connection refused")}, wantAction: actionSkip, wantReason: hookv1.ReasonInternalError, wantInternal: true},

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
			d := decideEndpoint(&endpointObservation{
				Endpoint: tt.ep, Registered: tt.registered, Policy: policy, PolicyProblem: tt.policy,
				Signing: *tt.signing, SendProblem: tt.send, NamespaceTerminating: tt.terminating, Err: tt.err, Now: now,
			})
			if d.Action != tt.wantAction || d.Waiting != tt.wantWaiting || d.Internal != tt.wantInternal {
				t.Errorf("action = %s, waiting %v, internal %v; want %s, %v, %v", d.Action, d.Waiting, d.Internal, tt.wantAction, tt.wantWaiting, tt.wantInternal)
			}
			switch {
			case tt.wantReason == "" && d.Problem != nil:
				t.Fatalf("problem %+v, want none", d.Problem)
			case tt.wantReason != "" && (d.Problem == nil || d.Problem.Reason != tt.wantReason):
				t.Fatalf("problem %+v, want reason %s", d.Problem, tt.wantReason)
			case tt.wantReason != "" || tt.wantWaiting:
				return
			}
			if len(d.Desired.Secrets) != tt.wantSecrets || d.Desired.Paused {
				t.Errorf("desired configuration has %d secrets (paused %v), want %d, not paused", len(d.Desired.Secrets), d.Desired.Paused, tt.wantSecrets)
			}
			if d.Rotation.Remember != nil {
				t.Errorf("remember = %+v: the endpoint controller never registers an unremembered rotation", d.Rotation.Remember)
			}
			if tt.wantSecrets == 2 && !d.Rotation.PreviousUntil.Equal(now.Add(time.Hour)) {
				t.Errorf("the previous secret is valid until %s, want the grace period from its rotation", d.Rotation.PreviousUntil)
			}
		})
	}
}

// TestDecideEndpointCredentialsAndFilter: credentials that cannot be read
// register the endpoint paused and without them (its deliveries wait), a
// filter that does not compile registers it matching nothing, and both
// come after the problems that leave the engine's configuration alone.
func TestDecideEndpointCredentialsAndFilter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ep := &hookv1.WebhookEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"},
		Spec: hookv1.WebhookEndpointSpec{URL: "https://hooks.example.com/orders", EventTypes: []hookv1.EventTypePattern{"*"},
			Filter: "data.amount > 1000"},
	}
	policy := retrypolicy.DefaultPolicy()
	good := signingsecret.Source{SecretName: "orders-signing", Current: testutil.MustSecret(t)}
	set := &credential.Set{Bearer: sensitive.Bytes("token-1")}
	missing := &conditions.Problem{Reason: hookv1.ReasonCredentialsUnavailable, Message: `spec.auth.bearer.tokenSecretRef: Secret "token" not found`}
	badFilter := &conditions.Problem{Reason: hookv1.ReasonFilterInvalid, Message: "spec.filter: 1:6: undeclared reference to 'amout'"}
	policyProblem := &conditions.Problem{Reason: hookv1.ReasonRetryPolicyNotFound, Message: `RetryPolicy "fast" not found`}
	current := endpointConfig(ep, policy, []ledger.SigningSecret{{Value: good.Current}})
	current.Credentials = set
	held := current
	held.Paused, held.Credentials = true, nil
	rotated := current
	rotated.Credentials = &credential.Set{Bearer: sensitive.Bytes("token-0")}

	tests := []struct {
		name       string
		registered *ledger.Endpoint
		creds      credentialSource
		filter     *conditions.Problem
		policy     *conditions.Problem
		wantAction engineAction
		wantReason string
		wantPaused bool
		wantCreds  *credential.Set
		wantFilter string
		wantHeld   bool
	}{
		{name: "credentials read: registered with them and the filter", creds: credentialSource{Set: set},
			wantAction: actionRegister, wantCreds: set, wantFilter: "data.amount > 1000"},
		{name: "the engine has them: nothing to do", registered: &current, creds: credentialSource{Set: set},
			wantAction: actionSkip, wantCreds: set, wantFilter: "data.amount > 1000"},
		{name: "a rotated Secret: registered again with the new value", registered: &rotated, creds: credentialSource{Set: set},
			wantAction: actionRegister, wantCreds: set, wantFilter: "data.amount > 1000"},
		{name: "a missing Secret, new endpoint: registered paused without credentials, so deliveries wait",
			creds: credentialSource{Problem: missing}, wantAction: actionRegister, wantReason: hookv1.ReasonCredentialsUnavailable,
			wantPaused: true, wantFilter: "data.amount > 1000", wantHeld: true},
		{name: "a Secret deleted under a registered endpoint: paused, its credentials dropped", registered: &current,
			creds: credentialSource{Problem: missing}, wantAction: actionRegister, wantReason: hookv1.ReasonCredentialsUnavailable,
			wantPaused: true, wantFilter: "data.amount > 1000", wantHeld: true},
		{name: "still missing: nothing to do", registered: &held, creds: credentialSource{Problem: missing},
			wantAction: actionSkip, wantReason: hookv1.ReasonCredentialsUnavailable, wantPaused: true, wantFilter: "data.amount > 1000", wantHeld: true},
		{name: "a filter that does not compile: registered matching nothing", creds: credentialSource{Set: set}, filter: badFilter,
			wantAction: actionRegister, wantReason: hookv1.ReasonFilterInvalid, wantCreds: set, wantFilter: matchNothing, wantHeld: true},
		{name: "missing credentials win over a bad filter", creds: credentialSource{Problem: missing}, filter: badFilter,
			wantAction: actionRegister, wantReason: hookv1.ReasonCredentialsUnavailable, wantPaused: true, wantFilter: "data.amount > 1000", wantHeld: true},
		{name: "a policy problem wins: the engine keeps what it has", registered: &current, creds: credentialSource{Problem: missing}, policy: policyProblem,
			wantAction: actionSkip, wantReason: hookv1.ReasonRetryPolicyNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decideEndpoint(&endpointObservation{
				Endpoint: ep, Registered: tt.registered, Policy: policy, PolicyProblem: tt.policy,
				Signing: good, Credentials: tt.creds, FilterProblem: tt.filter, Now: now,
			})
			if d.Action != tt.wantAction || d.Held != tt.wantHeld {
				t.Fatalf("action = %s, held %v; want %s, %v", d.Action, d.Held, tt.wantAction, tt.wantHeld)
			}
			if got := ""; d.Problem != nil {
				got = d.Problem.Reason
				if got != tt.wantReason {
					t.Fatalf("reason %s, want %q", got, tt.wantReason)
				}
			} else if tt.wantReason != "" {
				t.Fatalf("no problem, want reason %s", tt.wantReason)
			}
			if tt.wantReason != "" && !tt.wantHeld {
				return
			}
			if d.Desired.Paused != tt.wantPaused || d.Desired.Filter != tt.wantFilter || !reflect.DeepEqual(d.Desired.Credentials, tt.wantCreds) {
				t.Errorf("desired: paused %v, filter %q, credentials %v; want %v, %q, %v",
					d.Desired.Paused, d.Desired.Filter, d.Desired.Credentials != nil, tt.wantPaused, tt.wantFilter, tt.wantCreds != nil)
			}
		})
	}
}
