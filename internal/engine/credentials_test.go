package engine_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/credential"
	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// The registration refuses credentials the sender would refuse on every
// attempt, naming the field, never the value, and stores nothing.
func TestRegisterEndpointRefusesCredentialsThatCannotBeSent(t *testing.T) {
	e := run(t, engine.Options{Store: stores()[0].open(t)})
	ctx := context.Background()
	const value = "credential-value-must-not-show"
	tests := []struct {
		name   string
		url    string
		static []wire.Header
		creds  *credential.Set
		want   error
	}{
		{"two kinds of auth", "https://example.com/hooks", nil,
			&credential.Set{Bearer: sensitive.Bytes(value), Basic: &credential.Basic{Username: sensitive.Bytes("u"), Password: sensitive.Bytes(value)}},
			credential.ErrAuthorizationTwice},
		{"a bearer with a newline", "https://example.com/hooks", nil, &credential.Set{Bearer: sensitive.Bytes(value + "\n")}, wire.ErrHeaderValue},
		{"a reserved credential header", "https://example.com/hooks", nil,
			&credential.Set{Headers: []credential.Header{{Name: "Webhook-Id", Value: sensitive.Bytes(value)}}}, wire.ErrHeaderReserved},
		{"a credential header repeating a static one", "https://example.com/hooks", []wire.Header{{Name: "X-Api-Key", Value: "static"}},
			&credential.Set{Headers: []credential.Header{{Name: "x-api-key", Value: sensitive.Bytes(value)}}}, wire.ErrHeaderRepeated},
		{"a static Authorization with auth", "https://example.com/hooks", []wire.Header{{Name: "Authorization", Value: "Bearer static"}},
			&credential.Set{Bearer: sensitive.Bytes(value)}, credential.ErrAuthorizationHeader},
		{"TLS on an http URL", "http://example.com/hooks", nil,
			&credential.Set{TLS: &credential.TLS{SystemRoots: true, CertPEM: []byte("cert"), KeyPEM: sensitive.Bytes(value)}}, credential.ErrKeyPair},
		{"a CA bundle on an http URL", "http://example.com/hooks", nil,
			&credential.Set{TLS: &credential.TLS{SystemRoots: true}}, dispatch.ErrTLSOverHTTP},
		{"an oauth2 client without a secret", "https://example.com/hooks", nil,
			&credential.Set{OAuth2: &credential.OAuth2{TokenURL: "https://auth.example/token", ClientID: sensitive.Bytes(value)}}, credential.ErrEmptyValue},
	}
	for i, tc := range tests {
		ep := endpoint(t, "creds", "ep-"+string(rune('a'+i)), tc.url, []string{"*"}, policy(3, 0))
		ep.Headers, ep.Credentials = tc.static, tc.creds
		_, err := e.RegisterEndpoint(ctx, ep)
		if !errors.Is(err, engine.ErrInvalidEndpoint) || !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), value) {
			t.Errorf("%s: the error %q holds the value", tc.name, err)
		}
		if _, err := e.Endpoint(ctx, ep.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("%s: the refused endpoint is stored (%v)", tc.name, err)
		}
	}
}

// The engine's attempts carry the endpoint's credentials, and a rotation
// (the endpoint registered again with new values) reaches the next one.
func TestEngineAttemptsCarryCredentials(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var seen []string
			rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.Header.Get("Authorization")+" "+r.Header.Get("X-Api-Key"))
				mu.Unlock()
				w.WriteHeader(http.StatusNoContent)
			}))
			t.Cleanup(rc.Close)
			e := run(t, engine.Options{Store: sf.open(t)})
			ctx := context.Background()
			ep := endpoint(t, "creds", "receiver", rc.URL, []string{"*"}, policy(3, time.Millisecond))
			register := func(token string) {
				t.Helper()
				ep.Credentials = &credential.Set{
					Bearer:  sensitive.Bytes(token),
					Headers: []credential.Header{{Name: "X-Api-Key", Value: sensitive.Bytes("key-" + token)}},
				}
				if _, err := e.RegisterEndpoint(ctx, ep); err != nil {
					t.Fatal(err)
				}
			}
			delivered := func(n int64) {
				t.Helper()
				eventually(t, "the delivery", func() bool {
					s, _ := e.EndpointStats(ctx, ep.ID)
					return s.Delivered == n
				})
			}
			register("token-one")
			publish(t, e, "creds", "order.created", `{"n":1}`)
			delivered(1)
			register("token-two")
			publish(t, e, "creds", "order.created", `{"n":2}`)
			delivered(2)
			mu.Lock()
			defer mu.Unlock()
			want := []string{"Bearer token-one key-token-one", "Bearer token-two key-token-two"}
			if strings.Join(seen, "|") != strings.Join(want, "|") {
				t.Errorf("the receiver saw %q, want %q", seen, want)
			}
		})
	}
}

// A rotation registered by one process (the leader's controller) reaches
// the attempts of every process sharing the ledger: after it, no replica
// sends the old value, though each had the old configuration cached.
func TestCredentialsRotationReachesEveryReplica(t *testing.T) {
	store := pgtest.NewSchemaStore(t)
	var mu sync.Mutex
	byToken := map[string]int{}
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		byToken[r.Header.Get("Authorization")]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	a := run(t, engine.Options{Store: store})
	b := run(t, engine.Options{Store: store})
	ctx := context.Background()
	ep := endpoint(t, "shop", "partner", rc.URL, []string{"*"}, policy(3, time.Millisecond))
	register := func(token string) {
		t.Helper()
		ep.Credentials = &credential.Set{Bearer: sensitive.Bytes(token)}
		if _, err := a.RegisterEndpoint(ctx, ep); err != nil {
			t.Fatal(err)
		}
	}
	delivered := func(n int64) {
		t.Helper()
		eventually(t, "the deliveries", func() bool {
			s, _ := a.EndpointStats(ctx, ep.ID)
			return s.Delivered == n
		})
	}
	register("token-one")
	for i := range 20 {
		publish(t, []*engine.Engine{a, b}[i%2], "shop", "order.created", `{"n":1}`)
	}
	delivered(20)
	register("token-two")
	for i := range 20 {
		publish(t, []*engine.Engine{a, b}[i%2], "shop", "order.created", `{"n":2}`)
	}
	delivered(40)
	mu.Lock()
	defer mu.Unlock()
	if byToken["Bearer token-one"] != 20 || byToken["Bearer token-two"] != 20 {
		t.Fatalf("requests by credential: %v; want 20 with each, none of the old after the rotation", byToken)
	}
}
