package publish

import (
	"errors"
	"fmt"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Sentinels of the refusals, for errors.Is; errors.As gives each one's
// details.
var (
	// ErrInvalid: a field of the request breaks a rule (*FieldError).
	ErrInvalid = errors.New("invalid publish request")
	// ErrTooLarge: the request exceeds Config.MaxBytes (*TooLargeError).
	ErrTooLarge = errors.New("publish request too large")
	// ErrFanOut: the type matches more endpoints than Config.MaxFanOut
	// (*FanOutError).
	ErrFanOut = errors.New("event matches more endpoints than allowed")
	// ErrUnknownEndpoint: the request names an endpoint that does not
	// exist in its namespace (*UnknownEndpointError).
	ErrUnknownEndpoint = errors.New("event addressed to an unknown endpoint")
	// ErrIdempotencyConflict: the key was used before with another
	// canonical body.
	ErrIdempotencyConflict = errors.New("the idempotency key was already used in this namespace with a different request; use a new key for a new event")
	// ErrUnavailable: nothing could be committed now; retry, with the same
	// idempotency key (*UnavailableError).
	ErrUnavailable = errors.New("publishing is unavailable")
	// ErrQuotaExceeded: the namespace is over its WebhookQuota
	// (*QuotaExceededError); nothing was recorded.
	ErrQuotaExceeded = errors.New("namespace quota exceeded")
	// ErrContractsUnknown is what a Contracts wraps when it cannot tell a
	// type's contract because it has never known the namespace's event
	// types (a process started while the Kubernetes API server does not
	// answer, with nothing in the ledger yet): the publish is refused as
	// Unavailable (ContractsUnknown), never as an internal error.
	ErrContractsUnknown = errors.New("the event types' contracts are not known yet")
	// ErrStopping is what a Committer wraps when it no longer commits
	// because the process is shutting down (ledger.ErrStopping, so that
	// the engine need not know the publish core).
	ErrStopping = ledger.ErrStopping
)

// Rule is what a refused field broke. Its values are stable: the HTTP API
// answers them as error codes (TooManySecrets as InvalidField).
type Rule string

// The rules of a publish request.
const (
	RuleJSON            Rule = "InvalidJSON"     // not one strict JSON object: syntax, UTF-8, depth, duplicate key, trailing data
	RuleUnknownField    Rule = "UnknownField"    // a field publishing does not know
	RuleInvalid         Rule = "InvalidField"    // a known field with a bad value, or a required one missing
	RuleSecretCollision Rule = "SecretCollision" // a secret named like a top-level key of data
	RuleTooManySecrets  Rule = "TooManySecrets"  // more secrets than Config.MaxSecrets
)

// Field names of a request besides its JSON fields (type, data, secrets,
// reissueOf, endpoint and paths below them).
const (
	FieldNamespace      = "namespace"
	FieldIdempotencyKey = "idempotencyKey"
)

// FieldError refuses a request for one field. Field is its path in the
// request's JSON form ("type", "data.x[0].k", "secrets.token", or
// FieldNamespace, FieldIdempotencyKey; empty for the whole document);
// Message is for humans and never carries a data or secret value.
type FieldError struct {
	Field   string
	Rule    Rule
	Message string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", e.Rule, e.Message)
	}
	return fmt.Sprintf("%s: %s: %s", e.Rule, e.Field, e.Message)
}

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

func invalid(rule Rule, field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Rule: rule, Message: fmt.Sprintf(format, args...)}
}

// TooLargeError refuses a request larger than Limit bytes.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string { return fmt.Sprintf("the request exceeds %d bytes", e.Limit) }

// Is makes errors.Is(err, ErrTooLarge) hold.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// FanOutError refuses an event whose type matches Matches endpoints of
// its namespace, more than Max. Nothing was recorded.
type FanOutError struct {
	Namespace string
	Type      string
	Matches   int
	Max       int
}

func (e *FanOutError) Error() string {
	return fmt.Sprintf("event type %q matches %d WebhookEndpoints in namespace %s, more than the %d one event may go to; nothing was recorded: narrow the endpoints' spec.eventTypes, or ask the operator's admin to raise --max-fan-out",
		e.Type, e.Matches, e.Namespace, e.Max)
}

