package httpapi

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// longTimeouts keep net/http's own timeouts out of the way: a connection
// closed within the safety deadline was closed by the limits under test.
var longTimeouts = serverTimeouts{readHeader: time.Minute, read: time.Minute, write: time.Minute, idle: time.Minute}

// limitedServer starts a server with opts (and a fresh registry for its
// metrics) and returns its address and metrics.
func limitedServer(t *testing.T, h http.Handler, opts ServerOptions) (string, *serverMetrics) {
	t.Helper()
	opts.Registerer = prometheus.NewRegistry()
	srv := newServer("127.0.0.1:0", h, opts, longTimeouts)
	return startServer(t, srv), srv.metrics
}

// readToClose reads conn until the server closes it and returns what it
// answered; reaching the safety deadline fails the test.
func readToClose(t *testing.T, conn net.Conn) string {
	t.Helper()
	got, err := io.ReadAll(conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server still held the connection after %s (answered %q)", safetyDeadline, got)
	}
	return string(got)
}

// TestServerClosesWhatItAnswersUnread: every answer sent before the
// request's body was read (a refusal of any kind) ends the connection at
// once, rather than leaving it held until the read timeout while net/http
// waits for the rest of a body the client does not send.
func TestServerClosesWhatItAnswersUnread(t *testing.T) {
	e := newEnv(t)
	addr, _ := limitedServer(t, e.h, ServerOptions{})
	cases := []struct {
		name   string
		head   string
		status int
	}{
		{"unauthenticated", "POST /v1/namespaces/" + ns + "/events HTTP/1.1\r\nContent-Type: application/json\r\n", http.StatusUnauthorized},
		{"wrong content type", "POST /v1/namespaces/" + ns + "/events HTTP/1.1\r\nAuthorization: Bearer " + goodToken + "\r\nContent-Type: text/plain\r\n", http.StatusUnsupportedMediaType},
		{"bad namespace", "POST /v1/namespaces/NO/events HTTP/1.1\r\nAuthorization: Bearer " + goodToken + "\r\nContent-Type: application/json\r\n", http.StatusBadRequest},
		{"unknown path", "POST /v1/nothing HTTP/1.1\r\n", http.StatusNotFound},
		{"wrong method", "PUT /v1/namespaces/" + ns + "/events HTTP/1.1\r\n", http.StatusMethodNotAllowed},
		{"body too large", "POST /v1/namespaces/" + ns + "/events HTTP/1.1\r\nAuthorization: Bearer " + goodToken + "\r\nContent-Type: application/json\r\nIdempotency-Key: k\r\n", http.StatusRequestEntityTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn := dial(t, addr)
			length := 200_000 // below net/http's own give-up point (256 KiB)
			if tc.status == http.StatusRequestEntityTooLarge {
				length = DefaultMaxBodyBytes + 1
			}
			req := tc.head + "Host: api\r\nContent-Length: " + strconv.Itoa(length) + "\r\n\r\n" + `{"type":"a.b","data":{"pad":"xxxxxxxx`
			if _, err := io.WriteString(conn, req); err != nil {
				t.Fatal(err)
			}
			answer := readToClose(t, conn)
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(answer)), nil)
			if err != nil {
				t.Fatalf("reading the answer %q: %v", answer, err)
			}
			if resp.StatusCode != tc.status || !resp.Close {
				t.Fatalf("answered %d (Connection: %q), want %d with Connection: close", resp.StatusCode, resp.Header.Get("Connection"), tc.status)
			}
		})
	}

	t.Run("a request whose body was read keeps its connection", func(t *testing.T) {
		conn := dial(t, addr)
		body := `{"type":"a.b","data":{}}`
		req := "POST /v1/namespaces/" + ns + "/events HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer " + goodToken +
			"\r\nContent-Type: application/json\r\nIdempotency-Key: kept\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		br := bufio.NewReader(conn)
		for i := range 2 {
			if _, err := io.WriteString(conn, req); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode >= 300 || resp.Close {
				t.Fatalf("request %d: answered %d, Connection: %q", i, resp.StatusCode, resp.Header.Get("Connection"))
			}
		}
	})
}

// TestConnectionCapEvictsStalledClients: at the cap, a new connection
// closes the oldest one that is not serving a request, so clients stalled
// mid-headers cannot keep a publisher out.
func TestConnectionCapEvictsStalledClients(t *testing.T) {
	g := gomega.NewWithT(t)
	inner := make(reached, 10)
	addr, m := limitedServer(t, inner, ServerOptions{MaxConnections: 3})
	open := func() float64 { return testutil.ToFloat64(m.open) }
	var stalled []net.Conn
	stall := func() {
		t.Helper()
		conn := dial(t, addr)
		if _, err := fmt.Fprintf(conn, "GET /v1/x HTTP/1.1\r\nHost: api\r\nX-Stall-%d: ", len(stalled)); err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, conn)
		// Admitted before the next, so that the order of age is known.
		g.Eventually(open).WithTimeout(safetyDeadline).Should(gomega.BeEquivalentTo(3))
	}
	for range 3 {
		conn := dial(t, addr)
		if _, err := fmt.Fprintf(conn, "GET /v1/x HTTP/1.1\r\nHost: api\r\nX-Stall-%d: ", len(stalled)); err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, conn)
		g.Eventually(open).WithTimeout(safetyDeadline).Should(gomega.BeEquivalentTo(len(stalled)))
	}

	for i := range 3 {
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Get("http://" + addr + "/v1/x")
		if err != nil {
			t.Fatalf("request %d at the cap: %v", i, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("request %d at the cap: answered %d", i, resp.StatusCode)
		}
		// It evicted the oldest stalled connection, and only that one.
		if got := readToClose(t, stalled[i]); got != "" {
			t.Fatalf("the evicted connection was answered %q", got)
		}
		g.Eventually(open).WithTimeout(safetyDeadline).Should(gomega.BeEquivalentTo(2))
		stall()
	}
	if got := testutil.ToFloat64(m.closed.WithLabelValues(closeEvicted)); got != 3 {
		t.Errorf("evicted = %v, want 3", got)
	}
	for _, conn := range stalled[3:] {
		_ = conn.Close()
	}
	g.Eventually(open).WithTimeout(safetyDeadline).Should(gomega.BeEquivalentTo(0))
}

