package httpapi

import (
	"container/list"
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"sync"
)

// Reasons the connection cap closes a connection, as metric labels, beside
// closeRefused and closeEvicted (the global cap).
const (
	closeSourceRefused = "source_refused" // a new connection from a source at its cap, all of whose unproven connections serve requests
	closeSourceEvicted = "source_evicted" // a source's oldest unproven connection, closed for the same source's new one
)

// connLimiter is a net.Listener that keeps at most max connections open,
// so that what clients make the server hold (buffered headers, a goroutine,
// a file descriptor per connection) stays bounded however many connect,
// and that sorts connections into two lanes, as the token reviews are
// (docs/adr/0016):
//
//   - proven: a request on the connection authenticated (see
//     limitedConn.prove). A proven connection is never closed to make room
//     for another: its owner is a known caller, and closing it is what made
//     keep-alive publishers fail with EOF under a flood.
//   - unproven: everything else (still sending its first headers, or only
//     refused requests so far). A source address (an IPv6 one by its /64)
//     holds at most maxUnproven of them: a new one beyond closes that
//     source's oldest unproven connection not serving a request, or is
//     refused when all serve one. At the global cap, a new connection
//     closes the oldest unproven connection not serving a request of the
//     source holding the most such connections, or is refused when there
//     is none. So one address (or a few) stalling connections mid-headers
//     only evicts its own, and a publisher's new connection from another
//     address is not pushed out before its headers arrive.
//
// A refused connection is closed as soon as it is accepted, which costs
// nothing but the accept.
type connLimiter struct {
	net.Listener
	max         int
	maxUnproven int // per source
	metrics     *serverMetrics

	mu      sync.Mutex
	open    int
	sources map[string]*connSource // sources with an open connection
}

// connSource is what a connLimiter knows of one source address.
type connSource struct {
	key      string
	open     int // open connections, proven or not
	unproven int // open connections not proven
	// waiting holds the unproven connections not serving a request, oldest
	// first: those eviction may close.
	waiting list.List
}

// limitedConn is a connection of a connLimiter.
type limitedConn struct {
	net.Conn
	l   *connLimiter
	src *connSource
	// Guarded by l.mu: elem is its place in src.waiting (nil while serving a
	// request or once proven), proven whether a request on it
	// authenticated, closed whether it has left the count.
	elem   *list.Element
	proven bool
	closed bool
}

func newConnLimiter(ln net.Listener, maxConns, maxUnprovenPerSource int, m *serverMetrics) *connLimiter {
	return &connLimiter{Listener: ln, max: maxConns, maxUnproven: maxUnprovenPerSource, metrics: m,
		sources: make(map[string]*connSource)}
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

// admit counts c in, evicting a connection when its source or the
// listener is at its cap, or closes c and returns nil when no connection
// may be evicted for it.
func (l *connLimiter) admit(c net.Conn) *limitedConn {
	key := connSourceOf(c.RemoteAddr())
	l.mu.Lock()
	src := l.sources[key]
	if src == nil {
		src = &connSource{key: key}
		l.sources[key] = src
	}
	var victim *limitedConn
	reason := ""
	switch {
	case src.unproven >= l.maxUnproven:
		victim, reason = oldestWaiting(src), closeSourceEvicted
		if victim == nil {
			reason = closeSourceRefused
		}
	case l.open >= l.max:
		victim, reason = l.mostUnprovenLocked(), closeEvicted
		if victim == nil {
			reason = closeRefused
		}
	}
	if reason != "" && victim == nil {
		if src.open == 0 {
			delete(l.sources, key)
		}
		l.mu.Unlock()
		l.metrics.connectionClosed(reason)
		_ = c.Close()
		return nil
	}
	if victim != nil {
		l.forgetLocked(victim)
		l.sources[key] = src // forgetting the victim may have dropped its source, src
	}
	lc := &limitedConn{Conn: c, l: l, src: src}
	lc.elem = src.waiting.PushBack(lc)
	src.open++
	src.unproven++
	l.open++
	open := l.open
	l.mu.Unlock()
	if victim != nil {
		l.metrics.connectionClosed(reason)
		_ = victim.Conn.Close() // the server's read fails; its Close is then a no-op here
	}
	l.metrics.connectionsOpen(open)
	return lc
}

func oldestWaiting(src *connSource) *limitedConn {
	if front := src.waiting.Front(); front != nil {
		return front.Value.(*limitedConn)
	}
	return nil
}

// mostUnprovenLocked is the oldest evictable connection of the source
// holding the most evictable connections, or nil. It looks at every
// source: there are at most as many as open connections.
func (l *connLimiter) mostUnprovenLocked() *limitedConn {
	var most *connSource
	for _, src := range l.sources {
		if n := src.waiting.Len(); n > 0 && (most == nil || n > most.waiting.Len()) {
			most = src
		}
	}
	if most == nil {
		return nil
	}
	return oldestWaiting(most)
}

// forgetLocked takes c out of the count; false if it already was.
func (l *connLimiter) forgetLocked(c *limitedConn) bool {
	if c.closed {
		return false
	}
	c.closed = true
	if c.elem != nil {
		c.src.waiting.Remove(c.elem)
		c.elem = nil
	}
	if !c.proven {
		c.src.unproven--
	}
	c.src.open--
	if c.src.open == 0 {
		delete(l.sources, c.src.key)
	}
	l.open--
	return true
}

// serving marks c as serving a request (not evictable) or, when busy is
// false, as waiting for its next one (evictable, as the newest of its
// source, unless proven).
func (l *connLimiter) serving(c *limitedConn, busy bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case c.closed:
	case busy && c.elem != nil:
		c.src.waiting.Remove(c.elem)
		c.elem = nil
	case !busy && c.elem == nil && !c.proven:
		c.elem = c.src.waiting.PushBack(c)
	}
}

// prove moves c to the proven lane: a request on it authenticated.
func (c *limitedConn) prove() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.closed || c.proven {
		return
	}
	c.proven = true
	c.src.unproven--
	if c.elem != nil {
		c.src.waiting.Remove(c.elem)
		c.elem = nil
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

// connSourceOf is the source a connection is limited as: its peer's IP
// address, an IPv6 one by its /64 (one host usually holds a whole /64).
// Forwarding headers are not looked at: anyone can send them, and the cap
// acts before any header is read.
func connSourceOf(a net.Addr) string {
	var addr netip.Addr
	switch a := a.(type) {
	case *net.TCPAddr:
		addr, _ = netip.AddrFromSlice(a.IP)
	default:
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			addr = ap.Addr()
		}
	}
	if !addr.IsValid() {
		return a.String()
	}
	addr = addr.Unmap().WithZone("")
	if addr.Is4() {
		return addr.String()
	}
	p, _ := addr.Prefix(64)
	return p.String()
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
