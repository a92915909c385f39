package dispatch

import (
	"errors"
	"net"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/destination"
)

// Defaults of Sender and Request.
const (
	// DefaultTimeout is the attempt timeout when a Request has none; the
	// specification recommends 15 to 30 seconds.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxExcerpt bounds the response excerpt.
	DefaultMaxExcerpt = 1 << 10
	// maxDrain is how much of a response body beyond the excerpt is read
	// and discarded so that the connection can be reused; a longer body
	// closes the connection instead.
	maxDrain = 64 << 10
)

// DefaultUserAgent is "hookkeeper/<module version>" (from the build
// information; "dev" for a development build).
var DefaultUserAgent = "hookkeeper/" + buildVersion()

func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// NewTransport returns a transport tuned for many concurrent attempts to
// few hosts: hundreds of idle keep-alive connections per host (so a burst
// to one receiver does not open and close connections), HTTP/2 where the
// receiver offers it, no transparent compression (the excerpt is raw and
// the CPU is better spent elsewhere), bounded response headers. Timeouts
// come from each attempt's context. It dials any address and honours the
// proxy environment variables: it is for tests and tools; the manager
// delivers through NewGuardedTransport.
func NewTransport() *http.Transport {
	t := tunedTransport()
	t.Proxy = http.ProxyFromEnvironment
	t.DialContext = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	return t
}

// NewGuardedTransport is NewTransport dialling through policy: a host that
// is or resolves to an address the policy forbids is refused when the
// connection is dialled, before any packet is sent to it, so that DNS
// cannot slip past the check (the attempt fails with ForbiddenDestination).
// It uses no proxy: a proxy would connect on hookkeeper's behalf, beyond
// the check.
func NewGuardedTransport(policy *destination.Policy) *http.Transport {
	t := tunedTransport()
	t.DialContext = policy.DialContext
	return t
}

func tunedTransport() *http.Transport {
	return &http.Transport{
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           4096,
		MaxIdleConnsPerHost:    1024,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// NewClient returns a client on NewTransport that never follows redirects
// and keeps no cookies.
func NewClient() *http.Client {
	return &http.Client{Transport: NewTransport(), CheckRedirect: refuseRedirect}
}

// NewGuardedClient is NewClient on NewGuardedTransport(policy).
func NewGuardedClient(policy *destination.Policy) *http.Client {
	return &http.Client{Transport: NewGuardedTransport(policy), CheckRedirect: refuseRedirect}
}

func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// NewSender returns a Sender with its own NewClient and the defaults. It
// delivers to any address (the zero Sender does too): unit tests and tools
// use it with loopback receivers. The manager always delivers through
// NewGuardedSender, which is where the default-deny destination policy
// applies.
func NewSender() *Sender {
	return &Sender{Client: NewClient(), MaxExcerpt: DefaultMaxExcerpt, Now: time.Now, UserAgent: DefaultUserAgent}
}

// NewGuardedSender returns a Sender with the defaults whose client dials
// through policy (NewGuardedClient): attempts to a forbidden destination
// fail with ForbiddenDestination, which is never retried.
func NewGuardedSender(policy *destination.Policy) *Sender {
	return &Sender{Client: NewGuardedClient(policy), MaxExcerpt: DefaultMaxExcerpt, Now: time.Now, UserAgent: DefaultUserAgent}
}

// isTimeout reports whether err is a timeout of the network stack.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
