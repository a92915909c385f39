package dispatch

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/destination"
)

// attemptError is a failure whose message was built to be stored and
// shown: it names the host at most, never the URL's path, query,
// fragment or user information. Unwrap gives the cause without the
// *url.Error that named the URL.
type attemptError struct {
	msg string
	err error
}

func (e *attemptError) Error() string { return e.msg }
func (e *attemptError) Unwrap() error { return e.err }

// transportError classifies a failed Client.Do and strips the URL from
// its error: parent is the caller's context, attempt the one with the
// attempt's timeout.
func transportError(parent, attempt context.Context, err error, u *url.URL, timeout time.Duration) (ErrorClass, error) {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := scrub(err.Error(), u)
	var forbidden *destination.ForbiddenError
	switch {
	case errors.As(err, &forbidden):
		return ForbiddenDestination, &attemptError{msg, err}
	case parent.Err() != nil:
		return Canceled, &attemptError{"canceled: " + msg, err}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(attempt.Err(), context.DeadlineExceeded):
		return Timeout, &attemptError{"timeout: no response within " + timeout.String(), err}
	case isTimeout(err):
		return Timeout, &attemptError{"timeout: " + msg, err}
	}
	return NetworkError, &attemptError{msg, err}
}

// scrub replaces in msg whatever of u could be a credential: the whole
// URL, its user information, path, query and fragment (each when at least
// 3 bytes long, so that short ones do not garble the message).
func scrub(msg string, u *url.URL) string {
	parts := []string{u.String(), u.User.String(), u.EscapedPath(), u.Path, u.RawQuery, u.Fragment, u.EscapedFragment()}
	if pw, ok := u.User.Password(); ok {
		parts = append(parts, pw)
	}
	if q, err := url.QueryUnescape(u.RawQuery); err == nil {
		parts = append(parts, q)
	}
	for _, p := range parts {
		if len(p) >= 3 && p != u.Host {
			msg = strings.ReplaceAll(msg, p, "[redacted]")
		}
	}
	return msg
}

// urlParseError describes an endpoint URL that does not parse without
// quoting it (url.Parse's errors quote the URL or parts of it).
func urlParseError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if m := ue.Err.Error(); !strings.ContainsAny(m, `"'`) {
			return errors.New("endpoint URL does not parse: " + m)
		}
	}
	return errors.New("endpoint URL does not parse")
}
