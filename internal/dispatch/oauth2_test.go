package dispatch_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/credential"
	"github.com/hookkeeper/hookkeeper/internal/destination"
	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// tokenServer is an OAuth2 token endpoint of the test's own: it issues
// access-1, access-2, … for the client credentials it knows, each valid
// for expiresIn seconds, unless answer handles the request first.
type tokenServer struct {
	*httptest.Server
	id, secret string
	expiresIn  int

	mu     sync.Mutex
	forms  []url.Values
	issued []string
	answer func(w http.ResponseWriter, r *http.Request) bool
}

func newTokenServer(t *testing.T, id, secret string, expiresIn int) *tokenServer {
	t.Helper()
	ts := &tokenServer{id: id, secret: secret, expiresIn: expiresIn}
	ts.Server = httptest.NewUnstartedServer(http.HandlerFunc(ts.serve))
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

func (ts *tokenServer) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ts.mu.Lock()
	ts.forms = append(ts.forms, r.PostForm)
	answer, wantID, wantSecret := ts.answer, ts.id, ts.secret
	ts.mu.Unlock()
	if answer != nil && answer(w, r) {
		return
	}
	id, secret, ok := r.BasicAuth()
	id, _ = url.QueryUnescape(id)
	secret, _ = url.QueryUnescape(secret)
	if !ok || id != wantID || secret != wantSecret || r.PostForm.Get("grant_type") != "client_credentials" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = fmt.Fprintf(w, `{"error":"invalid_client","error_description":"unknown client %s"}`, secret)
		return
	}
	ts.mu.Lock()
	tok := fmt.Sprintf("access-%d", len(ts.issued)+1)
	ts.issued = append(ts.issued, tok)
	ts.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "bearer", "expires_in": ts.expiresIn})
}

func (ts *tokenServer) requests() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.forms)
}

func (ts *tokenServer) form(i int) url.Values {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.forms[i]
}

func (ts *tokenServer) setAnswer(f func(w http.ResponseWriter, r *http.Request) bool) {
	ts.mu.Lock()
	ts.answer = f
	ts.mu.Unlock()
}

func oauthSet(tokenURL, id, secret string) *credential.Set {
	return &credential.Set{OAuth2: &credential.OAuth2{
		TokenURL:     tokenURL,
		ClientID:     sensitive.Bytes(id),
		ClientSecret: sensitive.Bytes(secret),
		Scopes:       []string{"hooks.write", "hooks.read"},
		Audience:     "https://receiver.example",
		Params:       map[string]string{"resource": "orders"},
	}}
}

// testClock is a clock the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// bearerReceiver accepts the tokens accept allows and answers 401 to
// others.
func bearerReceiver(t *testing.T, accept func(token string) bool) *receiver {
	return newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !ok || !accept(tok) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func authorizations(rc *receiver) []string {
	var out []string
	for _, r := range rc.requests() {
		out = append(out, r.header.Get("Authorization"))
	}
	return out
}

// The token is fetched once, with the grant's parameters, shared by the
// endpoint's attempts, and fetched again shortly before it expires by the
// sender's clock (the margin is min(30s, a tenth of its lifetime)).
func TestSendOAuth2TokenCachedUntilShortlyBeforeExpiry(t *testing.T) {
	for _, tc := range []struct {
		expiresIn int
		margin    time.Duration
	}{{3600, 30 * time.Second}, {100, 10 * time.Second}} {
		t.Run(fmt.Sprintf("expires_in=%d", tc.expiresIn), func(t *testing.T) {
			ts := newTokenServer(t, "client-id-1", "client-secret-1", tc.expiresIn)
			rc := bearerReceiver(t, func(string) bool { return true })
			clock := &testClock{now: testNow}
			s := dispatch.NewSender()
			s.Now = clock.Now
			req := credRequest(t, s, rc.URL, "ep", oauthSet(ts.URL+"/token", "client-id-1", "client-secret-1"))
			send := func() {
				t.Helper()
				if res := s.Send(context.Background(), req); res.Err != nil || res.StatusCode != http.StatusNoContent {
					t.Fatalf("result %+v", res)
				}
			}
			send()
			send()
			clock.Advance(time.Duration(tc.expiresIn)*time.Second - tc.margin - time.Second)
			send()
			if n := ts.requests(); n != 1 {
				t.Fatalf("%d token requests before the refresh, want 1", n)
			}
			clock.Advance(time.Second)
			send()
			send()
			if n := ts.requests(); n != 2 {
				t.Fatalf("%d token requests after the refresh, want 2", n)
			}
			want := []string{"Bearer access-1", "Bearer access-1", "Bearer access-1", "Bearer access-2", "Bearer access-2"}
			if got := authorizations(rc); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the receiver saw %q, want %q", got, want)
			}
			form := ts.form(0)
			for k, v := range map[string]string{"grant_type": "client_credentials", "scope": "hooks.write hooks.read",
				"audience": "https://receiver.example", "resource": "orders"} {
				if form.Get(k) != v {
					t.Errorf("token request %s = %q, want %q", k, form.Get(k), v)
				}
			}
			if form.Has("client_secret") {
				t.Errorf("the client secret went in the form, want HTTP Basic")
			}
		})
	}
}

