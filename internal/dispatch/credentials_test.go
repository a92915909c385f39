package dispatch_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/credential"
	"github.com/hookkeeper/hookkeeper/internal/destination"
	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// credRequest is a signed request to target with static headers, carrying
// creds as s prepares them for endpoint (as the engine does when it
// registers the endpoint).
func credRequest(t *testing.T, s *dispatch.Sender, target, endpoint string, creds *credential.Set, static ...wire.Header) dispatch.Request {
	t.Helper()
	req := signedRequest(t, target, mustSecret(t))
	req.Headers = static
	req.Credentials = s.Prepare(endpoint, target, static, creds)
	return req
}

// eventually polls cond until it holds, failing after 10 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSendCredentialHeadersAndAuthorization(t *testing.T) {
	tests := []struct {
		name  string
		creds *credential.Set
		check func(t *testing.T, r *http.Request)
	}{
		{"a header from a Secret", &credential.Set{Headers: []credential.Header{{Name: "X-Api-Key", Value: sensitive.Bytes("key-from-secret")}}},
			func(t *testing.T, r *http.Request) {
				if got := r.Header.Values("X-Api-Key"); len(got) != 1 || got[0] != "key-from-secret" {
					t.Errorf("X-Api-Key = %q", got)
				}
				if got := r.Header.Get("Authorization"); got != "" {
					t.Errorf("Authorization = %q, want none", got)
				}
			}},
		{"basic", &credential.Set{Basic: &credential.Basic{Username: sensitive.Bytes("hook-user"), Password: sensitive.Bytes("pass:word é")}},
			func(t *testing.T, r *http.Request) {
				if u, p, ok := r.BasicAuth(); !ok || u != "hook-user" || p != "pass:word é" {
					t.Errorf("basic auth = %q %q %v", u, p, ok)
				}
			}},
		{"bearer", &credential.Set{Bearer: sensitive.Bytes("bearer-token-1")},
			func(t *testing.T, r *http.Request) {
				if got := r.Header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer bearer-token-1" {
					t.Errorf("Authorization = %q", got)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got *http.Request
			rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
				got = r
				w.WriteHeader(http.StatusNoContent)
			})
			s := fixedSender()
			req := credRequest(t, s, rc.URL, "ep", tc.creds, wire.Header{Name: "X-Tenant", Value: "a"})
			for range 2 {
				if res := s.Send(context.Background(), req); res.Err != nil || res.StatusCode != http.StatusNoContent {
					t.Fatalf("result %+v", res)
				}
				tc.check(t, got)
				if got.Header.Get("X-Tenant") != "a" || got.Header.Get("Webhook-Id") != req.EventID {
					t.Errorf("static or signing headers missing: %v", got.Header)
				}
			}
		})
	}
}

