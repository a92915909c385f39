package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// received is one request as a test receiver saw it.
type received struct {
	method string
	header http.Header
	body   []byte
	// clientCN is the common name of the client certificate, over TLS.
	clientCN string
}

// receiver is a loopback HTTP server that records requests and answers
// with respond (204 when nil).
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	got     []received
	conns   atomic.Int32
	closed  atomic.Int32
	respond func(w http.ResponseWriter, r *http.Request)
}

func newReceiver(t *testing.T, respond func(w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := newUnstartedReceiver(t, respond)
	rc.Start()
	t.Cleanup(rc.Close)
	return rc
}

func newUnstartedReceiver(t *testing.T, respond func(w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{respond: respond}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("receiver: reading body: %v", err)
		}
		got := received{method: r.Method, header: r.Header.Clone(), body: body}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			got.clientCN = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		rc.mu.Lock()
		rc.got = append(rc.got, got)
		rc.mu.Unlock()
		if rc.respond != nil {
			rc.respond(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	rc.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			rc.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			rc.closed.Add(1)
		}
	}
	return rc
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

var testNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func fixedSender() *dispatch.Sender {
	s := dispatch.NewSender()
	s.Now = func() time.Time { return testNow }
	return s
}

func mustSecret(t testing.TB) sensitive.Bytes {
	t.Helper()
	s, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func signedRequest(t testing.TB, target string, secrets ...sensitive.Bytes) dispatch.Request {
	t.Helper()
	req := baseRequest()
	req.URL = target
	req.SigningSecrets = secrets
	req.Timeout = 10 * time.Second
	return req
}

func TestSendHeadersEnvelopeSignature(t *testing.T) {
	rc := newReceiver(t, nil)
	oldSecret, newSecret := mustSecret(t), mustSecret(t)
	req := signedRequest(t, rc.URL+"/hooks", oldSecret, newSecret)
	req.Secrets = sensitive.Bytes(`{"confirm":"tok-123"}`)
	req.Headers = []wire.Header{
		{Name: "Authorization", Value: "Bearer static"},
		{Name: "X-Tenant", Value: "a"},
		{Name: "X-Tenant", Value: "b"},
	}
	res := fixedSender().Send(context.Background(), req)
	if res.Err != nil || res.StatusCode != http.StatusNoContent || res.Class != dispatch.None {
		t.Fatalf("result %+v", res)
	}
	if !res.Start.Equal(testNow) || res.Duration <= 0 {
		t.Errorf("start %v duration %v", res.Start, res.Duration)
	}
	got := rc.requests()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	r := got[0]
	wantHeaders := map[string]string{
		"Content-Type":      "application/json",
		"User-Agent":        dispatch.DefaultUserAgent,
		"Webhook-Id":        req.EventID,
		"Webhook-Timestamp": strconv.FormatInt(testNow.Unix(), 10),
		"Authorization":     "Bearer static",
		"Content-Length":    strconv.Itoa(len(r.body)),
	}
	for k, v := range wantHeaders {
		if got := r.header.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("header %s = %q, want [%q]", k, got, v)
		}
	}
	if got := r.header.Values("X-Tenant"); strings.Join(got, ",") != "a,b" {
		t.Errorf("X-Tenant = %q", got)
	}
	if !strings.HasPrefix(dispatch.DefaultUserAgent, "hookkeeper/") {
		t.Errorf("user agent %q", dispatch.DefaultUserAgent)
	}
	if r.method != http.MethodPost {
		t.Errorf("method %s", r.method)
	}

	// The body is the envelope, secrets merged; they appear nowhere else.
	want, err := dispatch.Envelope(req)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.body) != string(want) {
		t.Errorf("body\n got %s\nwant %s", r.body, want)
	}
	var env envelope
	if err := json.Unmarshal(r.body, &env); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(env.Data), `"confirm":"tok-123"`) {
		t.Errorf("data %s lacks the merged secret", env.Data)
	}
	for k, vs := range r.header {
		if strings.Contains(strings.Join(vs, " "), "tok-123") {
			t.Errorf("header %s carries the event's secret", k)
		}
	}

	// Signed with both secrets: a receiver knowing either one accepts it.
	sig := r.header.Get("Webhook-Signature")
	if n := len(strings.Fields(sig)); n != 2 {
		t.Errorf("signature header has %d entries, want 2", n)
	}
	for _, s := range []sensitive.Bytes{oldSecret, newSecret} {
		if err := signing.Verify([]sensitive.Bytes{s}, r.header.Get("Webhook-Id"), r.header.Get("Webhook-Timestamp"), sig, r.body, testNow, time.Minute); err != nil {
			t.Errorf("verify: %v", err)
		}
	}
	if err := signing.Verify([]sensitive.Bytes{mustSecret(t)}, r.header.Get("Webhook-Id"), r.header.Get("Webhook-Timestamp"), sig, r.body, testNow, time.Minute); !errors.Is(err, signing.ErrNoMatchingSignature) {
		t.Errorf("verify with another secret: %v", err)
	}
}

