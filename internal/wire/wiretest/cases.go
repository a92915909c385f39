// Package wiretest holds the cases that the checks of package wire and
// the CRD's rules are both tested on: the unit tests run them through
// wire, the API suite through the real API server.
package wiretest

import (
	"strings"

	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// URLCases are endpoint URLs and the rule each breaks (nil: accepted). The
// API suite applies every one of them to the real API server, so that the
// CRD and CheckURL are known to agree on each.
var URLCases = []struct {
	URL  string
	Want error
}{
	{"https://example.com/hooks", nil},
	{"http://example.com", nil},
	{"HTTPS://Example.COM/hooks?tenant=a&b=c", nil},
	{"https://example.com:1/hooks", nil},
	{"https://example.com:65535/hooks", nil},
	{"https://example.com:08080/hooks", nil},
	{"https://example.com:/hooks", nil},
	{"https://example.com./hooks", nil},
	{"https://xn--bcher-kva.example/hooks", nil},
	{"https://a_b.example/hooks", nil},
	{"https://1a.example/hooks", nil},
	{"http://10.0.0.1:8080/hooks", nil},
	{"http://[2001:db8::1]:8443/hooks", nil},
	{"https://example.com/a b", nil},
	{"https://" + strings.Repeat("a", 63) + ".example/", nil},
	{"https://" + strings.Repeat("a.", 126) + "a/", nil},
	{"https://example.com/" + strings.Repeat("p", wire.MaxURLLength-len("https://example.com/")), nil},

	{"https://example.com/" + strings.Repeat("p", wire.MaxURLLength-len("https://example.com/")+1), wire.ErrURLLength},
	{" https://example.com/hooks", wire.ErrURLSpace},
	{"https://example.com/hooks ", wire.ErrURLSpace},
	{"https://example.com/hooks\n", wire.ErrURLSpace},
	{"https://example.com/hooks\u00a0", wire.ErrURLSpace},
	{"ftp://example.com/hooks", wire.ErrURLAbsolute},
	{"example.com/hooks", wire.ErrURLAbsolute},
	{"/hooks", wire.ErrURLAbsolute},
	{"not a url", wire.ErrURLAbsolute},
	{"https://example.com/ho\x01oks", wire.ErrURLAbsolute},
	{"https://example.com/ho\x7foks", wire.ErrURLAbsolute},
	{"https://example.com:http/hooks", wire.ErrURLAbsolute},
	{"https://exa mple.com/hooks", wire.ErrURLAbsolute},
	{"http://::1/hooks", wire.ErrURLAbsolute},
	{"http://2001:db8::1/hooks", wire.ErrURLAbsolute},
	{"http://[::1/hooks", wire.ErrURLAbsolute},
	{"https://%65xample.com/", wire.ErrURLAbsolute},
	{"http:///hooks", wire.ErrURLHost},
	{"http://:8080/hooks", wire.ErrURLHost},
	{"http:example.com", wire.ErrURLHost},
	{"https://admin:hunter2@example.com/hooks", wire.ErrURLUserInfo},
	{"https://token@example.com/hooks", wire.ErrURLUserInfo},
	{"https://example.com/hooks#top", wire.ErrURLFragment},
	{"https://example.com/hooks#", wire.ErrURLFragment},
	{"https://example.com:0/hooks", wire.ErrURLPort},
	{"https://example.com:65536/hooks", wire.ErrURLPort},
	{"https://example.com:99999/hooks", wire.ErrURLPort},
	{"https://example.com:000080/hooks", wire.ErrURLPort},
	{"https://example.com:99999999999999999999999/hooks", wire.ErrURLPort},
	{"http://[fe80::1%25eth0]/hooks", wire.ErrURLHostSyntax},
	{"http://[::ffff:10.0.0.1]/hooks", wire.ErrURLHostSyntax},
	{"https://a!b.example/hooks", wire.ErrURLHostSyntax},
	{"https://b%C3%BCcher.example/hooks", wire.ErrURLHostSyntax},
	{"https://bücher.example/hooks", wire.ErrURLHostSyntax},
	{"https://256.1.1.1/hooks", wire.ErrURLHostSyntax},
	{"https://10.0.0/hooks", wire.ErrURLHostSyntax},
	{"https://010.0.0.1/hooks", wire.ErrURLHostSyntax},
	{"https://-a.example/hooks", wire.ErrURLHostSyntax},
	{"https://a-.example/hooks", wire.ErrURLHostSyntax},
	{"https://a..example/hooks", wire.ErrURLHostSyntax},
	{"https://" + strings.Repeat("a", 64) + ".example/", wire.ErrURLHostSyntax},
	{"https://" + strings.Repeat("a.", 127) + "a/", wire.ErrURLHostSyntax},
	{"https://$.example/hooks", wire.ErrURLHostSyntax},
}

// HeaderCases are static headers and the rule each breaks (nil: accepted).
// Values are JSON-safe (valid UTF-8), as every value from the API server is.
var HeaderCases = []struct {
	Name, Value string
	Want        error
}{
	{"X-Tenant", "acme", nil},
	{"x_custom.header~1", "a\tb", nil},
	{"Authorization", "Bearer abc.def", nil},
	{"X-Empty", "", nil},
	{"X-Unicode", "grüße €", nil},
	{"X-Inner-Space", "a  b", nil},
	{"X Tenant", "acme", wire.ErrHeaderName},
	{"X-Tenant:", "acme", wire.ErrHeaderName},
	{"X-Ténant", "acme", wire.ErrHeaderName},
	{"X-Tenant", "acme\r\nX-Evil: 1", wire.ErrHeaderValue},
	{"X-Tenant", "a\x00b", wire.ErrHeaderValue},
	{"X-Tenant", "a\x01b", wire.ErrHeaderValue},
	{"X-Tenant", "a\x1bb", wire.ErrHeaderValue},
	{"X-Tenant", "a\x7fb", wire.ErrHeaderValue},
	{"X-Tenant", " acme", wire.ErrHeaderValue},
	{"X-Tenant", "acme ", wire.ErrHeaderValue},
	{"X-Tenant", "\tacme", wire.ErrHeaderValue},
	{"X-Tenant", "acme\t", wire.ErrHeaderValue},
}

// Cases returns name in lower, upper and mixed case (every other letter
// upper), for the tests that names are compared case-insensitively.
func Cases(name string) []string {
	b := []byte(strings.ToLower(name))
	for i := range b {
		if i%2 == 0 && 'a' <= b[i] && b[i] <= 'z' {
			b[i] -= 'a' - 'A'
		}
	}
	return []string{strings.ToLower(name), strings.ToUpper(name), string(b)}
}