// An attempt whose credentials could not be sent as configured is refused
// before anything is sent; the error names the field or header, never a
// value.
func TestSendRefusesCredentialsThatCannotBeSent(t *testing.T) {
	rc := newReceiver(t, nil)
	ca := newTestCA(t, "ca")
	bearer := sensitive.Bytes("bearer-value-secret")
	tests := []struct {
		name    string
		url     string
		static  []wire.Header
		creds   *credential.Set
		client  *http.Client
		want    error
		mention string
	}{
		{"a credential header repeating a static one", rc.URL, []wire.Header{{Name: "X-Api-Key", Value: "static"}},
			&credential.Set{Headers: []credential.Header{{Name: "x-API-key", Value: sensitive.Bytes("header-value-secret")}}}, nil,
			wire.ErrHeaderRepeated, `"x-API-key"`},
		{"a static Authorization with auth", rc.URL, []wire.Header{{Name: "authorization", Value: "Bearer static"}},
			&credential.Set{Bearer: bearer}, nil, credential.ErrAuthorizationHeader, `"authorization"`},
		{"a reserved credential header", rc.URL, nil,
			&credential.Set{Headers: []credential.Header{{Name: "Webhook-Signature", Value: sensitive.Bytes("header-value-secret")}}}, nil,
			wire.ErrHeaderReserved, `"Webhook-Signature"`},
		{"a credential header value Go would alter", rc.URL, nil,
			&credential.Set{Headers: []credential.Header{{Name: "X-Key", Value: sensitive.Bytes(" header-value-secret")}}}, nil,
			wire.ErrHeaderValue, `"X-Key"`},
		{"two kinds of auth", rc.URL, nil,
			&credential.Set{Bearer: bearer, Basic: &credential.Basic{Username: sensitive.Bytes("user"), Password: sensitive.Bytes("basic-pass-secret")}}, nil,
			credential.ErrAuthorizationTwice, "auth"},
		{"TLS on an http URL", rc.URL, nil,
			&credential.Set{TLS: &credential.TLS{CAPEM: ca.pem}}, nil, dispatch.ErrTLSOverHTTP, "https"},
		{"TLS with a transport that is not an *http.Transport", "https://127.0.0.1:1/", nil,
			&credential.Set{TLS: &credential.TLS{CAPEM: ca.pem}}, &http.Client{Transport: roundTripperFunc(http.DefaultTransport.RoundTrip)},
			dispatch.ErrTLSTransport, "*http.Transport"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := dispatch.NewSender()
			if tc.client != nil {
				s.Client = tc.client
			}
			req := credRequest(t, s, tc.url, "ep", tc.creds, tc.static...)
			res := s.Send(context.Background(), req)
			if res.Class != dispatch.InvalidRequest || !errors.Is(res.Err, tc.want) {
				t.Fatalf("result %+v, want InvalidRequest with %v", res, tc.want)
			}
			if !strings.Contains(res.Err.Error(), tc.mention) {
				t.Errorf("error %q does not mention %s", res.Err, tc.mention)
			}
			assertRedacted(t, res.Err, "header-value-secret", "bearer-value-secret", "basic-pass-secret")
			// The registration refuses the same.
			if err := dispatch.CheckCredentials(tc.url, tc.static, tc.creds); tc.want != dispatch.ErrTLSTransport && !errors.Is(err, tc.want) {
				t.Errorf("CheckCredentials = %v, want %v", err, tc.want)
			}
		})
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("the receiver got %d requests, want none", n)
	}
	if err := dispatch.CheckCredentials(rc.URL, []wire.Header{{Name: "X-Tenant", Value: "a"}}, &credential.Set{Bearer: bearer}); err != nil {
		t.Errorf("CheckCredentials of a valid set: %v", err)
	}
	if err := dispatch.CheckCredentials(rc.URL, nil, nil); err != nil {
		t.Errorf("CheckCredentials(nil): %v", err)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The receiver requires a client certificate of its CA: the attempt
// presents the endpoint's, and without one the handshake fails.
func TestSendMutualTLS(t *testing.T) {
	serverCA, clientCA := newTestCA(t, "server-ca"), newTestCA(t, "client-ca")
	rc := newTLSReceiver(t, serverCA, clientCA, nil)
	certPEM, keyPEM := clientCA.issue(t, "hookkeeper-client", false)
	s := fixedSender()

	res := s.Send(context.Background(), credRequest(t, s, rc.URL, "mtls", &credential.Set{TLS: &credential.TLS{CertPEM: certPEM, KeyPEM: keyPEM, CAPEM: serverCA.pem}}))
	if res.Err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("with the client certificate: result %+v", res)
	}
	if got := rc.requests(); len(got) != 1 || got[0].clientCN != "hookkeeper-client" {
		t.Fatalf("requests %+v, want one with the client certificate", got)
	}

	res = s.Send(context.Background(), credRequest(t, s, rc.URL, "no-cert", &credential.Set{TLS: &credential.TLS{CAPEM: serverCA.pem}}))
	if res.Class != dispatch.NetworkError {
		t.Errorf("without a client certificate: result %+v, want NetworkError", res)
	}
	// A certificate of another CA is refused too.
	otherCert, otherKey := serverCA.issue(t, "stranger", false)
	res = s.Send(context.Background(), credRequest(t, s, rc.URL, "other-cert", &credential.Set{TLS: &credential.TLS{CertPEM: otherCert, KeyPEM: otherKey, CAPEM: serverCA.pem}}))
	if res.Class != dispatch.NetworkError {
		t.Errorf("with a stranger's certificate: result %+v, want NetworkError", res)
	}
	if n := len(rc.requests()); n != 1 {
		t.Errorf("the receiver handled %d requests, want 1", n)
	}
}

// The HTTPS client of TLS credentials dials through the sender's guard
// like the base client: loopback stays forbidden.
func TestSendTLSCredentialsKeepTheGuard(t *testing.T) {
	ca := newTestCA(t, "private-ca")
	rc := newTLSReceiver(t, ca, nil, nil)
	s := dispatch.NewGuardedSender(destination.New(destination.Options{Resolver: testDNS}))
	res := s.Send(context.Background(), credRequest(t, s, rc.URL, "ep", &credential.Set{TLS: &credential.TLS{CAPEM: ca.pem}}))
	if res.Class != dispatch.ForbiddenDestination {
		t.Errorf("result %+v, want ForbiddenDestination", res)
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("the receiver got %d requests", n)
	}
}

// A receiver with a certificate of a private CA is trusted with the CA
// bundle, also in addition to the system roots, and refused without.
func TestSendPrivateCA(t *testing.T) {
	ca := newTestCA(t, "private-ca")
	rc := newTLSReceiver(t, ca, nil, nil)
	s := fixedSender()
	tests := []struct {
		name  string
		creds *credential.Set
		ok    bool
	}{
		{"the CA bundle", &credential.Set{TLS: &credential.TLS{CAPEM: ca.pem}}, true},
		{"the CA bundle and the system roots", &credential.Set{TLS: &credential.TLS{CAPEM: ca.pem, SystemRoots: true}}, true},
		{"the system roots alone", nil, false},
		{"another CA's bundle", &credential.Set{TLS: &credential.TLS{CAPEM: newTestCA(t, "other").pem}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := s.Send(context.Background(), credRequest(t, s, rc.URL, tc.name, tc.creds))
			if tc.ok && (res.Err != nil || res.StatusCode != http.StatusNoContent) {
				t.Errorf("result %+v, want a 204", res)
			}
			if !tc.ok && (res.Class != dispatch.NetworkError || !strings.Contains(res.Err.Error(), "certificate")) {
				t.Errorf("result %+v, want a NetworkError about the certificate", res)
			}
		})
	}
}

