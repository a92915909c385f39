package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// Defaults of ServerOptions, sized so that the worst case of both fits
// the manager's 512 MiB memory limit beside the engine and the controllers
// (docs/operations/sizing.md#memory): a connection stalled mid-headers holds
// about 90 KiB, and a publish body up to about 24 times its size while it
// is parsed (a body of small JSON objects or numbers is the worst).
const (
	DefaultMaxConnections       = 1024
	DefaultMaxBodyBytesInFlight = 8 << 20
	// DefaultMaxUnprovenConnectionsPerSource is an eighth of the default
	// cap: one address stalling connections takes at most that share, and
	// it takes eight addresses to reach the cap, where eviction starts with
	// the address holding the most unproven connections.
	DefaultMaxUnprovenConnectionsPerSource = 128
)

// ServerOptions bound what clients can make a Server hold. Zero values
// take the defaults.
type ServerOptions struct {
	// MaxConnections bounds the open connections (see connLimiter).
	MaxConnections int
	// MaxUnprovenConnectionsPerSource bounds the open connections of one
	// client address (an IPv6 one by its /64) on which no request has
	// authenticated yet (see connLimiter).
	MaxUnprovenConnectionsPerSource int
	// MaxBodyBytesInFlight bounds the request bodies being read or handled
	// at once, each counted at its Content-Length (MaxBodyBytes when the
	// length is not declared); a request that does not fit is answered 503
	// Unavailable at once.
	MaxBodyBytesInFlight int64
	// MaxBodyBytes is the largest body the handler reads (its
	// Config.MaxBodyBytes; default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// Registerer receives the limits' metrics; nil records none.
	Registerer prometheus.Registerer
}

func (o ServerOptions) withDefaults() ServerOptions {
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.MaxUnprovenConnectionsPerSource <= 0 {
		o.MaxUnprovenConnectionsPerSource = DefaultMaxUnprovenConnectionsPerSource
	}
	if o.MaxBodyBytesInFlight <= 0 {
		o.MaxBodyBytesInFlight = DefaultMaxBodyBytesInFlight
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return o
}

// Server is the API's http.Server with its limits. Serve it with its own
// Serve, ServeTLS, ListenAndServe or ListenAndServeTLS, which put the
// connection cap on the listener.
type Server struct {
	*http.Server
	maxConns, maxUnproven int
	metrics               *serverMetrics
}

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

// NewServer returns a Server for handler with timeouts that keep slow or
// idle clients from holding connections (slowloris), bounds on header size
// (handler is wrapped to refuse headers over MaxRequestHeaderBytes with a
// JSON 431), on open connections and on request bodies in progress, and
// that closes a connection answered before its body was read. The caller
// sets TLSConfig and starts it.
func NewServer(addr string, handler http.Handler, opts ServerOptions) *Server {
	return newServer(addr, handler, opts, defaultServerTimeouts)
}

func newServer(addr string, handler http.Handler, opts ServerOptions, t serverTimeouts) *Server {
	opts = opts.withDefaults()
	m := newServerMetrics(opts.Registerer)
	g := &guard{
		next:    limitHeaderBytes(handler, MaxRequestHeaderBytes),
		bodies:  newByteBudget(opts.MaxBodyBytesInFlight),
		maxBody: opts.MaxBodyBytes,
		metrics: m,
	}
	return &Server{
		Server: &http.Server{
			Addr:              addr,
			Handler:           g,
			ReadHeaderTimeout: t.readHeader,
			ReadTimeout:       t.read,
			WriteTimeout:      t.write,
			IdleTimeout:       t.idle,
			MaxHeaderBytes:    ServerMaxHeaderBytes,
			ConnContext:       withConn,
		},
		maxConns:    opts.MaxConnections,
		maxUnproven: opts.MaxUnprovenConnectionsPerSource,
		metrics:     m,
	}
}

// Serve serves ln under the connection cap.
func (s *Server) Serve(ln net.Listener) error {
	return s.Server.Serve(newConnLimiter(ln, s.maxConns, s.maxUnproven, s.metrics))
}

// ServeTLS serves ln over TLS under the connection cap.
func (s *Server) ServeTLS(ln net.Listener, certFile, keyFile string) error {
	return s.Server.ServeTLS(newConnLimiter(ln, s.maxConns, s.maxUnproven, s.metrics), certFile, keyFile)
}

// ListenAndServe listens on s.Addr and serves it under the connection cap.
func (s *Server) ListenAndServe() error {
	ln, err := s.listen()
	if err != nil {
		return err
	}
	return s.Serve(ln)
}

// ListenAndServeTLS listens on s.Addr and serves it over TLS under the
// connection cap.
func (s *Server) ListenAndServeTLS(certFile, keyFile string) error {
	ln, err := s.listen()
	if err != nil {
		return err
	}
	return s.ServeTLS(ln, certFile, keyFile)
}

func (s *Server) listen() (net.Listener, error) {
	addr := s.Addr
	if addr == "" {
		addr = ":http"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return ln, nil
}
