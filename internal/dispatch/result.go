package dispatch

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrorClass says why an attempt got no response. Its values are the
// names a policy's retryOn uses.
type ErrorClass string

const (
	// None: a response arrived (StatusCode is set).
	None ErrorClass = ""
	// NetworkError: no response (refused or reset connection, DNS, TLS),
	// or no OAuth2 access token (the token endpoint failed).
	NetworkError ErrorClass = "NetworkError"
	// Timeout: no complete response within the attempt's timeout.
	Timeout ErrorClass = "Timeout"
	// InvalidRequest: the attempt could not be built (bad URL, header,
	// data or signing secret); nothing was sent and resending the same
	// inputs cannot succeed.
	InvalidRequest ErrorClass = "InvalidRequest"
	// Canceled: the caller's context ended the attempt; it says nothing
	// about the receiver and should not be counted.
	Canceled ErrorClass = "Canceled"
	// ForbiddenDestination: the URL's host is or resolves to an address the
	// destination policy forbids (loopback, link-local, cloud metadata, the
	// cluster's ranges, ...); no connection was attempted. Never retried:
	// resending cannot succeed until the URL or the policy changes.
	ForbiddenDestination ErrorClass = "ForbiddenDestination"
)

// Result is the outcome of one attempt.
type Result struct {
	// StatusCode is the response status, 0 when none arrived.
	StatusCode int
	// Start is the attempt time, sent as webhook-timestamp.
	Start time.Time
	// Duration is the wall time from the start of the attempt to the end
	// of reading the response.
	Duration time.Duration
	// Err describes a failure without a response (Class is not None). Its
	// message names no URL path, query or user information, and no secret.
	Err   error
	Class ErrorClass
	// RetryAfter is the response's Retry-After on a 429 or 503 (an
	// HTTP-date is taken relative to Sender.Now when the response
	// arrived); zero when absent, invalid or in the past, capped at a year.
	RetryAfter time.Duration
	// Excerpt is the start of the response body, at most MaxExcerpt bytes.
	Excerpt []byte
}

// Verdict is what a Result means under a retry policy.
type Verdict int

const (
	// Success: a 2xx response.
	Success Verdict = iota + 1
	// Retry: a failure the policy retries.
	Retry
	// NonRetryable: a failure the policy does not retry.
	NonRetryable
	// Gone: 410, the receiver wants no more deliveries; never retried.
	Gone
)

func (v Verdict) String() string {
	switch v {
	case Success:
		return "Success"
	case Retry:
		return "Retry"
	case NonRetryable:
		return "NonRetryable"
	case Gone:
		return "Gone"
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}

// Classify says what res means under retryOn, whose entries are
// "NetworkError", "Timeout", a status class ("3xx", "4xx", "5xx") or an
// exact status code ("429"), compared case-insensitively:
//
//   - 2xx is Success and 410 is Gone, whatever retryOn says;
//   - a failure whose class or status retryOn lists is Retry, any other
//     NonRetryable (3xx included: redirects are not followed);
//   - InvalidRequest and ForbiddenDestination are NonRetryable, whatever
//     retryOn says, and Canceled is Retry (the attempt proves nothing; the
//     caller should not count it);
//   - no status and no class (a hand-made Result) counts as NetworkError.
func Classify(res Result, retryOn []string) Verdict {
	switch res.Class {
	case None:
		if res.StatusCode == 0 {
			return listed(retryOn, string(NetworkError))
		}
	case InvalidRequest, ForbiddenDestination:
		return NonRetryable
	case Canceled:
		return Retry
	default:
		return listed(retryOn, string(res.Class))
	}
	code := res.StatusCode
	switch {
	case code >= 200 && code <= 299:
		return Success
	case code == http.StatusGone:
		return Gone
	}
	for _, c := range retryOn {
		if len(c) != 3 || c[0] < '1' || c[0] > '9' || int(c[0]-'0') != code/100 {
			continue
		}
		if strings.EqualFold(c[1:], "xx") {
			return Retry
		}
		if n, err := strconv.Atoi(c); err == nil && n == code {
			return Retry
		}
	}
	return NonRetryable
}

func listed(retryOn []string, class string) Verdict {
	for _, c := range retryOn {
		if strings.EqualFold(c, class) {
			return Retry
		}
	}
	return NonRetryable
}

// maxRetryAfter bounds a parsed Retry-After so that it cannot overflow;
// the policy caps it much lower.
const maxRetryAfter = 366 * 24 * time.Hour

// parseRetryAfter parses a Retry-After value, delta-seconds or HTTP-date
// (RFC 9110 §10.2.3), relative to now. Invalid values and dates in the
// past give 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if isDigits(v) {
		if len(v) > 9 { // beyond 31 years: cap, without overflowing
			return maxRetryAfter
		}
		n, _ := strconv.Atoi(v)
		return min(time.Duration(n)*time.Second, maxRetryAfter)
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return min(max(t.Sub(now), 0), maxRetryAfter)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
