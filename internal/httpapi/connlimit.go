package httpapi

import (
	"container/list"
	"context"
	"crypto/tls"
	"net"
	"sync"
)

// connLimiter is a net.Listener that keeps at most max connections open,
// so that what clients make the server hold (buffered headers, a goroutine,
// a file descriptor per connection) stays bounded however many connect.
//
// At the cap, a new connection makes room by closing the oldest connection
// that is not serving a request (one still sending its headers, or idle
// between requests): a client that stalls mid-headers cannot keep a
// publisher out, since a publisher's headers arrive long before enough new
// connections come to push its own out, and reconnecting at will only
// evicts the attacker's own stalled connections. Only when every
// connection is serving a request is the new one refused, closed as soon
// as it is accepted, which costs nothing but the accept.
type connLimiter struct {
	net.Listener
	max     int
	metrics *serverMetrics

	mu   sync.Mutex
	open int
	// waiting holds the open connections not serving a request, oldest
	// first: those eviction may close.
	waiting list.List
}

// limitedConn is a connection of a connLimiter.
type limitedConn struct {
	net.Conn
	l *connLimiter
	// Guarded by l.mu: elem is its place in l.waiting (nil while serving a
	// request), closed whether it has left the count.
	elem   *list.Element
	closed bool
}

func newConnLimiter(ln net.Listener, maxConns int, m *serverMetrics) *connLimiter {
	return &connLimiter{Listener: ln, max: maxConns, metrics: m}
}

// Accept returns the next connection admitted (see connLimiter).
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// admit counts c in, evicting the oldest waiting connection at the cap, or
// closes c and returns nil when every open connection serves a request.
func (l *connLimiter) admit(c net.Conn) *limitedConn {
	l.mu.Lock()
	var victim *limitedConn
	if l.open >= l.max {
		front := l.waiting.Front()
		if front == nil {
			l.mu.Unlock()
			l.metrics.connectionClosed(closeRefused)
			_ = c.Close()
			return nil
		}
		victim = front.Value.(*limitedConn)
		l.forgetLocked(victim)
	}
	lc := &limitedConn{Conn: c, l: l}
	lc.elem = l.waiting.PushBack(lc)
	l.open++
	open := l.open
	l.mu.Unlock()
	if victim != nil {
		l.metrics.connectionClosed(closeEvicted)
		_ = victim.Conn.Close() // the server's read fails; its Close is then a no-op here
	}
	l.metrics.connectionsOpen(open)
	return lc
}

// forgetLocked takes c out of the count; false if it already was.
func (l *connLimiter) forgetLocked(c *limitedConn) bool {
	if c.closed {
		return false
	}
	c.closed = true
	if c.elem != nil {
		l.waiting.Remove(c.elem)
		c.elem = nil
	}
	l.open--
	return true
}

// serving marks c as serving a request (not evictable) or, when busy is
// false, as waiting for its next one (evictable, as the newest).
func (l *connLimiter) serving(c *limitedConn, busy bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case c.closed:
	case busy && c.elem != nil:
		l.waiting.Remove(c.elem)
		c.elem = nil
	case !busy && c.elem == nil:
		c.elem = l.waiting.PushBack(c)
	}
}

// Close implements net.Conn.
func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	forgot := c.l.forgetLocked(c)
	open := c.l.open
	c.l.mu.Unlock()
	if forgot {
		c.l.metrics.connectionsOpen(open)
	}
	return c.Conn.Close()
}

type connKey struct{}

// withConn is an http.Server's ConnContext: it makes a connection of a
// connLimiter (under TLS, the one the tls.Conn wraps) known to requests.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if lc, ok := c.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// requestConn is the connLimiter connection r arrived on, or nil.
func requestConn(ctx context.Context) *limitedConn {
	lc, _ := ctx.Value(connKey{}).(*limitedConn)
	return lc
}