// A 401 from the receiver drops the token: one new token, one resend of
// the same request, whose answer is the attempt's. A receiver that keeps
// refusing gets exactly one resend.
func TestSendOAuth2RenewsOnceOn401(t *testing.T) {
	ts := newTokenServer(t, "client-id-1", "client-secret-1", 3600)
	var mu sync.Mutex
	revoked := map[string]bool{}
	rc := bearerReceiver(t, func(tok string) bool {
		mu.Lock()
		defer mu.Unlock()
		return !revoked[tok]
	})
	s := fixedSender()
	req := credRequest(t, s, rc.URL, "ep", oauthSet(ts.URL+"/token", "client-id-1", "client-secret-1"))
	if res := s.Send(context.Background(), req); res.StatusCode != http.StatusNoContent {
		t.Fatalf("result %+v", res)
	}
	mu.Lock()
	revoked["access-1"] = true
	mu.Unlock()
	res := s.Send(context.Background(), req)
	if res.Err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("after the revocation: result %+v, want the resend's 204", res)
	}
	if n := ts.requests(); n != 2 {
		t.Errorf("%d token requests, want 2", n)
	}
	got := rc.requests()
	if len(got) != 3 {
		t.Fatalf("%d requests, want 3", len(got))
	}
	refused, resent := got[1], got[2]
	if refused.header.Get("Authorization") != "Bearer access-1" || resent.header.Get("Authorization") != "Bearer access-2" {
		t.Errorf("authorizations %q then %q", refused.header.Get("Authorization"), resent.header.Get("Authorization"))
	}
	for _, h := range []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"} {
		if refused.header.Get(h) != resent.header.Get(h) {
			t.Errorf("%s changed on the resend: %q, %q", h, refused.header.Get(h), resent.header.Get(h))
		}
	}
	if string(refused.body) != string(resent.body) {
		t.Errorf("the body changed on the resend")
	}

	// Refused whatever the token: one resend, and its 401 is the result.
	mu.Lock()
	for i := range 10 {
		revoked[fmt.Sprintf("access-%d", i)] = true
	}
	mu.Unlock()
	res = s.Send(context.Background(), req)
	if res.Err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("always refused: result %+v, want the resend's 401", res)
	}
	if n := len(rc.requests()); n != 5 {
		t.Errorf("%d requests, want 5 (one resend only)", n)
	}
	if n := ts.requests(); n != 3 {
		t.Errorf("%d token requests, want 3", n)
	}
}

