package httpapi

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// CodeUnknownEndpoint answers a publish addressed (field endpoint) to a
// WebhookEndpoint that does not exist in the namespace: 422.
const CodeUnknownEndpoint Code = "UnknownEndpoint"

// validNamespace and validObjectName are the name rules of the publish
// core, which the read routes check too.
var (
	validNamespace  = publish.ValidNamespace
	validObjectName = publish.ValidObjectName
)

// ruleCodes are the codes the rules of a refused field are answered with
// (all 400).
var ruleCodes = map[publish.Rule]Code{
	publish.RuleJSON:            CodeInvalidJSON,
	publish.RuleUnknownField:    CodeUnknownField,
	publish.RuleInvalid:         CodeInvalidField,
	publish.RuleSecretCollision: CodeSecretCollision,
	publish.RuleTooManySecrets:  CodeInvalidField,
}

// unavailableMessages word the core's Unavailable refusals in this API's
// terms.
var unavailableMessages = map[publish.UnavailableReason]string{
	publish.Stopping:          "the server is shutting down and did not record the event; retry",
	publish.CommitTimeout:     "the commit did not finish in time; the event may or may not be recorded: retry with the same Idempotency-Key (send one to make retries safe)",
	publish.Canceled:          "the request ended before the commit finished; the event may or may not be recorded: retry with the same Idempotency-Key (send one to make retries safe)",
	publish.LedgerUnreachable: "the ledger cannot be reached now; the event may or may not be recorded: retry after Retry-After with the same Idempotency-Key (send one to make retries safe)",
	publish.ContractsUnknown:  "the contracts of this namespace's event types are not known yet (the Kubernetes API server has not answered since this server started); nothing was recorded: retry after Retry-After",
}

// publishRefusal translates an error of the publish core into this API's
// answer; what is not a refusal is internal.
func publishRefusal(err error) *apiError {
	if fe, ok := errors.AsType[*publish.FieldError](err); ok {
		code, known := ruleCodes[fe.Rule]
		if !known {
			code = CodeInvalidField
		}
		f := fe.Field
		if f == publish.FieldIdempotencyKey {
			f = IdempotencyKeyHeader
		}
		return &apiError{status: http.StatusBadRequest, code: code, field: f, message: fe.Message}
	}
	if ce, ok := errors.AsType[*publish.ContractError](err); ok {
		return &apiError{status: http.StatusUnprocessableEntity, code: Code(ce.Rule), field: ce.Field, message: ce.Message}
	}
	if tl, ok := errors.AsType[*publish.TooLargeError](err); ok {
		return bodyTooLarge(tl.Limit)
	}
	if errors.Is(err, publish.ErrIdempotencyConflict) {
		return newError(http.StatusConflict, CodeIdempotencyConflict, IdempotencyKeyHeader,
			"this Idempotency-Key was already used with a different body; use a new key for a new event")
	}
	if fe, ok := errors.AsType[*publish.FanOutError](err); ok {
		return &apiError{status: http.StatusUnprocessableEntity, code: CodeFanOutLimit, field: "type", message: fe.Error()}
	}
	if ue, ok := errors.AsType[*publish.UnknownEndpointError](err); ok {
		return &apiError{status: http.StatusUnprocessableEntity, code: CodeUnknownEndpoint, field: "endpoint", message: ue.Error()}
	}
	if qe, ok := errors.AsType[*publish.QuotaExceededError](err); ok {
		// An expected refusal: logged like a client error.
		return &apiError{status: http.StatusTooManyRequests, code: CodeQuotaExceeded, limit: string(qe.Limit),
			retryAfter: strconv.FormatInt(publish.RetryAfterSeconds(qe.RetryAfter), 10), quiet: true, message: qe.Error()}
	}
	if ue, ok := errors.AsType[*publish.UnavailableError](err); ok {
		msg, known := unavailableMessages[ue.Reason]
		if !known {
			msg = ue.Message
		}
		return &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable, cause: err,
			retryAfter: retryAfterSeconds(ue.RetryAfter), message: msg}
	}
	return internalError(err)
}
