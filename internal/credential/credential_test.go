package credential_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookkeeper/hookkeeper/internal/credential"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// keyPair is a self-signed certificate and its key in PEM.
func keyPair(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// full returns a Set with every field set (Basic and Bearer and OAuth2
// together, which Check refuses but Store and Fingerprint must carry).
func full(t *testing.T) *credential.Set {
	t.Helper()
	cert, key := keyPair(t, "client")
	ca, _ := keyPair(t, "ca")
	return &credential.Set{
		Headers: []credential.Header{{Name: "X-Api-Key", Value: sensitive.Bytes("key-1")}, {Name: "X-Other", Value: sensitive.Bytes("other-1")}},
		Basic:   &credential.Basic{Username: sensitive.Bytes("user"), Password: sensitive.Bytes("pass")},
		Bearer:  sensitive.Bytes("bearer"),
		OAuth2: &credential.OAuth2{TokenURL: "https://auth.example/token", ClientID: sensitive.Bytes("id"), ClientSecret: sensitive.Bytes("secret"),
			Scopes: []string{"a", "b"}, Audience: "aud", Params: map[string]string{"resource": "r", "tenant": "t"}},
		TLS: &credential.TLS{CertPEM: cert, KeyPEM: sensitive.Bytes(key), CAPEM: ca, SystemRoots: true},
	}
}

func TestStoreLoadRoundTrip(t *testing.T) {
	sets := map[string]*credential.Set{
		"every field":        full(t),
		"headers alone":      {Headers: []credential.Header{{Name: "X-Api-Key", Value: sensitive.Bytes("key-1")}}},
		"an empty bearer":    {Bearer: sensitive.Bytes{}},
		"a password alone":   {Basic: &credential.Basic{Password: sensitive.Bytes("pass")}},
		"a CA bundle alone":  {TLS: &credential.TLS{CAPEM: full(t).TLS.CAPEM}},
		"system roots alone": {TLS: &credential.TLS{SystemRoots: true}},
	}
	for name, set := range sets {
		b, err := set.Store()
		if err != nil {
			t.Fatalf("%s: Store: %v", name, err)
		}
		got, err := credential.Load(b)
		if err != nil {
			t.Fatalf("%s: Load: %v", name, err)
		}
		if diff := cmp.Diff(set, got); diff != "" {
			t.Errorf("%s: round trip (-stored +loaded):\n%s", name, diff)
		}
		if got.Fingerprint() != set.Fingerprint() {
			t.Errorf("%s: the fingerprint changed through the store", name)
		}
	}
	for _, empty := range []*credential.Set{nil, {}} {
		b, err := empty.Store()
		if err != nil || b != nil {
			t.Errorf("Store(%v) = %q, %v; want nothing", empty, b, err)
		}
	}
	for _, in := range []string{"", " ", "null", "{}"} {
		if s, err := credential.Load([]byte(in)); s != nil || err != nil {
			t.Errorf("Load(%q) = %v, %v; want nil", in, s, err)
		}
	}
	if _, err := credential.Load([]byte(`{"bearer":"not base64 key-1"}`)); err == nil || strings.Contains(err.Error(), "key-1") {
		t.Errorf("Load of a corrupt column: %v, want an error that quotes nothing", err)
	}
}

func TestCheck(t *testing.T) {
	cert, key := keyPair(t, "client")
	otherCert, _ := keyPair(t, "other")
	tokenURL := "https://auth.example/token"
	oauth := func(mod func(o *credential.OAuth2)) *credential.Set {
		o := &credential.OAuth2{TokenURL: tokenURL, ClientID: sensitive.Bytes("id"), ClientSecret: sensitive.Bytes("secret")}
		mod(o)
		return &credential.Set{OAuth2: o}
	}
	bearer := sensitive.Bytes("tok")
	tests := []struct {
		name  string
		set   *credential.Set
		want  error // nil: valid
		field string
	}{
		{"nil", nil, nil, ""},
		{"empty", &credential.Set{}, nil, ""},
		{"headers and bearer", &credential.Set{Bearer: bearer, Headers: []credential.Header{{Name: "X-Api-Key", Value: sensitive.Bytes("v")}}}, nil, ""},
		{"basic and bearer", &credential.Set{Bearer: bearer, Basic: &credential.Basic{Password: sensitive.Bytes("p")}}, credential.ErrAuthorizationTwice, "auth"},
		{"bearer and oauth2", func() *credential.Set { s := oauth(func(*credential.OAuth2) {}); s.Bearer = bearer; return s }(), credential.ErrAuthorizationTwice, "auth"},
		{"a header name that is not a token", &credential.Set{Headers: []credential.Header{{Name: "X Key", Value: sensitive.Bytes("v")}}}, wire.ErrHeaderName, "headers[0]"},
		{"a reserved header", &credential.Set{Headers: []credential.Header{{Name: "webhook-id", Value: sensitive.Bytes("v")}}}, wire.ErrHeaderReserved, "headers[0]"},
		{"a header value with a newline", &credential.Set{Headers: []credential.Header{{Name: "X-A", Value: sensitive.Bytes("v\n")}}}, wire.ErrHeaderValue, "headers[0]"},
		{"a repeated header", &credential.Set{Headers: []credential.Header{{Name: "X-A", Value: sensitive.Bytes("v")}, {Name: "x-a", Value: sensitive.Bytes("w")}}}, wire.ErrHeaderRepeated, "headers[1]"},
		{"an Authorization header with auth", &credential.Set{Bearer: bearer, Headers: []credential.Header{{Name: "authorization", Value: sensitive.Bytes("v")}}}, credential.ErrAuthorizationHeader, "headers[0]"},
		{"an Authorization header alone", &credential.Set{Headers: []credential.Header{{Name: "Authorization", Value: sensitive.Bytes("v")}}}, nil, ""},
		{"an empty basic", &credential.Set{Basic: &credential.Basic{}}, credential.ErrEmptyValue, "auth.basic"},
		{"a basic username alone", &credential.Set{Basic: &credential.Basic{Username: sensitive.Bytes("u")}}, nil, ""},
		{"a username with a colon", &credential.Set{Basic: &credential.Basic{Username: sensitive.Bytes("u:v")}}, nil, "auth.basic"},
		{"a username with a newline", &credential.Set{Basic: &credential.Basic{Username: sensitive.Bytes("u\n")}}, wire.ErrHeaderValue, "auth.basic username"},
		{"an empty bearer", &credential.Set{Bearer: sensitive.Bytes{}}, credential.ErrEmptyValue, "auth.bearer"},
		{"a bearer with a space around", &credential.Set{Bearer: sensitive.Bytes("tok ")}, wire.ErrHeaderValue, "auth.bearer"},
		{"oauth2", oauth(func(o *credential.OAuth2) { o.Scopes = []string{"a"}; o.Params = map[string]string{"resource": "r"} }), nil, ""},
		{"a relative token URL", oauth(func(o *credential.OAuth2) { o.TokenURL = "/token" }), credential.ErrTokenURL, "auth.oauth2.tokenURL"},
		{"a token URL of another scheme", oauth(func(o *credential.OAuth2) { o.TokenURL = "ftp://auth.example/token" }), credential.ErrTokenURL, "auth.oauth2.tokenURL"},
		{"a token URL with user information", oauth(func(o *credential.OAuth2) { o.TokenURL = "https://u:p@auth.example/token" }), credential.ErrTokenURL, "auth.oauth2.tokenURL"},
		{"no client id", oauth(func(o *credential.OAuth2) { o.ClientID = nil }), credential.ErrEmptyValue, "auth.oauth2 client id"},
		{"no client secret", oauth(func(o *credential.OAuth2) { o.ClientSecret = nil }), credential.ErrEmptyValue, "auth.oauth2 client secret"},
		{"a grant_type param", oauth(func(o *credential.OAuth2) { o.Params = map[string]string{"grant_type": "password"} }), credential.ErrOAuth2Param, `auth.oauth2.params["grant_type"]`},
		{"a scope param", oauth(func(o *credential.OAuth2) { o.Params = map[string]string{"scope": "x"} }), credential.ErrOAuth2Param, `auth.oauth2.params["scope"]`},
		{"an audience param", oauth(func(o *credential.OAuth2) { o.Params = map[string]string{"audience": "x"} }), credential.ErrOAuth2Param, `auth.oauth2.params["audience"]`},
		{"a client_secret param", oauth(func(o *credential.OAuth2) { o.Params = map[string]string{"client_secret": "x"} }), credential.ErrOAuth2Param, `auth.oauth2.params["client_secret"]`},
		{"a client certificate", &credential.Set{TLS: &credential.TLS{CertPEM: cert, KeyPEM: sensitive.Bytes(key)}}, nil, ""},
		{"a certificate without its key", &credential.Set{TLS: &credential.TLS{CertPEM: cert}}, credential.ErrKeyPair, "tls.clientCertificate"},
		{"a key without its certificate", &credential.Set{TLS: &credential.TLS{KeyPEM: sensitive.Bytes(key)}}, credential.ErrKeyPair, "tls.clientCertificate"},
		{"a key of another certificate", &credential.Set{TLS: &credential.TLS{CertPEM: otherCert, KeyPEM: sensitive.Bytes(key)}}, credential.ErrKeyPair, "tls.clientCertificate"},
		{"a CA bundle", &credential.Set{TLS: &credential.TLS{CAPEM: otherCert}}, nil, ""},
		{"a CA bundle and the system roots", &credential.Set{TLS: &credential.TLS{CAPEM: otherCert, SystemRoots: true}}, nil, ""},
		{"a CA bundle without a certificate", &credential.Set{TLS: &credential.TLS{CAPEM: []byte("not PEM")}}, credential.ErrCABundle, "tls.caBundle"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.set.Check()
			switch {
			case tc.want == nil && tc.field == "" && err != nil:
				t.Fatalf("Check() = %v, want nil", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("Check() = %v, want %v", err, tc.want)
			case tc.field != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.field)):
				t.Fatalf("Check() = %v, want an error about %s", err, tc.field)
			}
		})
	}
}

