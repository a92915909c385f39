// Package credential holds what an endpoint's attempts carry beyond the
// signed envelope: values the controller read from Secrets (and CA bundles
// from ConfigMaps), so that a receiver behind a gateway can be reached
// without a credential in the spec. The ledger stores a Set with the
// endpoint's configuration, as it stores signing secrets, so that every
// replica sends with the same values and a rotation reaches them all
// through the endpoint's version; the sender applies it to each attempt.
//
// Every secret value is a sensitive.Bytes: it prints as "[redacted]" and
// marshals to null. Errors name fields, never values. Only Store and Load
// reveal the values, for the ledger's column.
//
// It imports nothing of hookkeeper but the other leaves.
package credential

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// Set is an endpoint's credentials. The zero value (or nil) sends none.
type Set struct {
	// Headers are sent with every attempt like static headers, with
	// values from Secrets.
	Headers []Header
	// At most one of Basic, Bearer and OAuth2: each sets Authorization.
	Basic  *Basic
	Bearer sensitive.Bytes
	OAuth2 *OAuth2
	// TLS configures the endpoint's HTTPS client (and its token URL's).
	TLS *TLS
}

// Header is a header whose value came from a Secret.
type Header struct {
	Name  string
	Value sensitive.Bytes
}

// Basic is HTTP basic authentication (RFC 7617).
type Basic struct {
	Username sensitive.Bytes
	Password sensitive.Bytes
}

// OAuth2 is the client credentials grant (RFC 6749 §4.4): the sender
// fetches an access token from TokenURL and sends it as a bearer token.
type OAuth2 struct {
	TokenURL     string
	ClientID     sensitive.Bytes
	ClientSecret sensitive.Bytes
	Scopes       []string
	// Audience is sent as the audience parameter when not empty.
	Audience string
	// Params are further parameters of the token request.
	Params map[string]string
}

// TLS is a client certificate and the roots the endpoint's server
// certificate is verified against.
type TLS struct {
	// CertPEM and KeyPEM are a client certificate chain and its key (a
	// kubernetes.io/tls Secret's tls.crt and tls.key); both or neither.
	CertPEM []byte
	KeyPEM  sensitive.Bytes
	// CAPEM are the certificates trusted to sign the server's; empty means
	// the system roots alone.
	CAPEM []byte
	// SystemRoots trusts the system roots in addition to CAPEM.
	SystemRoots bool
}

// The rules a Set can break. Errors wrap them with the field, never a value.
var (
	ErrAuthorizationTwice  = errors.New("at most one of basic, bearer and oauth2 may be set")
	ErrAuthorizationHeader = errors.New("a header named Authorization cannot be combined with auth")
	ErrEmptyValue          = errors.New("the value is empty")
	ErrTokenURL            = errors.New("tokenURL must be an absolute http or https URL with a host")
	ErrKeyPair             = errors.New("the certificate and key do not form a valid pair")
	ErrCABundle            = errors.New("the CA bundle holds no PEM certificate")
	ErrOAuth2Param         = errors.New("params must not set grant_type, client_id, client_secret, scope or audience: the grant and its fields set them")
)

// reservedParams are the token request's parameters the sender sets.
var reservedParams = []string{"grant_type", "client_id", "client_secret", "scope", "audience"}

