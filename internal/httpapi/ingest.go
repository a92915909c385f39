package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/groupcommit"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// CodeUnknownEndpoint answers a publish addressed (field endpoint) to a
// WebhookEndpoint that does not exist in the namespace: 422.
const CodeUnknownEndpoint Code = "UnknownEndpoint"

// IngestConfig is what publishing needs, whichever API a publish arrives
// through. Zero values take the defaults of Config.
type IngestConfig struct {
	Publisher      Publisher
	Now            func() time.Time
	MaxBodyBytes   int64
	MaxSecrets     int
	MaxFanOut      int
	PublishTimeout time.Duration
	SecretsHashKey []byte
}

// Ingest is the one publish path: validation of the body, the idempotency
// hash, the commit through the Publisher and the meaning of its outcome.
// The HTTP API's POST /v1/namespaces/{ns}/events and the aggregated API's
// create of a webhookevent both take it, so that the two cannot differ in
// what they accept, how a key replays, or what they refuse.
type Ingest struct {
	cfg IngestConfig
}

// NewIngest fills cfg's defaults; Publisher is required.
func NewIngest(cfg IngestConfig) (*Ingest, error) {
	if cfg.Publisher == nil {
		return nil, errors.New("httpapi: Publisher is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxSecrets <= 0 {
		cfg.MaxSecrets = DefaultMaxSecrets
	}
	if cfg.MaxFanOut <= 0 {
		cfg.MaxFanOut = DefaultMaxFanOut
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = DefaultPublishTimeout
	}
	return &Ingest{cfg: cfg}, nil
}

// Publish validates body (a publish request's JSON, see parsePublishBody)
// and commits it to namespace ns with idempotency key key (empty: none).
// The result is the new event, or with Duplicate set the original one of
// a replayed key. A refusal is an error that Refusal describes.
func (in *Ingest) Publish(ctx context.Context, ns, key string, body []byte) (ledger.EventInsertResult, error) {
	if !validNamespace(ns) {
		return ledger.EventInsertResult{}, badRequest(CodeInvalidField, "namespace",
			"namespace must be a DNS-1123 label: at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit")
	}
	if key != "" && !validIdempotencyKey(key) {
		return ledger.EventInsertResult{}, badRequest(CodeInvalidField, IdempotencyKeyHeader,
			"Idempotency-Key must be 1 to %d printable ASCII characters", MaxIdempotencyKeyLength)
	}
	if int64(len(body)) > in.cfg.MaxBodyBytes {
		return ledger.EventInsertResult{}, bodyTooLarge(in.cfg.MaxBodyBytes)
	}
	b, aerr := parsePublishBody(body, in.cfg.MaxSecrets, in.cfg.SecretsHashKey)
	if aerr != nil {
		return ledger.EventInsertResult{}, aerr
	}
	now := in.cfg.Now()
	params := &ledger.EventInsertParams{
		ID:             ledger.NewID("evt", now),
		Namespace:      ns,
		Type:           b.Type,
		Data:           b.Data,
		Secrets:        b.Secrets,
		SecretNames:    b.SecretNames,
		ReissueOf:      b.ReissueOf,
		IdempotencyKey: key,
		BodyHash:       b.Hash,
		MaxFanOut:      in.cfg.MaxFanOut,
		Endpoint:       targetEndpoint(ns, b.Endpoint),
		Now:            now,
	}
	ctx, cancel := context.WithTimeout(ctx, in.cfg.PublishTimeout)
	defer cancel()
	res, err := in.cfg.Publisher.Publish(ctx, params)
	if err != nil {
		return res, commitError(params.ID, err)
	}
	if res.Err != nil {
		return res, outcomeError(params, res.Err)
	}
	return res, nil
}

// targetEndpoint is the ledger ID of the endpoint an addressed publish
// names; empty when it names none.
func targetEndpoint(ns, name string) string {
	if name == "" {
		return ""
	}
	return ns + "/" + name
}

// commitError explains a commit that failed as a whole.
func commitError(id string, err error) *apiError {
	switch {
	case errors.Is(err, groupcommit.ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable, cause: err, retryAfter: "1",
			message: "the server is shutting down and did not record the event; retry"}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable, cause: err,
			message: "the commit did not finish in time; the event may or may not be recorded: retry with the same Idempotency-Key (send one to make retries safe)"}
	}
	return internalError(fmt.Errorf("publishing event %s: %w", id, err))
}

// outcomeError explains an event the ledger refused.
func outcomeError(p *ledger.EventInsertParams, err error) *apiError {
	if errors.Is(err, ledger.ErrIdempotencyConflict) {
		return newError(http.StatusConflict, CodeIdempotencyConflict, IdempotencyKeyHeader,
			"this Idempotency-Key was already used with a different body; use a new key for a new event")
	}
	if foe, ok := errors.AsType[*ledger.FanOutError](err); ok {
		return newError(http.StatusUnprocessableEntity, CodeFanOutLimit, "type",
			"event type %q matches %d WebhookEndpoints in namespace %s, more than the %d one event may go to; nothing was recorded: narrow the endpoints' spec.eventTypes, or ask the operator's admin to raise --max-fan-out",
			foe.Type, foe.Matches, foe.Namespace, foe.Max)
	}
	if te, ok := errors.AsType[*ledger.TargetError](err); ok {
		return newError(http.StatusUnprocessableEntity, CodeUnknownEndpoint, "endpoint",
			"WebhookEndpoint %q does not exist in namespace %s (or the operator has not registered it yet); nothing was recorded",
			endpointName(te.Namespace, te.Endpoint), te.Namespace)
	}
	return internalError(fmt.Errorf("publishing event %s: %w", p.ID, err))
}

// Refusal describes an error of Ingest.Publish for an API that answers in
// its own terms: the HTTP status this API would answer, the stable code,
// the field at fault (a body field, "namespace", or IdempotencyKeyHeader
// for the key; empty when none), a message for humans (never a secret or
// a data value), and Retry-After in seconds when known. Errors that
// are not refusals are internal (500) and their message says nothing.
func Refusal(err error) (status int, code Code, field, message, retryAfter string) {
	ae := asAPIError(err)
	return ae.status, ae.code, ae.field, ae.message, ae.retryAfter
}
