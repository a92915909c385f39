package httpapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNewServerHasTimeouts(t *testing.T) {
	s := NewServer(":8443", http.NotFoundHandler(), ServerOptions{})
	if s.Addr != ":8443" || s.Handler == nil || s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 ||
		s.WriteTimeout <= DefaultPublishTimeout || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= MaxRequestHeaderBytes {
		t.Errorf("server = %+v", s)
	}
}

// safetyDeadline ends a test's wait on a connection that the server
// failed to cut off; reaching it is a failure, never the expected outcome.
const safetyDeadline = 10 * time.Second

// startServer serves srv on a fresh 127.0.0.1 listener until the test
// ends and returns its address.
func startServer(t *testing.T, srv *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serving: %v", err)
		}
	})
	return ln.Addr().String()
}

// dial opens a raw connection to addr, closed when the test ends, whose
// reads and writes fail at the safety deadline.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	return from(t, "", addr)
}

// rawRequest is a GET whose request line and headers are exactly size
// bytes on the wire, padded with an X-Pad header.
func rawRequest(t *testing.T, size int) string {
	t.Helper()
	const head, tail = "GET /v1/x HTTP/1.1\r\nHost: example\r\nX-Pad: ", "\r\n\r\n"
	pad := size - len(head) - len(tail)
	if pad < 1 {
		t.Fatalf("a request of %d bytes cannot be padded", size)
	}
	return head + strings.Repeat("p", pad) + tail
}

// reached is an inner handler that answers 204 and records each request
// it is reached by.
type reached chan *http.Request

func (c reached) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c <- r
	w.WriteHeader(http.StatusNoContent)
}

func TestServerRefusesLargeHeadersAsJSON(t *testing.T) {
	inner := make(reached, 1)
	addr := startServer(t, NewServer("127.0.0.1:0", inner, ServerOptions{}))
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)

	t.Run("a 2 KiB bearer token passes", func(t *testing.T) {
		token := "Bearer " + strings.Repeat("t", 2<<10)
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent || len(inner) != 1 {
			t.Fatalf("status %d, inner handler reached %d times", resp.StatusCode, len(inner))
		}
		if got := (<-inner).Header.Get("Authorization"); got != token {
			t.Fatalf("the inner handler got an Authorization of %d bytes, want %d", len(got), len(token))
		}
	})

	t.Run("a 40 KiB header is a JSON 431", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Big", strings.Repeat("b", 40<<10))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var eb ErrorBody
		dec := json.NewDecoder(resp.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&eb); err != nil {
			t.Fatalf("status %d, body is not a JSON error: %v", resp.StatusCode, err)
		}
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || resp.Header.Get("Content-Type") != "application/json" ||
			eb.Error.Code != CodeHeaderTooLarge || eb.Error.Field != "" ||
			!strings.Contains(eb.Error.Message, strconv.Itoa(MaxRequestHeaderBytes)) {
			t.Fatalf("status %d, Content-Type %q, error %+v", resp.StatusCode, resp.Header.Get("Content-Type"), eb.Error)
		}
		if len(inner) != 0 {
			t.Fatal("a refused request reached the inner handler")
		}
	})
}

// TestServerHeaderLimitCountsTheWire: the limit is on the request line and
// headers exactly as sent, so MaxRequestHeaderBytes passes and one byte
// more is refused.
func TestServerHeaderLimitCountsTheWire(t *testing.T) {
	inner := make(reached, 1)
	addr := startServer(t, NewServer("127.0.0.1:0", inner, ServerOptions{}))
	for _, tt := range []struct {
		size int
		want int
	}{
		{MaxRequestHeaderBytes, http.StatusNoContent},
		{MaxRequestHeaderBytes + 1, http.StatusRequestHeaderFieldsTooLarge},
	} {
		conn := dial(t, addr)
		if _, err := io.WriteString(conn, rawRequest(t, tt.size)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%d bytes of headers: %v", tt.size, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%d bytes of headers: status %d, want %d", tt.size, resp.StatusCode, tt.want)
		}
		if tt.want == http.StatusNoContent {
			<-inner
		}
	}
}

