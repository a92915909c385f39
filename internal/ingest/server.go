package ingest

import (
	"net/http"
	"time"
)

// Server timeouts and header bounds. WriteTimeout must exceed
// Config.PublishTimeout so that a slow commit still gets its answer (a 503)
// out.
const (
	ServerReadHeaderTimeout = 5 * time.Second
	ServerReadTimeout       = 30 * time.Second
	ServerWriteTimeout      = 30 * time.Second
	ServerIdleTimeout       = 120 * time.Second

	// MaxRequestHeaderBytes bounds the request line and headers of an API
	// request (as headerBytes counts them); a larger request is refused
	// with a JSON 431 HeaderTooLarge. It leaves room for service-account
	// and OIDC bearer tokens, which are a few KiB.
	MaxRequestHeaderBytes = 32 << 10

	// ServerMaxHeaderBytes is net/http's hard cap, set above
	// MaxRequestHeaderBytes so that requests between the two still get the
	// JSON refusal. Past it (plus net/http's 4 KiB of slack) net/http
	// refuses while reading, before any handler runs, with a plain-text 431
	// (an HTML one over HTTP/2) that it offers no hook to change: the only
	// refusal of the API that is not JSON. The cap stays because it is
	// what bounds the memory a client can make the server spend on
	// headers; raising it to fit every request (the default is 1 MiB)
	// would only move the plain answer further out.
	ServerMaxHeaderBytes = 64 << 10
)

// serverTimeouts are the timeouts of a server from newServer; tests
// shorten them to watch slow clients being cut off.
type serverTimeouts struct {
	readHeader, read, write, idle time.Duration
}

var defaultServerTimeouts = serverTimeouts{
	readHeader: ServerReadHeaderTimeout,
	read:       ServerReadTimeout,
	write:      ServerWriteTimeout,
	idle:       ServerIdleTimeout,
}

// NewServer returns an http.Server for handler with timeouts that keep
// slow or idle clients from holding connections (slowloris) and bounds on
// header size: handler is wrapped to refuse headers over
// MaxRequestHeaderBytes with a JSON 431. The caller sets TLSConfig and
// starts it.
func NewServer(addr string, handler http.Handler) *http.Server {
	return newServer(addr, handler, defaultServerTimeouts)
}

func newServer(addr string, handler http.Handler, t serverTimeouts) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           limitHeaderBytes(handler, MaxRequestHeaderBytes),
		ReadHeaderTimeout: t.readHeader,
		ReadTimeout:       t.read,
		WriteTimeout:      t.write,
		IdleTimeout:       t.idle,
		MaxHeaderBytes:    ServerMaxHeaderBytes,
	}
}