// TestConnectionCapRefusesWhenAllServe: when every connection is serving
// a request, a new one is closed unanswered, and admitted again once one
// is free.
func TestConnectionCapRefusesWhenAllServe(t *testing.T) {
	g := gomega.NewWithT(t)
	entered, release := make(chan struct{}, 2), make(chan struct{})
	addr, m := limitedServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
		w.WriteHeader(http.StatusNoContent)
	}), ServerOptions{MaxConnections: 2})
	var busy []net.Conn
	for range 2 {
		conn := dial(t, addr)
		if _, err := io.WriteString(conn, "GET /v1/x HTTP/1.1\r\nHost: api\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		<-entered
		busy = append(busy, conn)
	}

	refused := dial(t, addr)
	_, _ = io.WriteString(refused, "GET /v1/x HTTP/1.1\r\nHost: api\r\n\r\n")
	if got := readToClose(t, refused); got != "" {
		t.Fatalf("a connection over the cap was answered %q", got)
	}
	if got := testutil.ToFloat64(m.closed.WithLabelValues(closeRefused)); got != 1 {
		t.Errorf("refused = %v, want 1", got)
	}

	close(release)
	for _, conn := range busy {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("a request being served when the cap was reached: %v, %v", resp, err)
		}
		_ = conn.Close()
	}
	g.Eventually(func() float64 { return testutil.ToFloat64(m.open) }).WithTimeout(safetyDeadline).Should(gomega.BeEquivalentTo(0))
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr + "/v1/x")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
}

// TestBodyBudgetRefusesWhatDoesNotFit: request bodies in progress are
// counted at their declared length (the most the API reads, when
// undeclared); one that does not fit in what is left is answered 503 at
// once, and one that fits is served.
func TestBodyBudgetRefusesWhatDoesNotFit(t *testing.T) {
	entered := make(chan struct{}, 1)
	addr, m := limitedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			entered <- struct{}{}
		}
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}), ServerOptions{MaxBodyBytesInFlight: 1000, MaxBodyBytes: 600})

	// 800 bytes declared, 10 sent: held in the handler's read.
	holder := dial(t, addr)
	if _, err := io.WriteString(holder, "POST /v1/x HTTP/1.1\r\nHost: api\r\nX-Hold: 1\r\nContent-Length: 800\r\n\r\n0123456789"); err != nil {
		t.Fatal(err)
	}
	<-entered
	if got := testutil.ToFloat64(m.reserved); got != 600 {
		t.Errorf("reserved = %v, want 600 (the declared 800, capped at the largest body read)", got)
	}

	post := func(body string, chunked bool) *http.Response {
		t.Helper()
		conn := dial(t, addr)
		head := "POST /v1/x HTTP/1.1\r\nHost: api\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		if chunked {
			head = "POST /v1/x HTTP/1.1\r\nHost: api\r\nTransfer-Encoding: chunked\r\n\r\n" +
				strconv.FormatInt(int64(len(body)), 16) + "\r\n" + body + "\r\n0\r\n\r\n"
		}
		if _, err := io.WriteString(conn, head); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post(string(make([]byte, 401)), false)
	var body ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || body.Error.Code != CodeUnavailable ||
		resp.Header.Get("Retry-After") == "" || !resp.Close {
		t.Fatalf("a body over what is left: %d %+v, Retry-After %q, close %v; want 503 %s with Retry-After, closing",
			resp.StatusCode, body.Error, resp.Header.Get("Retry-After"), resp.Close, CodeUnavailable)
	}
	if resp := post("x", true); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a chunked body of 1 byte (counted at the 600 it may grow to, which do not fit): answered %d", resp.StatusCode)
	}
	if resp := post(string(make([]byte, 400)), false); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("a body that fits: answered %d", resp.StatusCode)
	}
	if got := testutil.ToFloat64(m.refused.WithLabelValues(refuseBodies)); got != 2 {
		t.Errorf("refused = %v, want 2", got)
	}
}

// TestConnectionCapSeesThroughTLS: under TLS the server's connections are
// tls.Conns around the limiter's; requests must still mark theirs as
// serving, or the cap would evict connections in the middle of a request.
func TestConnectionCapSeesThroughTLS(t *testing.T) {
	tlsSource := httptest.NewUnstartedServer(nil)
	tlsSource.StartTLS()
	client := tlsSource.Client()
	cert := tlsSource.TLS.Certificates
	tlsSource.Close()

	tracked := make(chan bool, 1)
	srv := newServer("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tracked <- requestConn(r.Context()) != nil
		w.WriteHeader(http.StatusNoContent)
	}), ServerOptions{}, longTimeouts)
	srv.TLSConfig = &tls.Config{Certificates: cert, MinVersion: tls.VersionTLS12}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	resp, err := client.Get("https://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if !<-tracked {
		t.Fatal("a request over TLS was not tied to its limited connection")
	}
}
