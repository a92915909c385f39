package wire

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// ReservedHeaders are the header names, in lower case, that a static header
// must not use: hookkeeper sets them on every attempt (the Standard
// Webhooks headers, Content-Type, User-Agent, Hookkeeper-Delivery-Id and
// Hookkeeper-Replay-Until),
// the HTTP stack controls them (Host, Content-Length, Trailer and the
// hop-by-hop headers, which Go drops, rewrites or refuses over HTTP/2), or
// they would change what the sender reads back (Accept-Encoding: the
// response excerpt is read uncompressed so that secrets in it can be
// redacted). The CRD's CEL rule carries the same list; a test keeps them
// equal.
var ReservedHeaders = []string{
	"webhook-id",
	"webhook-timestamp",
	"webhook-signature",
	"hookkeeper-delivery-id",
	"hookkeeper-replay-until",
	"content-type",
	"user-agent",
	"host",
	"content-length",
	"transfer-encoding",
	"trailer",
	"te",
	"connection",
	"keep-alive",
	"proxy-connection",
	"upgrade",
	"accept-encoding",
}

// ReplayUntilHeader tells the receiver until when the attempt's event may
// still come back (RFC 3339, UTC, to the second): how long it must keep
// its de-duplication record of the webhook-id. It is not a Standard
// Webhooks header, so their verifiers ignore it (docs/adr/0038).
const ReplayUntilHeader = "Hookkeeper-Replay-Until"

var reserved = func() map[string]bool {
	m := make(map[string]bool, len(ReservedHeaders))
	for _, n := range ReservedHeaders {
		m[n] = true
	}
	return m
}()

// Reserved reports whether name, in any case, is one of ReservedHeaders.
// The sender asks for every static header of every attempt, so it does
// not allocate.
func Reserved(name string) bool {
	var buf [32]byte
	if len(name) > len(buf) {
		return false // longer than every reserved name
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return reserved[string(buf[:len(name)])]
}

// The rules a static header can break; the CRD's messages say the same.
var (
	// ErrHeaderName: the name is not an HTTP token (RFC 9110 §5.6.2).
	ErrHeaderName = errors.New("header names must be HTTP tokens: letters, digits and !#$%&'*+-.^_`|~")
	// ErrHeaderValue: Go's HTTP client refuses the value (a control
	// character other than tab) or would trim it (surrounding spaces).
	ErrHeaderValue = errors.New("header values must not contain control characters other than tab, nor begin or end with a space or tab")
	// ErrHeaderReserved: the name is one of ReservedHeaders.
	ErrHeaderReserved = errors.New("headers must not set a header hookkeeper or the HTTP stack sets (" + strings.Join(ReservedHeaders, ", ") + ")")
	// ErrHeaderRepeated: two static headers have the same name, compared
	// case-insensitively as HTTP does.
	ErrHeaderRepeated = errors.New("headers must not repeat a name (names are compared case-insensitively)")
)

// CheckHeader checks one static header: its name is a token that is not
// reserved, and Go's HTTP client sends its value unchanged. The error names
// the header but never quotes its value, which may be a credential.
func CheckHeader(name, value string) error {
	switch {
	case !httpguts.ValidHeaderFieldName(name):
		return fmt.Errorf("header %q: %w", name, ErrHeaderName)
	case Reserved(name):
		return fmt.Errorf("header %q: %w", name, ErrHeaderReserved)
	case !httpguts.ValidHeaderFieldValue(value), value != strings.Trim(value, " \t"):
		return fmt.Errorf("header %q: %w", name, ErrHeaderValue)
	}
	return nil
}

// HeaderSet checks a list of static headers one at a time, remembering the
// names seen so that a repeated name is refused. Its zero value is empty.
type HeaderSet struct {
	seen map[string]bool
}

// Add checks the header with CheckHeader and against the names added
// before.
func (s *HeaderSet) Add(name, value string) error {
	if err := CheckHeader(name, value); err != nil {
		return err
	}
	key := strings.ToLower(name)
	if s.seen[key] {
		return fmt.Errorf("header %q: %w", name, ErrHeaderRepeated)
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	s.seen[key] = true
	return nil
}

// Header is a static header sent with every attempt of an endpoint's
// deliveries, as configured and stored.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}
