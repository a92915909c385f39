package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/credential"
	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// writeCounter counts the writes of the connections its dialer opens, by
// remote address.
type writeCounter struct {
	mu     sync.Mutex
	writes map[string]int
}

func (wc *writeCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, wc: wc, addr: addr}, nil
}

func (wc *writeCounter) count(addr string) int {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	return wc.writes[addr]
}

type countedConn struct {
	net.Conn
	wc   *writeCounter
	addr string
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.wc.mu.Lock()
	c.wc.writes[c.addr]++
	c.wc.mu.Unlock()
	return c.Conn.Write(p)
}

// An attempt whose headers and envelope fit the transport's write buffer
// (4 KiB) reaches the receiver in one write: one system call and one TCP
// segment, read at once. net/http flushes the headers on their own before
// a body it does not know to be in memory, so this holds for every kind of
// request the sender makes: with static headers and each credential, and
// the resend after an OAuth2 token is refused.
func TestSendWritesEachRequestAtOnce(t *testing.T) {
	wc := &writeCounter{writes: map[string]int{}}
	tr := dispatch.NewTransport()
	tr.DialContext = wc.dial
	sender := func() *dispatch.Sender {
		s := fixedSender()
		s.Client = &http.Client{Transport: tr}
		return s
	}
	withData := func(req dispatch.Request, n int) dispatch.Request {
		data, err := json.Marshal(map[string]string{"pad": strings.Repeat("x", n)})
		if err != nil {
			t.Fatal(err)
		}
		req.Data = data
		return req
	}
	// sends makes three attempts of req, asserting that each answers
	// status and puts requests requests before rc, each in one write.
	sends := func(t *testing.T, s *dispatch.Sender, rc *receiver, req dispatch.Request, requests, status int) {
		t.Helper()
		addr := strings.TrimPrefix(rc.URL, "http://")
		for i := range 3 {
			before, n := wc.count(addr), len(rc.requests())
			if res := s.Send(context.Background(), req); res.Err != nil || res.StatusCode != status {
				t.Fatalf("attempt %d: result %+v, want %d", i, res, status)
			}
			if got := len(rc.requests()) - n; got != requests {
				t.Fatalf("attempt %d: %d requests reached the receiver, want %d", i, got, requests)
			}
			if got := wc.count(addr) - before; got != requests {
				t.Errorf("attempt %d: %d writes for %d requests of %d-byte envelopes, want one each", i, got, requests, len(rc.requests()[n].body))
			}
		}
	}

	for _, size := range []int{0, 1 << 10, 3 << 10} {
		t.Run(fmt.Sprintf("data of %d bytes", size), func(t *testing.T) {
			rc := newReceiver(t, nil)
			sends(t, sender(), rc, withData(signedRequest(t, rc.URL, mustSecret(t)), size), 1, http.StatusNoContent)
		})
	}
	creds := map[string]*credential.Set{
		"header credential": {Headers: []credential.Header{{Name: "X-Api-Key", Value: sensitive.Bytes("key-1")}}},
		"basic":             {Basic: &credential.Basic{Username: sensitive.Bytes("user"), Password: sensitive.Bytes("pass")}},
		"bearer":            {Bearer: sensitive.Bytes("token-1")},
	}
	for name, set := range creds {
		t.Run(name, func(t *testing.T) {
			rc := newReceiver(t, nil)
			s := sender()
			req := withData(credRequest(t, s, rc.URL, "ns/"+strings.ReplaceAll(name, " ", "-"), set, wire.Header{Name: "X-Tenant", Value: "a"}), 1<<10)
			sends(t, s, rc, req, 1, http.StatusNoContent)
		})
	}
	t.Run("oauth2 resend after a refused token", func(t *testing.T) {
		ts := newTokenServer(t, "client-id-1", "client-secret-1", 3600)
		var refuse atomic.Bool
		rc := bearerReceiver(t, func(string) bool { return !refuse.Load() })
		s := sender()
		req := withData(credRequest(t, s, rc.URL, "ns/oauth", oauthSet(ts.URL+"/token", "client-id-1", "client-secret-1")), 1<<10)
		sends(t, s, rc, req, 1, http.StatusNoContent)
		// Every token refused from now on: each attempt is sent, refused
		// and resent once with a new token (the request's GetBody).
		refuse.Store(true)
		sends(t, s, rc, req, 2, http.StatusUnauthorized)
	})
}