// A token endpoint that fails fails the attempt, retried like any other,
// with an error of its own that quotes neither the answer nor the secret;
// the receiver is not asked, and the next attempt asks for a token again.
func TestSendOAuth2TokenEndpointFailures(t *testing.T) {
	const secret = "client-secret-must-not-show"
	ts := newTokenServer(t, "client-id-1", secret, 3600)
	rc := bearerReceiver(t, func(string) bool { return true })
	s := fixedSender()
	req := credRequest(t, s, rc.URL, "ep", oauthSet(ts.URL+"/token", "client-id-1", secret))
	label := "oauth2 token from " + ts.URL + "/token: "
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request) bool
		want   string
	}{
		{"503", func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Retry-After", "30")
			http.Error(w, "overloaded; your secret is "+secret+" body-text-must-not-show", http.StatusServiceUnavailable)
			return true
		}, label + "answered 503"},
		{"a refused client", func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = fmt.Fprintf(w, `{"error":"invalid_client","error_description":"body-text-must-not-show %s"}`, secret)
			return true
		}, label + "answered 401 (invalid_client)"},
		{"a non-standard error code", func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `{"error":"body-text-must-not-show"}`)
			return true
		}, label + "answered 400"},
		{"not a token", func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `<html>body-text-must-not-show %s</html>`, secret)
			return true
		}, label + "the answer is not a valid token response"},
		{"no access token", func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"token_type":"bearer","note":"body-text-must-not-show"}`)
			return true
		}, label + "the answer is not a valid token response"},
		{"a token that cannot be a header", func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"access_token":"body-text-must-not-show\n","token_type":"bearer"}`)
			return true
		}, label + "the access token is not a valid header value"},
	}
	for i, tc := range tests {
		ts.setAnswer(tc.answer)
		res := s.Send(context.Background(), req)
		if res.Class != dispatch.NetworkError || res.Err == nil || res.Err.Error() != tc.want {
			t.Errorf("%s: result %+v, want NetworkError %q", tc.name, res, tc.want)
		}
		if dispatch.Classify(res, []string{"NetworkError"}) != dispatch.Retry {
			t.Errorf("%s: not retried", tc.name)
		}
		assertRedacted(t, res.Err, secret, "body-text-must-not-show")
		if n := ts.requests(); n != i+1 {
			t.Errorf("%s: %d token requests, want %d (one per attempt)", tc.name, n, i+1)
		}
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("the receiver got %d requests, want none", n)
	}
	ts.setAnswer(nil)
	if res := s.Send(context.Background(), req); res.StatusCode != http.StatusNoContent {
		t.Errorf("once the token endpoint recovers: result %+v", res)
	}
}