// Check reports the first rule s breaks; nil for a nil Set.
func (s *Set) Check() error {
	if s == nil {
		return nil
	}
	auths := 0
	for _, set := range []bool{s.Basic != nil, s.Bearer != nil, s.OAuth2 != nil} {
		if set {
			auths++
		}
	}
	if auths > 1 {
		return fmt.Errorf("auth: %w", ErrAuthorizationTwice)
	}
	var hs wire.HeaderSet
	for i, h := range s.Headers {
		if err := hs.Add(h.Name, string(h.Value.Reveal())); err != nil {
			return fmt.Errorf("headers[%d]: %w", i, err)
		}
		if auths > 0 && strings.EqualFold(h.Name, "Authorization") {
			return fmt.Errorf("headers[%d]: %w", i, ErrAuthorizationHeader)
		}
	}
	if b := s.Basic; b != nil {
		if len(b.Password) == 0 && len(b.Username) == 0 {
			return fmt.Errorf("auth.basic: %w", ErrEmptyValue)
		}
		if bytes.ContainsRune(b.Username, ':') {
			return errors.New("auth.basic: the username must not contain ':' (RFC 7617)")
		}
		if err := headerSafe(b.Username); err != nil {
			return fmt.Errorf("auth.basic username: %w", err)
		}
	}
	if s.Bearer != nil {
		if len(s.Bearer) == 0 {
			return fmt.Errorf("auth.bearer: %w", ErrEmptyValue)
		}
		if err := headerSafe(s.Bearer); err != nil {
			return fmt.Errorf("auth.bearer: %w", err)
		}
	}
	if o := s.OAuth2; o != nil {
		u, err := url.Parse(o.TokenURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return fmt.Errorf("auth.oauth2.tokenURL: %w", ErrTokenURL)
		}
		if len(o.ClientID) == 0 {
			return fmt.Errorf("auth.oauth2 client id: %w", ErrEmptyValue)
		}
		if len(o.ClientSecret) == 0 {
			return fmt.Errorf("auth.oauth2 client secret: %w", ErrEmptyValue)
		}
		for _, k := range reservedParams {
			if _, ok := o.Params[k]; ok {
				return fmt.Errorf("auth.oauth2.params[%q]: %w", k, ErrOAuth2Param)
			}
		}
	}
	if t := s.TLS; t != nil {
		if _, err := t.Config(); err != nil {
			return err
		}
	}
	return nil
}

// headerSafe refuses a value Go's HTTP client would refuse or alter in a
// header (a control character, surrounding spaces), without quoting it.
func headerSafe(v []byte) error {
	if err := wire.CheckHeader("x", string(v)); err != nil {
		return wire.ErrHeaderValue
	}
	return nil
}

