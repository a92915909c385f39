package destination_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/destination"
)

// listener accepts connections on loopback and reports the remote address
// of each, in the order they were accepted.
type listener struct {
	net.Listener
	accepted chan string
}

func listen(t *testing.T) *listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{Listener: ln, accepted: make(chan string, 64)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted <- c.RemoteAddr().String()
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return l
}

// next returns the remote address of the next accepted connection.
func (l *listener) next(t *testing.T) string {
	t.Helper()
	select {
	case addr := <-l.accepted:
		return addr
	case <-time.After(30 * time.Second):
		t.Fatal("the listener accepted no connection within 30s")
		return ""
	}
}

// sentinel connects to the listener directly and waits for it to be
// accepted: connections are accepted in the order they were established,
// so any connection made before it has been reported by then.
func (l *listener) sentinel(t *testing.T) []string {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var before []string
	for {
		addr := l.next(t)
		if addr == c.LocalAddr().String() {
			return before
		}
		before = append(before, addr)
	}
}

func (l *listener) port() string {
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

func TestDialRefusesBeforeConnecting(t *testing.T) {
	l := listen(t)
	dns := fakeResolver{
		"metadata.test": addrs("169.254.169.254"),
		"receiver.test": addrs("127.0.0.1"),
		// A forbidden address first, then the listener: refused as a whole.
		"mixed.test": addrs("169.254.169.254", "127.0.0.1"),
	}
	p := destination.New(destination.Options{Resolver: dns})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, host := range []string{"metadata.test", "receiver.test", "mixed.test", "127.0.0.1", "::ffff:127.0.0.1", "169.254.169.254"} {
		conn, err := p.DialContext(ctx, "tcp", net.JoinHostPort(host, l.port()))
		var fe *destination.ForbiddenError
		if !errors.As(err, &fe) {
			if conn != nil {
				_ = conn.Close()
			}
			t.Errorf("dial %s: %v, want a ForbiddenError", host, err)
		}
	}
	if got := l.sentinel(t); len(got) != 0 {
		t.Fatalf("the listener accepted connections from %v: a forbidden address was dialled", got)
	}

	// Allowing loopback lets the same dials through.
	allowed, err := destination.ParseCIDRs("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	p = destination.New(destination.Options{Allowed: allowed, Resolver: dns})
	var dialled []string
	for _, host := range []string{"receiver.test", "127.0.0.1", "::ffff:127.0.0.1"} {
		conn, err := p.DialContext(ctx, "tcp", net.JoinHostPort(host, l.port()))
		if err != nil {
			t.Fatalf("dial %s with loopback allowed: %v", host, err)
		}
		dialled = append(dialled, conn.LocalAddr().String())
		_ = conn.Close()
	}
	// mixed.test still resolves to a forbidden address as well.
	if _, err := p.DialContext(ctx, "tcp", net.JoinHostPort("mixed.test", l.port())); err == nil {
		t.Error("mixed.test was dialled")
	}
	if got := l.sentinel(t); !slices.Equal(got, dialled) {
		t.Errorf("the listener accepted connections from %v, want the three allowed dials %v", got, dialled)
	}
}

// A name with several allowed addresses is tried address by address: the
// first, which refuses connections, does not make the dial fail.
func TestDialTriesEachAddress(t *testing.T) {
	l := listen(t)
	// A port on 127.0.0.2 nobody listens on (refused at once), then the
	// listener.
	dns := fakeResolver{"two.test": addrs("127.0.0.2", "127.0.0.1")}
	allowed, _ := destination.ParseCIDRs("127.0.0.0/8")
	p := destination.New(destination.Options{Allowed: allowed, Resolver: dns})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := p.DialContext(ctx, "tcp", net.JoinHostPort("two.test", l.port()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	if got := conn.RemoteAddr().(*net.TCPAddr).AddrPort().Addr(); got != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("connected to %s", got)
	}
}

func TestDialRejectsOtherNetworks(t *testing.T) {
	p := destination.New(destination.Options{})
	if _, err := p.DialContext(context.Background(), "udp", "93.184.215.14:53"); err == nil {
		t.Error("udp was dialled")
	}
}