// A rotation (a new Set with another fingerprint) takes effect on the next
// attempt: the new values are sent, the new client certificate presented,
// and the former HTTPS client dropped with its connections. A new Set with
// the same values keeps the client and its connections.
func TestSendCredentialRotation(t *testing.T) {
	serverCA, clientCA := newTestCA(t, "server-ca"), newTestCA(t, "client-ca")
	rc := newTLSReceiver(t, serverCA, clientCA, nil)
	certA, keyA := clientCA.issue(t, "client-a", false)
	certB, keyB := clientCA.issue(t, "client-b", false)
	set := func(token string, cert, key []byte) *credential.Set {
		return &credential.Set{
			Bearer:  sensitive.Bytes(token),
			Headers: []credential.Header{{Name: "X-Api-Key", Value: sensitive.Bytes("key-" + token)}},
			TLS:     &credential.TLS{CertPEM: cert, KeyPEM: key, CAPEM: serverCA.pem},
		}
	}
	s := fixedSender()
	send := func(creds *credential.Set, wantCN, wantToken string) {
		t.Helper()
		res := s.Send(context.Background(), credRequest(t, s, rc.URL, "ep", creds))
		if res.Err != nil || res.StatusCode != http.StatusNoContent {
			t.Fatalf("result %+v", res)
		}
		got := rc.requests()
		last := got[len(got)-1]
		if last.clientCN != wantCN || last.header.Get("Authorization") != "Bearer "+wantToken || last.header.Get("X-Api-Key") != "key-"+wantToken {
			t.Fatalf("the receiver saw %q with %q, %q; want %q with %q", last.clientCN,
				last.header.Get("Authorization"), last.header.Get("X-Api-Key"), wantCN, wantToken)
		}
	}

	first := set("token-one", certA, keyA)
	send(first, "client-a", "token-one")
	send(first, "client-a", "token-one")
	// The same values in a new Set (the endpoint reloaded): same client,
	// same connection.
	send(set("token-one", certA, keyA), "client-a", "token-one")
	if n := rc.conns.Load(); n != 1 {
		t.Errorf("%d connections before the rotation, want 1", n)
	}
	// A new token alone keeps the HTTPS client.
	send(set("token-two", certA, keyA), "client-a", "token-two")
	if n := rc.conns.Load(); n != 1 {
		t.Errorf("%d connections after a new token, want 1", n)
	}
	// A new certificate: a new client; the former one is dropped and its
	// idle connection closed.
	send(set("token-two", certB, keyB), "client-b", "token-two")
	if n := dispatch.TLSClients(s); n != 1 {
		t.Errorf("%d HTTPS clients after the rotation, want 1", n)
	}
	eventually(t, "the former client's connection closed", func() bool { return rc.closed.Load() == 1 })
	if n := rc.conns.Load(); n != 2 {
		t.Errorf("%d connections after the rotation, want 2", n)
	}
	// Two endpoints with the same TLS values share one client; removing
	// one keeps it for the other.
	shared := set("token-three", certB, keyB)
	if res := s.Send(context.Background(), credRequest(t, s, rc.URL, "other", shared)); res.Err != nil {
		t.Fatalf("result %+v", res)
	}
	if n := dispatch.TLSClients(s); n != 1 {
		t.Errorf("%d HTTPS clients for two endpoints with the same TLS values, want 1", n)
	}
	s.Forget("ep")
	if n := dispatch.TLSClients(s); n != 1 {
		t.Errorf("%d HTTPS clients once one endpoint is forgotten, want 1", n)
	}
	s.Forget("other")
	if n := dispatch.TLSClients(s); n != 0 {
		t.Errorf("%d HTTPS clients once both are forgotten, want 0", n)
	}
	eventually(t, "every connection closed", func() bool { return rc.closed.Load() == 2 })
}

// An endpoint registered again without credentials gets none, and its
// former HTTPS client is released as by Forget.
func TestPrepareWithoutCredentialsReleasesTheClient(t *testing.T) {
	ca := newTestCA(t, "ca")
	s := dispatch.NewSender()
	if c := s.Prepare("ep", "https://127.0.0.1:1/", nil, &credential.Set{TLS: &credential.TLS{CAPEM: ca.pem}}); c == nil || c.Err() != nil {
		t.Fatalf("prepared %v", c)
	}
	if n := dispatch.TLSClients(s); n != 1 {
		t.Fatalf("%d HTTPS clients, want 1", n)
	}
	if c := s.Prepare("ep", "https://127.0.0.1:1/", nil, nil); c != nil {
		t.Errorf("prepared %v for no credentials, want nil", c)
	}
	if n := dispatch.TLSClients(s); n != 0 {
		t.Errorf("%d HTTPS clients once the endpoint has none, want 0", n)
	}
}
