package dispatch

import (
	"errors"
	"net"
	"net/http"
	"runtime/debug"
	"time"
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
// come from each attempt's context.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
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

func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// NewSender returns a Sender with its own NewClient and the defaults.
func NewSender() *Sender {
	return &Sender{Client: NewClient(), MaxExcerpt: DefaultMaxExcerpt, Now: time.Now, UserAgent: DefaultUserAgent}
}

// isTimeout reports whether err is a timeout of the network stack.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
