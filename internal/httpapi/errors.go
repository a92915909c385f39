package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Code is a stable, machine-readable error code. Clients switch on it; the
// message is for humans and may change.
type Code string

// Error codes and the status each is answered with.
const (
	CodeInvalidJSON     Code = "InvalidJSON"         // 400: malformed, not an object, trailing data, duplicate keys
	CodeUnknownField    Code = "UnknownField"        // 400: a body field or query parameter the API does not know
	CodeInvalidField    Code = "InvalidField"        // 400: a known field or header with a bad value
	CodeSecretCollision Code = "SecretCollision"     // 400: a secret shares its name with a top-level data key
	CodeBodyTooLarge    Code = "BodyTooLarge"        // 413
	CodeHeaderTooLarge  Code = "HeaderTooLarge"      // 431: request headers exceed the API's bound
	CodeFanOutLimit     Code = "FanOutLimitExceeded" // 422: the event type matches more endpoints than allowed
	// 422: the event breaks its type's contract (WebhookEventType); the
	// codes are the publish core's rules: SchemaViolation, MissingSecret,
	// UnknownEventType, EventTypeNotReady, ValidUntilTooLate.
	CodeUnsupportedMediaType Code = "UnsupportedMediaType" // 415: Content-Type is not application/json
	CodeIdempotencyConflict  Code = "IdempotencyConflict"  // 409: key already used with a different body
	CodeNotFound             Code = "NotFound"             // 404: unknown path, or object absent from this namespace
	CodeUnauthenticated      Code = "Unauthenticated"      // 401
	CodeForbidden            Code = "Forbidden"            // 403
	CodeMethodNotAllowed     Code = "MethodNotAllowed"     // 405, with Allow
	CodeRequestTimeout       Code = "RequestTimeout"       // 408: the body did not arrive within the server's read timeout
	CodeQuotaExceeded        Code = "QuotaExceeded"        // 429, with Retry-After: the namespace is over its WebhookQuota; limit names the hard limit
	CodeUnavailable          Code = "Unavailable"          // 503, with Retry-After when known: shutting down, timed out or overloaded; retry with the same Idempotency-Key
	CodeInternal             Code = "Internal"             // 500: details are logged, never answered
)

// ErrorBody is the JSON shape of every error answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong. Field names the offending body field
// (dotted path), header or query parameter, when there is one; Limit the
// hard limit of the namespace's WebhookQuota (spec.hard.<limit>) that
// refused a publish (QuotaExceeded).
type ErrorDetail struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	Limit   string `json:"limit,omitempty"`
}

// apiError is an error answer. cause is logged, never sent.
type apiError struct {
	status  int
	code    Code
	message string
	field   string
	cause   error
	// limit is ErrorDetail.Limit.
	limit string
	// retryAfter, when set, is answered as Retry-After (seconds).
	retryAfter string
	// quiet: an expected refusal under load, logged at V(1) like a client
	// error whatever its status.
	quiet bool
}

func (e *apiError) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.code, e.message, e.cause)
	}
	return fmt.Sprintf("%s: %s", e.code, e.message)
}

func (e *apiError) Unwrap() error { return e.cause }

func newError(status int, code Code, field, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, field: field, message: fmt.Sprintf(format, args...)}
}

func badRequest(code Code, field, format string, args ...any) *apiError {
	return newError(http.StatusBadRequest, code, field, format, args...)
}

func notFound(kind, id string) *apiError {
	return newError(http.StatusNotFound, CodeNotFound, "", "%s %q not found", kind, id)
}

// internalError hides cause from the client and keeps it for the log.
func internalError(cause error) *apiError {
	return &apiError{status: http.StatusInternalServerError, code: CodeInternal,
		message: "internal error; it has been logged", cause: cause}
}

// asAPIError turns any handler error into an answer: unknown errors are
// internal.
func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return internalError(err)
}

// writeJSON answers status with v. It encodes before writing, so an
// encoding failure is still a clean 500.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encoding answer: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
	return nil
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hookkeeper"`)
	}
	if e.retryAfter != "" {
		w.Header().Set("Retry-After", e.retryAfter)
	}
	body := ErrorBody{Error: ErrorDetail{Code: e.code, Message: e.message, Field: e.field, Limit: e.limit}}
	if err := writeJSON(w, e.status, body); err != nil {
		// Only strings: cannot fail. Keep a valid answer regardless.
		http.Error(w, `{"error":{"code":"Internal","message":"internal error"}}`, http.StatusInternalServerError)
	}
}