func TestSendRetryKeepsIDAndRenewsTimestamp(t *testing.T) {
	rc := newReceiver(t, nil)
	secret := mustSecret(t)
	s := dispatch.NewSender()
	clock := testNow
	s.Now = func() time.Time { return clock }
	req := signedRequest(t, rc.URL, secret)
	s.Send(context.Background(), req)
	clock = clock.Add(90 * time.Second)
	s.Send(context.Background(), req)
	got := rc.requests()
	if len(got) != 2 {
		t.Fatalf("%d requests", len(got))
	}
	if a, b := got[0].header.Get("Webhook-Id"), got[1].header.Get("Webhook-Id"); a != b || a != req.EventID {
		t.Errorf("webhook-id %q then %q, want %q twice", a, b, req.EventID)
	}
	if a, b := got[0].header.Get("Webhook-Timestamp"), got[1].header.Get("Webhook-Timestamp"); a == b {
		t.Errorf("webhook-timestamp %q twice", a)
	}
	for i, r := range got {
		if err := signing.Verify([]sensitive.Bytes{secret}, r.header.Get("Webhook-Id"), r.header.Get("Webhook-Timestamp"), r.header.Get("Webhook-Signature"), r.body, clock, 5*time.Minute); err != nil {
			t.Errorf("attempt %d: %v", i+1, err)
		}
	}
}

func TestSendTimeout(t *testing.T) {
	release := make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	req := signedRequest(t, rc.URL+"/?token=QUERYSECRET", mustSecret(t))
	req.Timeout = 100 * time.Millisecond
	res := fixedSender().Send(context.Background(), req)
	if res.Class != dispatch.Timeout || res.StatusCode != 0 || res.Err == nil {
		t.Fatalf("result %+v, want a Timeout", res)
	}
	if !errors.Is(res.Err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap context.DeadlineExceeded", res.Err)
	}
	if res.Duration < req.Timeout || res.Duration > 5*time.Second {
		t.Errorf("duration %v for a %v timeout", res.Duration, req.Timeout)
	}
	t.Logf("error: %v", res.Err)
	assertRedacted(t, res.Err, "QUERYSECRET")
	if dispatch.Classify(res, []string{"Timeout"}) != dispatch.Retry {
		t.Error("a listed timeout is not retried")
	}
}

// A receiver that answers, then stalls its body: the status stands and the
// attempt still ends at the timeout.
func TestSendStalledBodyKeepsStatus(t *testing.T) {
	release := make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte("accepted"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	req := signedRequest(t, rc.URL, mustSecret(t))
	req.Timeout = 200 * time.Millisecond
	res := fixedSender().Send(context.Background(), req)
	if res.StatusCode != http.StatusAccepted || res.Err != nil || string(res.Excerpt) != "accepted" {
		t.Fatalf("result %+v (excerpt %q)", res, res.Excerpt)
	}
	if res.Duration > 5*time.Second {
		t.Errorf("duration %v", res.Duration)
	}
}

func TestSendConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	req := signedRequest(t, "http://"+addr+"/PATHSECRET/hook?token=QUERYSECRET", mustSecret(t))
	res := fixedSender().Send(context.Background(), req)
	if res.Class != dispatch.NetworkError || res.StatusCode != 0 || res.Err == nil {
		t.Fatalf("result %+v, want a NetworkError", res)
	}
	t.Logf("error: %v", res.Err)
	assertRedacted(t, res.Err, "QUERYSECRET", "PATHSECRET", "token=")
	if !strings.Contains(res.Err.Error(), "refused") {
		t.Errorf("error %q does not say the connection was refused", res.Err)
	}
}

func TestSendCanceled(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	res := fixedSender().Send(ctx, signedRequest(t, rc.URL, mustSecret(t)))
	if res.Class != dispatch.Canceled || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("result %+v, want Canceled", res)
	}
}

func TestSendDoesNotFollowRedirects(t *testing.T) {
	target := newReceiver(t, nil)
	redirect := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/elsewhere", http.StatusTemporaryRedirect)
	})
	req := signedRequest(t, redirect.URL, mustSecret(t))
	req.Secrets = sensitive.Bytes(`{"confirm":"tok-123"}`)
	following := &http.Client{} // follows redirects, 307 included, body and all
	for name, s := range map[string]*dispatch.Sender{
		"default client":                fixedSender(),
		"client that follows redirects": {Client: following},
	} {
		t.Run(name, func(t *testing.T) {
			res := s.Send(context.Background(), req)
			if res.StatusCode != http.StatusTemporaryRedirect || res.Err != nil {
				t.Fatalf("result %+v, want the 307 itself", res)
			}
			if got := dispatch.Classify(res, []string{"NetworkError", "Timeout", "4xx", "5xx"}); got != dispatch.NonRetryable {
				t.Errorf("Classify = %v, want NonRetryable", got)
			}
			if got := dispatch.Classify(res, []string{"3xx"}); got != dispatch.Retry {
				t.Errorf("Classify with 3xx listed = %v, want Retry", got)
			}
		})
	}
	if n := len(target.requests()); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}
	if following.CheckRedirect != nil {
		t.Error("Send modified the caller's client")
	}
}