// Is makes errors.Is(err, ErrFanOut) hold.
func (e *FanOutError) Is(target error) bool { return target == ErrFanOut }

// UnknownEndpointError refuses an event addressed to Endpoint (a name),
// which does not exist in Namespace. Nothing was recorded.
type UnknownEndpointError struct {
	Namespace string
	Endpoint  string
}

func (e *UnknownEndpointError) Error() string {
	return fmt.Sprintf("WebhookEndpoint %q does not exist in namespace %s (or the operator has not registered it yet); nothing was recorded",
		e.Endpoint, e.Namespace)
}

// Is makes errors.Is(err, ErrUnknownEndpoint) hold.
func (e *UnknownEndpointError) Is(target error) bool { return target == ErrUnknownEndpoint }

// Why publishing is unavailable.
type UnavailableReason string

const (
	// Stopping: the process is shutting down; nothing was recorded.
	Stopping UnavailableReason = "Stopping"
	// CommitTimeout: the commit did not finish within
	// Config.CommitTimeout; the event may or may not be recorded.
	CommitTimeout UnavailableReason = "CommitTimeout"
	// Canceled: the caller gave up before the commit finished; the event
	// may or may not be recorded.
	Canceled UnavailableReason = "Canceled"
	// LedgerUnreachable: the ledger could not be reached (ledger.
	// ErrUnavailable); the event may or may not be recorded.
	LedgerUnreachable UnavailableReason = "LedgerUnreachable"
	// ContractsUnknown: the type's contract cannot be known yet (the
	// Contracts said ErrContractsUnknown); nothing was recorded.
	ContractsUnknown UnavailableReason = "ContractsUnknown"
)

// UnavailableError: nothing could be committed now. A caller retries
// after RetryAfter with the same idempotency key, which makes the retry
// safe whether or not the first try was recorded. Err is the cause, for
// logs only.
type UnavailableError struct {
	Reason     UnavailableReason
	RetryAfter time.Duration
	Message    string
	Err        error
}

func (e *UnavailableError) Error() string {
	if e.Err == nil {
		return e.Message
	}
	return e.Message + ": " + e.Err.Error()
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) hold.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// LedgerOutage reports whether the ledger, rather than this process, is
// why: it could not be reached, or did not commit in time.
func (e *UnavailableError) LedgerOutage() bool {
	return e.Reason == LedgerUnreachable || e.Reason == CommitTimeout
}

// QuotaLimit names the hard limit of a WebhookQuota (spec.hard) that
// refused a publish: ledger.QuotaPublishesPerSecond, QuotaEventsPerDay or
// QuotaPayloadBytesRetained.
type QuotaLimit = ledger.QuotaLimit

// QuotaExceededError refuses a publish over its namespace's WebhookQuota:
// Limit is the hard limit (spec.hard.<Limit>) it would exceed, Hard its
// value and Used what was used of it. Nothing was recorded, and the
// publish counts only among the namespace's refusals. A publisher retries
// after RetryAfter (for payload bytes, a hint: they are freed as
// retention prunes payloads); an idempotent retry of an event that was
// accepted is never refused.
type QuotaExceededError struct {
	Namespace  string
	Limit      QuotaLimit
	Hard       int64
	Used       int64
	RetryAfter time.Duration
}

func (e *QuotaExceededError) Error() string {
	what := map[QuotaLimit]string{
		ledger.QuotaPublishesPerSecond:   "publishes per second",
		ledger.QuotaEventsPerDay:         "events per day (UTC)",
		ledger.QuotaPayloadBytesRetained: "payload bytes retained",
	}[e.Limit]
	return fmt.Sprintf("namespace %s is over its WebhookQuota: spec.hard.%s is %d %s, and %d are used; nothing was recorded: retry after %ds, or ask the cluster's admin to raise the quota",
		e.Namespace, e.Limit, e.Hard, what, e.Used, RetryAfterSeconds(e.RetryAfter))
}

// Is makes errors.Is(err, ErrQuotaExceeded) hold.
func (e *QuotaExceededError) Is(target error) bool { return target == ErrQuotaExceeded }

// RetryAfterSeconds is d as a Retry-After in whole seconds, rounded up,
// at least 1.
func RetryAfterSeconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}
