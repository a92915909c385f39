package destination_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/destination"
)

// listener accepts connections on loopback and counts them.
type listener struct {
	net.Listener
	accepted atomic.Int32
}

func listen(t *testing.T) *listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{Listener: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return l
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
	time.Sleep(100 * time.Millisecond)
	if n := l.accepted.Load(); n != 0 {
		t.Fatalf("the listener accepted %d connections: a forbidden address was dialled", n)
	}

	// Allowing loopback lets the same dials through.
	allowed, err := destination.ParseCIDRs("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	p = destination.New(destination.Options{Allowed: allowed, Resolver: dns})
	for _, host := range []string{"receiver.test", "127.0.0.1", "::ffff:127.0.0.1"} {
		conn, err := p.DialContext(ctx, "tcp", net.JoinHostPort(host, l.port()))
		if err != nil {
			t.Fatalf("dial %s with loopback allowed: %v", host, err)
		}
		_ = conn.Close()
	}
	// mixed.test still resolves to a forbidden address as well.
	if _, err := p.DialContext(ctx, "tcp", net.JoinHostPort("mixed.test", l.port())); err == nil {
		t.Error("mixed.test was dialled")
	}
	deadline := time.Now().Add(2 * time.Second)
	for l.accepted.Load() != 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := l.accepted.Load(); n != 3 {
		t.Errorf("the listener accepted %d connections, want 3", n)
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