func TestSendExcerpt(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 640) // 10 KiB
	tests := []struct {
		name       string
		body       string
		chunked    bool
		maxExcerpt int
		want       string
	}{
		{"empty body", "", false, 0, ""},
		{"short body", "ok", false, 0, "ok"},
		{"short chunked body", "ok", true, 0, "ok"},
		{"long body cut at the default", big, false, 0, big[:dispatch.DefaultMaxExcerpt]},
		{"long chunked body cut at the default", big, true, 0, big[:dispatch.DefaultMaxExcerpt]},
		{"custom bound", big, false, 10, big[:10]},
		{"no excerpt", big, false, -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
				if !tt.chunked {
					w.Header().Set("Content-Length", strconv.Itoa(len(tt.body)))
				}
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, tt.body)
			})
			s := fixedSender()
			s.MaxExcerpt = tt.maxExcerpt
			res := s.Send(context.Background(), signedRequest(t, rc.URL, mustSecret(t)))
			if res.StatusCode != http.StatusBadRequest || string(res.Excerpt) != tt.want {
				t.Fatalf("status %d excerpt %d bytes %.20q, want %d bytes", res.StatusCode, len(res.Excerpt), res.Excerpt, len(tt.want))
			}
		})
	}
}

// Bodies under the drain limit are read to the end, so one keep-alive
// connection serves sequential attempts.
func TestSendReusesConnections(t *testing.T) {
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, strings.Repeat("x", 8<<10))
	})
	s := fixedSender()
	req := signedRequest(t, rc.URL, mustSecret(t))
	for i := 0; i < 20; i++ {
		if res := s.Send(context.Background(), req); res.StatusCode != http.StatusOK {
			t.Fatalf("attempt %d: %+v", i, res)
		}
	}
	if n := rc.conns.Load(); n != 1 {
		t.Errorf("%d connections for 20 sequential attempts, want 1", n)
	}
}

func TestSendRetryAfter(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header string
		want   time.Duration
	}{
		{"429 with seconds", http.StatusTooManyRequests, "120", 2 * time.Minute},
		{"503 with an HTTP date", http.StatusServiceUnavailable, testNow.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"503 with a past date", http.StatusServiceUnavailable, testNow.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"429 with garbage", http.StatusTooManyRequests, "later", 0},
		{"429 without the header", http.StatusTooManyRequests, "", 0},
		{"500 ignores it", http.StatusInternalServerError, "120", 0},
		{"301 ignores it", http.StatusMovedPermanently, "120", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.header != "" {
					w.Header().Set("Retry-After", tt.header)
				}
				w.WriteHeader(tt.status)
			})
			res := fixedSender().Send(context.Background(), signedRequest(t, rc.URL, mustSecret(t)))
			if res.StatusCode != tt.status || res.RetryAfter != tt.want {
				t.Fatalf("status %d retry after %v, want %d %v", res.StatusCode, res.RetryAfter, tt.status, tt.want)
			}
		})
	}
}