// Fingerprint changes with every value of a Set, and TLSFingerprint with
// every TLS value alone.
func TestFingerprintChangesWithEveryField(t *testing.T) {
	base := full(t)
	otherCert, otherKey := keyPair(t, "other")
	mods := []struct {
		name string
		tls  bool
		mod  func(s *credential.Set)
	}{
		{"a header name", false, func(s *credential.Set) { s.Headers[0].Name = "X-Api-Key2" }},
		{"a header value", false, func(s *credential.Set) { s.Headers[0].Value = sensitive.Bytes("key-2") }},
		{"the headers' order", false, func(s *credential.Set) { s.Headers[0], s.Headers[1] = s.Headers[1], s.Headers[0] }},
		{"no headers", false, func(s *credential.Set) { s.Headers = nil }},
		{"the username", false, func(s *credential.Set) { s.Basic.Username = sensitive.Bytes("user2") }},
		{"the password", false, func(s *credential.Set) { s.Basic.Password = sensitive.Bytes("pass2") }},
		{"no basic", false, func(s *credential.Set) { s.Basic = nil }},
		{"the bearer", false, func(s *credential.Set) { s.Bearer = sensitive.Bytes("bearer2") }},
		{"an empty bearer", false, func(s *credential.Set) { s.Bearer = sensitive.Bytes{} }},
		{"no bearer", false, func(s *credential.Set) { s.Bearer = nil }},
		{"the token URL", false, func(s *credential.Set) { s.OAuth2.TokenURL = "https://auth.example/token2" }},
		{"the client id", false, func(s *credential.Set) { s.OAuth2.ClientID = sensitive.Bytes("id2") }},
		{"the client secret", false, func(s *credential.Set) { s.OAuth2.ClientSecret = sensitive.Bytes("secret2") }},
		{"a scope", false, func(s *credential.Set) { s.OAuth2.Scopes = []string{"a", "c"} }},
		{"the audience", false, func(s *credential.Set) { s.OAuth2.Audience = "aud2" }},
		{"a param", false, func(s *credential.Set) { s.OAuth2.Params = map[string]string{"resource": "r2", "tenant": "t"} }},
		{"no oauth2", false, func(s *credential.Set) { s.OAuth2 = nil }},
		{"the client certificate", true, func(s *credential.Set) { s.TLS.CertPEM = otherCert }},
		{"the key", true, func(s *credential.Set) { s.TLS.KeyPEM = sensitive.Bytes(otherKey) }},
		{"the CA bundle", true, func(s *credential.Set) { s.TLS.CAPEM = otherCert }},
		{"the system roots", true, func(s *credential.Set) { s.TLS.SystemRoots = false }},
		{"no TLS", true, func(s *credential.Set) { s.TLS = nil }},
	}
	seen := map[string]string{base.Fingerprint(): "the base"}
	for _, m := range mods {
		s := full(t)
		// full makes new keys: keep the base's TLS values unless changed.
		s.TLS = &credential.TLS{CertPEM: base.TLS.CertPEM, KeyPEM: base.TLS.KeyPEM, CAPEM: base.TLS.CAPEM, SystemRoots: base.TLS.SystemRoots}
		if s.Fingerprint() != base.Fingerprint() {
			t.Fatalf("equal sets have different fingerprints")
		}
		m.mod(s)
		fp := s.Fingerprint()
		if prev, ok := seen[fp]; ok {
			t.Errorf("changing %s gives the fingerprint of %s", m.name, prev)
		}
		seen[fp] = m.name
		if changed := s.TLSFingerprint() != base.TLSFingerprint(); changed != m.tls {
			t.Errorf("changing %s: TLS fingerprint changed = %v, want %v", m.name, changed, m.tls)
		}
	}
	if (*credential.Set)(nil).Fingerprint() != "" || (&credential.Set{}).Fingerprint() != "" || (&credential.Set{Bearer: sensitive.Bytes("b")}).TLSFingerprint() != "" {
		t.Errorf("an empty set or one without TLS has a fingerprint")
	}
}
