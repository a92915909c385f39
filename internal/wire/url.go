package wire

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// MaxURLLength bounds an endpoint URL (the CRD's maxLength).
const MaxURLLength = 2048

// The rules an endpoint URL can break, worded as the CRD's messages.
var (
	ErrURLLength     = fmt.Errorf("url must be at most %d characters", MaxURLLength)
	ErrURLSpace      = errors.New("url must not begin or end with whitespace")
	ErrURLAbsolute   = errors.New("url must be an absolute http or https URL")
	ErrURLHost       = errors.New("url must name a host")
	ErrURLUserInfo   = errors.New("url must not contain user information: put credentials in the signing secret, not the URL")
	ErrURLFragment   = errors.New("url must not contain a fragment")
	ErrURLPort       = errors.New("url port must be a number from 1 to 65535 of at most 5 digits")
	ErrURLHostSyntax = errors.New("url host must be an IP address (IPv6 in brackets, without a zone, not IPv4-mapped) or a DNS name of ASCII labels of 1 to 63 letters, digits, '-' or '_' (punycode for international names)")
)

// CheckURL reports why raw can never be dialled as an endpoint, or nil. It
// refuses what Go's URL parser refuses, and what it accepts but the dialer
// or resolver never could: a port out of range, a host that is neither an
// IP address nor a DNS name, an IPv6 zone (an interface of one node). It
// also refuses user information and fragments, which hookkeeper never
// sends, and surrounding whitespace, which is always a typo. It does no
// lookup: whether the destination is allowed is package destination's
// question. The error never quotes the URL, whose path or query may carry
// a token.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		u = nil
	}
	return CheckParsedURL(raw, u)
}

// CheckParsedURL is CheckURL for a raw URL that url.Parse made u of (nil
// when it failed), for the sender, which has parsed it already.
func CheckParsedURL(raw string, u *url.URL) error {
	switch {
	case len(raw) > MaxURLLength:
		return ErrURLLength
	case raw != strings.TrimSpace(raw):
		return ErrURLSpace
	case u == nil || u.Scheme != "http" && u.Scheme != "https":
		return ErrURLAbsolute
	case u.Hostname() == "":
		return ErrURLHost
	case u.User != nil:
		return ErrURLUserInfo
	case strings.Contains(raw, "#"):
		return ErrURLFragment
	case !validPort(u.Port()):
		return ErrURLPort
	case !validHost(u.Hostname()):
		return ErrURLHostSyntax
	}
	return nil
}

// validPort: empty (the scheme's default) or 1..65535 in at most 5 digits.
// url.Parse has already checked that it is all digits.
func validPort(p string) bool {
	if p == "" {
		return true
	}
	if len(p) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(p); i++ {
		n = n*10 + int(p[i]-'0')
	}
	return n >= 1 && n <= 65535
}

// validHost: an IP address without a zone that is not IPv4-mapped (what
// the CRD's isIP accepts), or a name Go's resolver would look up.
func validHost(h string) bool {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Zone() == "" && !a.Is4In6()
	}
	return isDomainName(h)
}

// isDomainName is the check of Go's resolver (net.isDomainName), without
// the lone root ".": a name it fails is never looked up. It is ASCII only:
// the CRD cannot convert an international name to punycode, so it asks
// for the punycode form and so does this.
func isDomainName(s string) bool {
	l := len(s)
	if l == 0 || l > 254 || l == 254 && s[l-1] != '.' || s == "." {
		return false
	}
	last := byte('.')
	nonNumeric := false
	partlen := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		default:
			return false
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_':
			nonNumeric = true
			partlen++
		case '0' <= c && c <= '9':
			partlen++
		case c == '-':
			if last == '.' {
				return false
			}
			partlen++
			nonNumeric = true
		case c == '.':
			if last == '.' || last == '-' || partlen > 63 || partlen == 0 {
				return false
			}
			partlen = 0
		}
		last = c
	}
	return last != '-' && partlen <= 63 && nonNumeric
}