func TestSendInvalidRequest(t *testing.T) {
	rc := newReceiver(t, nil)
	secret := mustSecret(t)
	tests := []struct {
		name   string
		mutate func(*dispatch.Request)
		hidden []string // what the error must not contain
	}{
		{name: "no signing secret", mutate: func(r *dispatch.Request) { r.SigningSecrets = nil }},
		{name: "invalid signing secret", mutate: func(r *dispatch.Request) { r.SigningSecrets = []sensitive.Bytes{sensitive.Bytes("whsec_SIGNSECRET")} },
			hidden: []string{"SIGNSECRET"}},
		{name: "event id with a dot", mutate: func(r *dispatch.Request) { r.EventID = "evt.1" }},
		{name: "data not an object", mutate: func(r *dispatch.Request) { r.Data = json.RawMessage(`[]`) }},
		{name: "secrets not JSON", mutate: func(r *dispatch.Request) { r.Secrets = sensitive.Bytes(`{"a":EVENTSECRET}`) }, hidden: []string{"EVENTSECRET"}},
		{name: "unsupported scheme", mutate: func(r *dispatch.Request) {
			r.URL = "ftp://" + strings.TrimPrefix(rc.URL, "http://") + "/?token=QUERYSECRET"
		},
			hidden: []string{"QUERYSECRET"}},
		{name: "user information", mutate: func(r *dispatch.Request) {
			r.URL = "http://user:PASSWORD1@" + strings.TrimPrefix(rc.URL, "http://") + "/hook"
		},
			hidden: []string{"PASSWORD1"}},
		{name: "fragment", mutate: func(r *dispatch.Request) { r.URL = rc.URL + "/hook?token=QUERYSECRET#FRAGSECRET" }, hidden: []string{"QUERYSECRET", "FRAGSECRET"}},
		{name: "no host", mutate: func(r *dispatch.Request) { r.URL = "http:///hook?token=QUERYSECRET" }, hidden: []string{"QUERYSECRET"}},
		{name: "URL does not parse", mutate: func(r *dispatch.Request) { r.URL = rc.URL + "/%zz?token=QUERYSECRET" }, hidden: []string{"QUERYSECRET", "%zz"}},
		{name: "URL with a control character", mutate: func(r *dispatch.Request) { r.URL = rc.URL + "/\n?token=QUERYSECRET" }, hidden: []string{"QUERYSECRET"}},
		{name: "header value with CRLF", mutate: func(r *dispatch.Request) {
			r.Headers = []wire.Header{{Name: "Authorization", Value: "Bearer HEADERSECRET\r\nX-Injected: 1"}}
		}, hidden: []string{"HEADERSECRET"}},
		{name: "header name with a space", mutate: func(r *dispatch.Request) { r.Headers = []wire.Header{{Name: "X Bad", Value: "HEADERSECRET"}} },
			hidden: []string{"HEADERSECRET"}},
		{name: "empty header name", mutate: func(r *dispatch.Request) { r.Headers = []wire.Header{{Name: "", Value: "v"}} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := signedRequest(t, rc.URL, secret)
			tt.mutate(&req)
			res := fixedSender().Send(context.Background(), req)
			if res.Class != dispatch.InvalidRequest || res.Err == nil || res.StatusCode != 0 {
				t.Fatalf("result %+v, want InvalidRequest", res)
			}
			if dispatch.Classify(res, []string{"NetworkError", "Timeout", "4xx", "5xx"}) != dispatch.NonRetryable {
				t.Error("an invalid request would be retried")
			}
			t.Logf("error: %v", res.Err)
			assertRedacted(t, res.Err, tt.hidden...)
		})
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("%d invalid requests reached the receiver", n)
	}
}

// TestSendConcurrent sends distinct events at once through one Sender and
// checks that every receiver saw its own envelope with a valid signature:
// pooled buffers never mix.
func TestSendConcurrent(t *testing.T) {
	secret := mustSecret(t)
	var bad atomic.Int32
	rc := newReceiver(t, nil)
	s := dispatch.NewSender()
	const n = 200
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := signedRequest(t, rc.URL, secret)
			req.EventID = fmt.Sprintf("evt_%04d", i)
			req.Data = json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":%q}`, i, strings.Repeat("p", i*7)))
			req.Secrets = sensitive.Bytes(fmt.Sprintf(`{"token":"t-%d"}`, i))
			if res := s.Send(context.Background(), req); res.StatusCode != http.StatusNoContent {
				t.Errorf("send %d: %+v", i, res)
			}
		}()
	}
	wg.Wait()
	for _, r := range rc.requests() {
		id := r.header.Get("Webhook-Id")
		if err := signing.Verify([]sensitive.Bytes{secret}, id, r.header.Get("Webhook-Timestamp"), r.header.Get("Webhook-Signature"), r.body, time.Now(), time.Minute); err != nil {
			bad.Add(1)
			continue
		}
		var env envelope
		var data struct {
			N     int    `json:"n"`
			Token string `json:"token"`
		}
		if json.Unmarshal(r.body, &env) != nil || json.Unmarshal(env.Data, &data) != nil ||
			env.ID != id || id != fmt.Sprintf("evt_%04d", data.N) || data.Token != fmt.Sprintf("t-%d", data.N) {
			bad.Add(1)
		}
	}
	if got := len(rc.requests()); got != n || bad.Load() != 0 {
		t.Fatalf("%d requests, %d bad", got, bad.Load())
	}
}

// assertRedacted fails when err, or any error it wraps, mentions one of
// hidden, or when the chain still holds a *url.Error (which prints the
// whole URL).
func assertRedacted(t *testing.T, err error, hidden ...string) {
	t.Helper()
	var ue *url.Error
	if errors.As(err, &ue) {
		t.Errorf("error chain holds a *url.Error: %v", ue)
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		msg := fmt.Sprintf("%v | %+v | %s", e, e, e.Error())
		for _, h := range hidden {
			if strings.Contains(msg, h) {
				t.Errorf("error %q contains %q", msg, h)
			}
		}
	}
}
