package pgtest

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
)

// Outage is the test server as a store sees it through a TCP relay on
// loopback that the test can cut: a real PostgreSQL that becomes
// unreachable the way a crashed or partitioned one does, its connections
// reset under the store and new ones refused.
type Outage struct {
	ln    net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	cut   bool
}

// OpenOutageStore opens a store on a fresh schema through a relay, and
// returns it with the relay. Both close when the test ends.
func OpenOutageStore(t testing.TB, opts ...postgres.Option) (*postgres.Store, *Outage) {
	t.Helper()
	u, err := url.Parse(DSN(t))
	if err != nil {
		t.Fatalf("parsing %s: %v", EnvDSN, err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &Outage{ln: ln, conns: map[net.Conn]struct{}{}}
	go o.serve(target)
	t.Cleanup(o.Cut)
	u.Host = ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := NewSchema(t)
	s, err := postgres.Open(ctx, u.String(), append([]postgres.Option{postgres.WithSchema(schema)}, opts...)...)
	if err != nil {
		t.Fatalf("open PostgreSQL ledger through the relay: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, o
}

// Cut makes the server unreachable: it stops accepting (new connections
// are refused) and closes every relayed connection (those open are reset).
func (o *Outage) Cut() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cut {
		return
	}
	o.cut = true
	_ = o.ln.Close()
	for c := range o.conns {
		_ = c.Close()
	}
}

func (o *Outage) serve(target string) {
	for {
		c, err := o.ln.Accept()
		if err != nil {
			return
		}
		go o.relay(c, target)
	}
}

// relay copies between c and a new connection to target until either
// side closes or the relay is cut.
func (o *Outage) relay(c net.Conn, target string) {
	s, err := net.Dial("tcp", target)
	if err != nil {
		_ = c.Close()
		return
	}
	if !o.track(c, s) {
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(s, c)
	go pipe(c, s)
	<-done
	_ = c.Close()
	_ = s.Close()
	<-done
	o.mu.Lock()
	delete(o.conns, c)
	delete(o.conns, s)
	o.mu.Unlock()
}

// track registers both ends, or closes them when the relay is cut.
func (o *Outage) track(conns ...net.Conn) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cut {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		o.conns[c] = struct{}{}
	}
	return true
}

// Committer publishes straight into Store, one event per transaction: a
// publish core's committer (publish.Committer) without the engine.
type Committer struct{ Store *postgres.Store }

// Publish inserts p.
func (c Committer) Publish(ctx context.Context, p *ledger.EventInsertParams) (ledger.EventInsertResult, error) {
	res, err := c.Store.EventInsertMany(ctx, []*ledger.EventInsertParams{p})
	if err != nil {
		return ledger.EventInsertResult{}, err
	}
	return res[0], nil
}
