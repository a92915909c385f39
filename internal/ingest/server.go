package ingest

import (
	"net/http"
	"time"
)

// Server timeouts. WriteTimeout must exceed Config.PublishTimeout so that a
// slow commit still gets its answer (a 503) out.
const (
	ServerReadHeaderTimeout = 5 * time.Second
	ServerReadTimeout       = 30 * time.Second
	ServerWriteTimeout      = 30 * time.Second
	ServerIdleTimeout       = 120 * time.Second
	ServerMaxHeaderBytes    = 64 << 10 // room for service-account tokens
)

// NewServer returns an http.Server for handler with timeouts that keep
// slow or idle clients from holding connections (slowloris) and a bound on
// header size. The caller sets TLSConfig and starts it.
func NewServer(addr string, handler http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           handler,
		ReadHeaderTimeout: ServerReadHeaderTimeout,
		ReadTimeout:       ServerReadTimeout,
		WriteTimeout:      ServerWriteTimeout,
		IdleTimeout:       ServerIdleTimeout,
		MaxHeaderBytes:    ServerMaxHeaderBytes,
	}
}
