package publish

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Contracts tells the core what a namespace's event types promise (their
// WebhookEventTypes); the wiring supplies it, from the manager's cache, on
// every replica. A nil Contracts checks nothing.
type Contracts interface {
	// Contract is the contract of typ in namespace, nil when there is
	// none; strict reports whether the namespace refuses a type without
	// one. An error that wraps ErrContractsUnknown refuses the publish as
	// Unavailable (retry later); any other is internal (the publish
	// fails, nothing is committed).
	Contract(namespace, typ string) (c *Contract, strict bool, err error)
}

// Contract is one event type's contract, as the core applies it.
type Contract struct {
	// Name is the WebhookEventType's name, for messages.
	Name string
	// Generation is the WebhookEventType's generation, recorded on each
	// event it validated.
	Generation int64
	// NotReady, when set, refuses every publish of the type: why its
	// contract cannot be applied (a schema that does not compile).
	NotReady string
	// Validate checks data against the schema: the path of the first
	// violation ("data.amount") and its rule, or "" when data conforms.
	// nil: no schema.
	Validate func(data []byte) (field, rule string)
	// RequiredSecrets must all be in the publish's secrets.
	RequiredSecrets []string
	Replay          ledger.ReplayClass
	// ValidFor bounds how long after the publish a delivery may be sent;
	// 0: no bound.
	ValidFor time.Duration
	// Policy replaces the endpoints' retry policies for the type's
	// deliveries; nil: theirs.
	Policy *ledger.Policy
}

// ErrContract: the publish breaks its type's contract (*ContractError).
var ErrContract = errors.New("event breaks its type's contract")

// The rules of a contract; stable, the HTTP API answers them as codes.
const (
	RuleSchema          Rule = "SchemaViolation"   // data does not validate against the type's schema
	RuleRequiredSecret  Rule = "MissingSecret"     // a secret the type requires is absent
	RuleUnknownType     Rule = "UnknownEventType"  // a strict namespace has no WebhookEventType for the type
	RuleTypeNotReady    Rule = "EventTypeNotReady" // the type's WebhookEventType cannot be applied
	RuleValidUntilLater Rule = "ValidUntilTooLate" // validUntil lengthens the type's validFor
)

// ContractError refuses a publish for its type's contract (answered 422).
// Message never carries a data or secret value.
type ContractError struct {
	Field   string
	Rule    Rule
	Message string
}

func (e *ContractError) Error() string { return fmt.Sprintf("%s: %s: %s", e.Rule, e.Field, e.Message) }

// Is makes errors.Is(err, ErrContract) hold.
func (e *ContractError) Is(target error) bool { return target == ErrContract }

// applyContract checks b against its type's contract and stamps on p what
// the ledger keeps of it.
func (c *Core) applyContract(ns string, b *canonicalBody, p *ledger.EventInsertParams, now time.Time) error {
	if b.ValidUntil != nil {
		if !b.ValidUntil.After(now) {
			return &ContractError{Field: "validUntil", Rule: RuleValidUntilLater, Message: "validUntil has passed: nothing could be delivered"}
		}
		until := *b.ValidUntil
		p.ValidUntil = &until
	}
	if c.cfg.Contracts == nil {
		return nil
	}
	contract, strict, err := c.cfg.Contracts.Contract(ns, b.Type)
	if errors.Is(err, ErrContractsUnknown) {
		return &UnavailableError{Reason: ContractsUnknown, RetryAfter: c.cfg.RetryAfter, Err: err,
			Message: "the contracts of this namespace's event types are not known yet (the Kubernetes API server has not answered since this server started); nothing was recorded: retry"}
	}
	if err != nil {
		return fmt.Errorf("reading the contract of event type %s: %w", b.Type, err)
	}
	if contract == nil {
		// hookkeeper's own types (kubectl hookkeeper send-test's
		// hookkeeper.test) need no contract to be published.
		if strict && !strings.HasPrefix(b.Type, "hookkeeper.") {
			return &ContractError{Field: "type", Rule: RuleUnknownType, Message: fmt.Sprintf(
				"namespace %s accepts only event types that have a WebhookEventType, and none is for %q", ns, b.Type)}
		}
		return nil
	}
	if contract.NotReady != "" {
		return &ContractError{Field: "type", Rule: RuleTypeNotReady, Message: fmt.Sprintf(
			"WebhookEventType %s of %q is not Ready: %s", contract.Name, b.Type, contract.NotReady)}
	}
	if contract.Validate != nil {
		if field, rule := contract.Validate(b.Data); field != "" {
			return &ContractError{Field: field, Rule: RuleSchema, Message: fmt.Sprintf(
				"%s (the schema of WebhookEventType %s)", rule, contract.Name)}
		}
	}
	for _, name := range contract.RequiredSecrets {
		if !slices.Contains(b.SecretNames, name) {
			return &ContractError{Field: "secrets." + name, Rule: RuleRequiredSecret, Message: fmt.Sprintf(
				"event type %q requires the secret %q (WebhookEventType %s)", b.Type, name, contract.Name)}
		}
	}
	if contract.ValidFor > 0 {
		bound := now.Add(contract.ValidFor)
		switch {
		case p.ValidUntil == nil:
			p.ValidUntil = &bound
		case p.ValidUntil.After(bound):
			return &ContractError{Field: "validUntil", Rule: RuleValidUntilLater, Message: fmt.Sprintf(
				"validUntil may shorten the validFor of event type %q (%s), never lengthen it", b.Type, contract.ValidFor)}
		}
	}
	p.TypeGeneration = contract.Generation
	p.ReplayClass = contract.Replay
	p.PolicyOverride = contract.Policy
	return nil
}
