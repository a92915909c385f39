package conditions

import (
	"errors"
	"strings"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/truncate"
)

// Condition messages are read by anyone who may read the object, so they
// are built from known facts only: the field paths of the spec and rules
// worded here or in internal/backoff. The text of an arbitrary error never
// reaches them: it may carry a URL with credentials, a header value or the
// API server's internals. Such errors are logged and the message says so.

// MaxMessage bounds a message built here.
const MaxMessage = 1024

// InternalErrorMessage stands in a condition for an error whose text is not
// ours to show.
const InternalErrorMessage = "an unexpected error; the operator's log has the details"

// specPaths maps the backoff package's field names onto RetryPolicy paths.
var specPaths = map[string]string{
	"strategy":       "spec.backoff.strategy",
	"initialDelay":   "spec.backoff.initialDelay",
	"factor":         "spec.backoff.factor",
	"maxDelay":       "spec.backoff.maxDelay",
	"schedule":       "spec.backoff.schedule",
	"jitterPercent":  "spec.backoff.jitterPercent",
	"maxAttempts":    "spec.horizon.maxAttempts",
	"maxAge":         "spec.horizon.maxAge",
	"attemptTimeout": "spec.attemptTimeout",
	"retryAfterCap":  "spec.retryAfterCap",
}

// Message renders the rule violations in err (backoff.FieldError,
// possibly joined) as "path: rule" pairs on one bounded line, with the
// fields named as in the RetryPolicy spec. Any other error is replaced by
// InternalErrorMessage: its text is not ours to show.
func Message(err error) string {
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	var parts []string
	for _, e := range errs {
		var fe *backoff.FieldError
		if !errors.As(e, &fe) {
			return InternalErrorMessage
		}
		name, index, _ := strings.Cut(fe.Field, "[")
		path, ok := specPaths[name]
		if !ok {
			path = "spec." + name
		}
		if index != "" {
			path += "[" + index
		}
		parts = append(parts, path+": "+fe.Detail)
	}
	return Bound(strings.Join(parts, "; "))
}

// Undecodable says which stored values the operator could not decode
// (an object's Undecodable, "path: Go's error") and the rule each breaks.
// It names the path and a rule chosen by the kind of Go error, never the
// error's text, which quotes the stored value (a header value may be a
// credential).
func Undecodable(problems []string) string {
	parts := make([]string, 0, len(problems))
	for _, p := range problems {
		path, goErr, _ := strings.Cut(p, ": ")
		parts = append(parts, path+" "+undecodableRule(goErr))
	}
	return Bound("the stored object has values the operator cannot decode, left out: " + strings.Join(parts, "; ") +
		"; correct them (the API server refuses such values since the CRD schema rules them out)")
}

// undecodableRule is the rule a value broke, by the kind of Go's decoding
// error.
func undecodableRule(goErr string) string {
	switch {
	case strings.HasPrefix(goErr, "time: "):
		return "must be a duration Go can parse, at most 2562047h"
	case strings.HasPrefix(goErr, "parsing time "):
		return "must be an RFC 3339 date-time as Go parses it (uppercase T and Z)"
	case strings.Contains(goErr, "cannot unmarshal number"):
		return "must be a number in the range of its field"
	case strings.Contains(goErr, "cannot unmarshal"):
		return "has the wrong type for its field"
	default:
		return "cannot be decoded into its field"
	}
}

// Bound cuts a message to MaxMessage bytes at a character boundary.
func Bound(msg string) string { return truncate.String(msg, MaxMessage, "...") }

// maxQuote is the most of a failure (an HTTP answer, a dial error) that
// status and messages quote.
const maxQuote = 256

// Quote cuts a failure quoted in status or a message to maxQuote bytes at a
// character boundary.
func Quote(s string) string { return truncate.String(s, maxQuote, "...") }

// Clip cuts s to n bytes at a character boundary, marking nothing: for
// values status records to compare them later.
func Clip(s string, n int) string { return truncate.String(s, n, "") }
