package publish

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

type fakeContracts struct {
	byType map[string]*Contract
	strict bool
	err    error
}

func (f fakeContracts) Contract(_, typ string) (*Contract, bool, error) {
	if f.err != nil {
		return nil, false, f.err
	}
	return f.byType[typ], f.strict, nil
}

// TestContractsUnknown: a contract that cannot be known yet is an
// Unavailable refusal with the core's retry-after, which both doors answer
// 503 with Retry-After; any other error of the Contracts stays internal.
func TestContractsUnknown(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	c := &Core{cfg: Config{RetryAfter: 3 * time.Second,
		Contracts: fakeContracts{err: fmt.Errorf("book of shop: %w", ErrContractsUnknown)}}}
	var p ledger.EventInsertParams
	err := c.applyContract("shop", &canonicalBody{Type: "order.created"}, &p, now)
	ue, ok := errors.AsType[*UnavailableError](err)
	if !ok || ue.Reason != ContractsUnknown || ue.RetryAfter != 3*time.Second || !errors.Is(err, ErrUnavailable) || ue.LedgerOutage() {
		t.Fatalf("err = %#v, want Unavailable (ContractsUnknown) after 3s, not a ledger outage", err)
	}
	c.cfg.Contracts = fakeContracts{err: errors.New("boom")}
	if err := c.applyContract("shop", &canonicalBody{Type: "order.created"}, &p, now); err == nil || errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want an internal error", err)
	}
}

// TestApplyContract: every rule of a type's contract, and what a publish
// that keeps them carries to the ledger.
func TestApplyContract(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	later, tooLate := now.Add(30*time.Minute), now.Add(2*time.Hour)
	past := now.Add(-time.Second)
	policy := &ledger.Policy{ReplayWindow: time.Hour}
	order := &Contract{
		Name: "order-created", Generation: 3, RequiredSecrets: []string{"token"}, Replay: ledger.ReplayReissueOnly,
		ValidFor: time.Hour, Policy: policy,
		Validate: func(data []byte) (string, string) {
			if !strings.Contains(string(data), `"amount"`) {
				return "data.amount", "Required value"
			}
			return "", ""
		},
	}
	contracts := map[string]*Contract{
		"order.created": order,
		"broken":        {Name: "broken", NotReady: "SchemaInvalid: spec.schema.type: must be object"},
	}
	tests := []struct {
		name       string
		strict     bool
		body       canonicalBody
		wantRule   Rule
		wantField  string
		wantUntil  *time.Time
		wantStamps bool
	}{
		{name: "no contract, lenient namespace: as today", body: canonicalBody{Type: "other"}},
		{name: "no contract, strict namespace: refused", strict: true, body: canonicalBody{Type: "other"}, wantRule: RuleUnknownType, wantField: "type"},
		{name: "hookkeeper's own test type in a strict namespace: accepted", strict: true, body: canonicalBody{Type: "hookkeeper.test"}},
		{name: "a contract that cannot be applied: refused", body: canonicalBody{Type: "broken"}, wantRule: RuleTypeNotReady, wantField: "type"},
		{name: "a required secret missing: refused, naming it", body: canonicalBody{Type: "order.created", Data: []byte(`{"amount":1}`)},
			wantRule: RuleRequiredSecret, wantField: "secrets.token"},
		{name: "schema violated: refused with the path", body: canonicalBody{Type: "order.created", Data: []byte(`{}`), SecretNames: []string{"token"}},
			wantRule: RuleSchema, wantField: "data.amount"},
		{name: "kept: stamped, valid for the type's hour", body: canonicalBody{Type: "order.created", Data: []byte(`{"amount":1}`), SecretNames: []string{"token"}},
			wantUntil: ptr(now.Add(time.Hour)), wantStamps: true},
		{name: "validUntil shortens validFor", body: canonicalBody{Type: "order.created", Data: []byte(`{"amount":1}`), SecretNames: []string{"token"}, ValidUntil: &later},
			wantUntil: &later, wantStamps: true},
		{name: "validUntil may not lengthen it", body: canonicalBody{Type: "order.created", Data: []byte(`{"amount":1}`), SecretNames: []string{"token"}, ValidUntil: &tooLate},
			wantRule: RuleValidUntilLater, wantField: "validUntil"},
		{name: "validUntil in the past: refused", body: canonicalBody{Type: "other", ValidUntil: &past}, wantRule: RuleValidUntilLater, wantField: "validUntil"},
		{name: "validUntil without a contract: kept", body: canonicalBody{Type: "other", ValidUntil: &later}, wantUntil: &later},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Core{cfg: Config{Contracts: fakeContracts{byType: contracts, strict: tt.strict}}}
			var p ledger.EventInsertParams
			err := c.applyContract("shop", &tt.body, &p, now)
			if tt.wantRule != "" {
				ce, ok := errors.AsType[*ContractError](err)
				if !ok || ce.Rule != tt.wantRule || ce.Field != tt.wantField || !errors.Is(err, ErrContract) {
					t.Fatalf("err = %v, want %s at %s", err, tt.wantRule, tt.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (p.ValidUntil == nil) != (tt.wantUntil == nil) || (p.ValidUntil != nil && !p.ValidUntil.Equal(*tt.wantUntil)) {
				t.Errorf("ValidUntil = %v, want %v", p.ValidUntil, tt.wantUntil)
			}
			stamped := p.TypeGeneration == 3 && p.ReplayClass == ledger.ReplayReissueOnly && p.PolicyOverride == policy
			if stamped != tt.wantStamps {
				t.Errorf("stamped generation %d, replay %q, policy %v; want stamped %v", p.TypeGeneration, p.ReplayClass, p.PolicyOverride != nil, tt.wantStamps)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