// TestServerHardHeaderCapIsPlain pins the one refusal that is not JSON
// (see ServerMaxHeaderBytes): past the hard cap net/http answers before
// the handler runs.
func TestServerHardHeaderCapIsPlain(t *testing.T) {
	addr := startServer(t, NewServer("127.0.0.1:0", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("a request over the hard cap reached the handler")
	}), ServerOptions{}))
	conn := dial(t, addr)
	// net/http stops reading at the cap, so the write may never finish:
	// the answer is read concurrently. The cleanup's Close ends the write.
	req := rawRequest(t, ServerMaxHeaderBytes+(8<<10))
	go func() { _, _ = io.WriteString(conn, req) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestServerCutsOffSlowHeaders: a client that never finishes its headers
// loses the connection at ReadHeaderTimeout.
func TestServerCutsOffSlowHeaders(t *testing.T) {
	srv := newServer("127.0.0.1:0", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("a request without the end of its headers reached the handler")
	}), ServerOptions{}, serverTimeouts{readHeader: 200 * time.Millisecond, read: time.Minute, write: time.Minute, idle: time.Minute})
	conn := dial(t, startServer(t, srv))

	start := time.Now()
	if _, err := io.WriteString(conn, "POST /v1/acks/dlv_a HTTP/1.1\r\nHost: example\r\nContent-Type: app"); err != nil {
		t.Fatal(err)
	}
	// net/http hangs up without an answer: the read ends with EOF.
	got, err := io.ReadAll(conn)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatalf("the connection was still open after %s", safetyDeadline)
	case err != nil:
		t.Fatalf("reading: %v", err)
	case len(got) != 0:
		t.Fatalf("answered %q", got)
	}
	t.Logf("cut off after %s", time.Since(start))
}

// TestServerCutsOffSlowBody: a client that stops sending its body fails
// the handler's read at ReadTimeout and loses the connection.
func TestServerCutsOffSlowBody(t *testing.T) {
	type result struct {
		n   int
		err error
	}
	read := make(chan result, 1)
	srv := newServer("127.0.0.1:0", http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		read <- result{len(b), err}
	}), ServerOptions{}, serverTimeouts{readHeader: time.Minute, read: 500 * time.Millisecond, write: time.Minute, idle: time.Minute})
	conn := dial(t, startServer(t, srv))

	start := time.Now()
	req := "POST /v1/acks/dlv_a HTTP/1.1\r\nHost: example\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n" +
		`{"delivery` // 10 bytes of 1000
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	// Whatever the server answers, it must then hang up.
	if _, err := io.ReadAll(conn); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection was still open after %s", safetyDeadline)
	} else if err != nil {
		t.Fatalf("reading: %v", err)
	}
	t.Logf("cut off after %s", time.Since(start))

	select {
	case res := <-read:
		if ne, ok := errors.AsType[net.Error](res.err); !ok || !ne.Timeout() || res.n != 10 {
			t.Fatalf("the handler read %d bytes, then %v; want 10, then a timeout", res.n, res.err)
		}
	default:
		t.Fatal("the connection closed before the handler's read ended")
	}
}

// TestSlowPublishBodyIsRequestTimeout: the API's own answer to a body cut
// off by the read timeout is a coded JSON 408, not a JSON syntax error.
func TestSlowPublishBodyIsRequestTimeout(t *testing.T) {
	e := newEnv(t)
	srv := newServer("127.0.0.1:0", e.h, ServerOptions{}, serverTimeouts{readHeader: time.Minute, read: 500 * time.Millisecond, write: time.Minute, idle: time.Minute})
	conn := dial(t, startServer(t, srv))
	req := "POST /v1/namespaces/" + ns + "/events HTTP/1.1\r\nHost: example\r\nAuthorization: Bearer " + goodToken +
		"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n" + `{"type":"a"` // 11 bytes of 1000
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("no answer within %s", safetyDeadline)
	} else if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	var body ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("decoding the answer: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout || body.Error.Code != CodeRequestTimeout {
		t.Fatalf("answer = %d %+v, want 408 %s", resp.StatusCode, body.Error, CodeRequestTimeout)
	}
	if p := e.pub.last(); p != nil {
		t.Errorf("a cut-off body reached the publisher: %+v", p)
	}
}