// Config is the client TLS configuration of t: its key pair and its roots.
// It parses the PEM every time; the sender caches the result by
// Fingerprint.
func (t *TLS) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(t.CertPEM) > 0 || len(t.KeyPEM) > 0 {
		pair, err := tls.X509KeyPair(t.CertPEM, t.KeyPEM.Reveal())
		if err != nil {
			// The crypto/tls error can quote key material; it is not wrapped.
			return nil, fmt.Errorf("tls.clientCertificate: %w", ErrKeyPair)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if len(t.CAPEM) > 0 {
		pool := x509.NewCertPool()
		if t.SystemRoots {
			sys, err := x509.SystemCertPool()
			if err != nil {
				return nil, fmt.Errorf("tls: loading the system roots: %w", err)
			}
			pool = sys
		}
		if !pool.AppendCertsFromPEM(t.CAPEM) {
			return nil, fmt.Errorf("tls.caBundle: %w", ErrCABundle)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// Fingerprint is a digest of every value of s, "" for an empty Set: the
// sender keys its token cache and TLS clients by it, so that a rotated
// value is used from the next attempt on. It reveals nothing.
func (s *Set) Fingerprint() string {
	if s.Empty() {
		return ""
	}
	b, err := s.Store()
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// TLSFingerprint is a digest of s's TLS values alone, "" without any: the
// sender keys its HTTPS clients by it.
func (s *Set) TLSFingerprint() string {
	if s == nil || s.TLS == nil {
		return ""
	}
	return (&Set{TLS: s.TLS}).Fingerprint()
}

// Empty reports whether s sends nothing.
func (s *Set) Empty() bool {
	return s == nil || (len(s.Headers) == 0 && s.Basic == nil && s.Bearer == nil && s.OAuth2 == nil && s.TLS == nil)
}

// stored is a Set with its values revealed: the ledger column's form.
type stored struct {
	Headers []storedHeader `json:"headers,omitempty"`
	Basic   *storedBasic   `json:"basic,omitempty"`
	Bearer  *[]byte        `json:"bearer,omitempty"` // a pointer, so that an empty bearer is kept
	OAuth2  *storedOAuth2  `json:"oauth2,omitempty"`
	TLS     *storedTLS     `json:"tls,omitempty"`
}

type storedHeader struct {
	Name  string `json:"name"`
	Value []byte `json:"value"`
}

type storedBasic struct {
	Username []byte `json:"username"`
	Password []byte `json:"password"`
}

type storedOAuth2 struct {
	TokenURL     string            `json:"tokenURL"`
	ClientID     []byte            `json:"clientID"`
	ClientSecret []byte            `json:"clientSecret"`
	Scopes       []string          `json:"scopes,omitempty"`
	Audience     string            `json:"audience,omitempty"`
	Params       map[string]string `json:"params,omitempty"`
}

type storedTLS struct {
	CertPEM     []byte `json:"cert,omitempty"`
	KeyPEM      []byte `json:"key,omitempty"`
	CAPEM       []byte `json:"ca,omitempty"`
	SystemRoots bool   `json:"systemRoots,omitempty"`
}

// Store encodes s with its values revealed, for the ledger alone; nil for
// an empty Set. Never log or return what it gives.
func (s *Set) Store() ([]byte, error) {
	if s.Empty() {
		return nil, nil
	}
	var out stored
	for _, h := range s.Headers {
		out.Headers = append(out.Headers, storedHeader{Name: h.Name, Value: h.Value.Reveal()})
	}
	if b := s.Basic; b != nil {
		out.Basic = &storedBasic{Username: b.Username.Reveal(), Password: b.Password.Reveal()}
	}
	if s.Bearer != nil {
		b := s.Bearer.Reveal()
		out.Bearer = &b
	}
	if o := s.OAuth2; o != nil {
		out.OAuth2 = &storedOAuth2{TokenURL: o.TokenURL, ClientID: o.ClientID.Reveal(), ClientSecret: o.ClientSecret.Reveal(),
			Scopes: o.Scopes, Audience: o.Audience, Params: o.Params}
	}
	if t := s.TLS; t != nil {
		out.TLS = &storedTLS{CertPEM: t.CertPEM, KeyPEM: t.KeyPEM.Reveal(), CAPEM: t.CAPEM, SystemRoots: t.SystemRoots}
	}
	b, err := json.Marshal(&out)
	if err != nil {
		return nil, errors.New("encoding credentials failed") // never the values
	}
	return b, nil
}

// Load decodes what Store gave; nil or empty input is a nil Set. Its error
// never quotes the input.
func Load(b []byte) (*Set, error) {
	if len(bytes.TrimSpace(b)) == 0 || string(b) == "null" {
		return nil, nil
	}
	var in stored
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, errors.New("decoding stored credentials failed")
	}
	s := &Set{}
	for _, h := range in.Headers {
		s.Headers = append(s.Headers, Header{Name: h.Name, Value: sensitive.Bytes(h.Value)})
	}
	if b := in.Basic; b != nil {
		s.Basic = &Basic{Username: b.Username, Password: b.Password}
	}
	if in.Bearer != nil {
		s.Bearer = sensitive.Bytes(*in.Bearer)
		if s.Bearer == nil {
			s.Bearer = sensitive.Bytes{}
		}
	}
	if o := in.OAuth2; o != nil {
		s.OAuth2 = &OAuth2{TokenURL: o.TokenURL, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
			Scopes: o.Scopes, Audience: o.Audience, Params: o.Params}
	}
	if t := in.TLS; t != nil {
		s.TLS = &TLS{CertPEM: t.CertPEM, KeyPEM: t.KeyPEM, CAPEM: t.CAPEM, SystemRoots: t.SystemRoots}
	}
	if s.Empty() {
		return nil, nil
	}
	return s, nil
}