// The token URL is a destination like any other: a guarded sender refuses
// a forbidden one (never retried), and a token endpoint that does not
// answer in time is the attempt's timeout.
func TestSendOAuth2TokenURLDestinationAndTimeout(t *testing.T) {
	allowed, err := destination.ParseCIDRs("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	rc := bearerReceiver(t, func(string) bool { return true })
	s := dispatch.NewGuardedSender(destination.New(destination.Options{Allowed: allowed, Resolver: testDNS}))
	res := s.Send(context.Background(), credRequest(t, s, rc.URL, "ep", oauthSet("http://metadata.test/latest/token?k=v", "client-id-1", "client-secret-1")))
	if res.Class != dispatch.ForbiddenDestination || dispatch.Classify(res, defaultRetryOn) != dispatch.NonRetryable {
		t.Fatalf("result %+v, want ForbiddenDestination", res)
	}
	const want = "oauth2 token from http://metadata.test/latest/token: destination forbidden: metadata.test resolves to 169.254.169.254"
	if !strings.HasPrefix(res.Err.Error(), want) {
		t.Errorf("error %q, want it to begin with %q", res.Err, want)
	}
	var forbidden *destination.ForbiddenError
	if !errors.As(res.Err, &forbidden) {
		t.Errorf("error %v does not hold the ForbiddenError", res.Err)
	}

	release := make(chan struct{})
	ts := newTokenServer(t, "client-id-1", "client-secret-1", 3600)
	t.Cleanup(func() { close(release) })
	ts.setAnswer(func(w http.ResponseWriter, r *http.Request) bool {
		<-release
		return true
	})
	req := credRequest(t, s, rc.URL, "slow", oauthSet(ts.URL+"/token", "client-id-1", "client-secret-1"))
	req.Timeout = 200 * time.Millisecond
	res = s.Send(context.Background(), req)
	if res.Class != dispatch.Timeout || !strings.HasPrefix(res.Err.Error(), "oauth2 token from "+ts.URL+"/token: timeout") {
		t.Errorf("result %+v, want a Timeout of the token endpoint", res)
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("the receiver got %d requests, want none", n)
	}
}

// Concurrent attempts of an endpoint without a token wait for one fetch
// and share its outcome, a failure included.
func TestSendOAuth2OneFetchAtATime(t *testing.T) {
	ts := newTokenServer(t, "client-id-1", "client-secret-1", 3600)
	rc := bearerReceiver(t, func(string) bool { return true })
	s := fixedSender()
	const n = 8
	for round, tc := range []struct {
		endpoint string
		status   int // of the token endpoint; 0 issues a token
		want     int // of the receiver
	}{{"ep-fails", http.StatusServiceUnavailable, 0}, {"ep", 0, http.StatusNoContent}} {
		release := make(chan struct{})
		ts.setAnswer(func(w http.ResponseWriter, r *http.Request) bool {
			<-release
			if tc.status != 0 {
				w.WriteHeader(tc.status)
				return true
			}
			return false
		})
		req := credRequest(t, s, rc.URL, tc.endpoint, oauthSet(ts.URL+"/token", "client-id-1", "client-secret-1"))
		results := make(chan dispatch.Result, n)
		for range n {
			go func() { results <- s.Send(context.Background(), req) }()
		}
		eventually(t, "one fetch and the other attempts waiting for it", func() bool {
			return ts.requests() == round+1 && dispatch.TokenWaiters(s, tc.endpoint) == n-1
		})
		close(release)
		for range n {
			res := <-results
			if res.StatusCode != tc.want || (tc.status != 0) != (res.Class == dispatch.NetworkError) {
				t.Errorf("%s: result %+v", tc.endpoint, res)
			}
		}
		if got := ts.requests(); got != round+1 {
			t.Errorf("%s: %d token requests in all, want %d", tc.endpoint, got, round+1)
		}
	}
}

// The token URL is reached with the endpoint's TLS settings: its private
// CA (and client certificate) apply to it as to the receiver.
func TestSendOAuth2TokenURLWithTheEndpointsTLS(t *testing.T) {
	ca := newTestCA(t, "private-ca")
	rc := newTLSReceiver(t, ca, nil, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer access-1" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	certPEM, keyPEM := ca.issue(t, "token-server", true)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ts := &tokenServer{id: "client-id-1", secret: "client-secret-1", expiresIn: 3600}
	ts.Server = httptest.NewUnstartedServer(http.HandlerFunc(ts.serve))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	ts.Config.ErrorLog = discardLog()
	ts.StartTLS()
	t.Cleanup(ts.Close)

	s := fixedSender()
	creds := oauthSet(ts.URL+"/token", "client-id-1", "client-secret-1")
	// Without the CA the token URL is not trusted.
	res := s.Send(context.Background(), credRequest(t, s, rc.URL, "no-ca", creds))
	if res.Class != dispatch.NetworkError || !strings.Contains(res.Err.Error(), "oauth2 token from") || !strings.Contains(res.Err.Error(), "certificate") {
		t.Errorf("without the CA: result %+v, want a NetworkError of the token URL's certificate", res)
	}
	withCA := *creds
	withCA.TLS = &credential.TLS{CAPEM: ca.pem}
	if res := s.Send(context.Background(), credRequest(t, s, rc.URL, "ca", &withCA)); res.Err != nil || res.StatusCode != http.StatusNoContent {
		t.Errorf("with the CA: result %+v", res)
	}
}

// A rotated client secret is a new fingerprint: the next attempt fetches a
// token with it rather than sending the former secret's token.
func TestSendOAuth2Rotation(t *testing.T) {
	ts := newTokenServer(t, "client-id-1", "secret-one", 3600)
	rc := bearerReceiver(t, func(string) bool { return true })
	s := fixedSender()
	if res := s.Send(context.Background(), credRequest(t, s, rc.URL, "ep", oauthSet(ts.URL+"/token", "client-id-1", "secret-one"))); res.StatusCode != http.StatusNoContent {
		t.Fatalf("result %+v", res)
	}
	ts.mu.Lock()
	ts.secret = "secret-two"
	ts.mu.Unlock()
	if res := s.Send(context.Background(), credRequest(t, s, rc.URL, "ep", oauthSet(ts.URL+"/token", "client-id-1", "secret-two"))); res.StatusCode != http.StatusNoContent {
		t.Fatalf("after the rotation: result %+v", res)
	}
	if got, want := authorizations(rc), []string{"Bearer access-1", "Bearer access-2"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the receiver saw %q, want %q", got, want)
	}
}
