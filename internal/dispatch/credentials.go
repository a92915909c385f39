package dispatch

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/hookkeeper/hookkeeper/internal/credential"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// The rules an endpoint's credentials break together with its URL or the
// sender's client, beyond credential.Set.Check.
var (
	// ErrTLSOverHTTP: TLS credentials on an http:// URL would never be
	// used; the endpoint is misconfigured rather than sent in the clear.
	ErrTLSOverHTTP = errors.New("tls credentials need an https endpoint URL")
	// ErrTLSTransport: the Sender's Client has a Transport that is not an
	// *http.Transport, so it cannot carry an endpoint's TLS settings; the
	// attempt is refused rather than sent without them.
	ErrTLSTransport = errors.New("tls credentials need the sender's client to use an *http.Transport")
)

// CheckCredentials checks creds as every attempt will: creds.Check, then
// against the endpoint's URL and static headers (a credential header must
// not repeat a static header's name, a static Authorization header cannot
// be combined with auth, TLS needs https). Registration calls it so that
// an endpoint is refused once instead of failing every delivery. Errors
// name fields and headers, never values.
func CheckCredentials(rawURL string, headers []wire.Header, creds *credential.Set) error {
	if creds.Empty() {
		return nil
	}
	if err := creds.Check(); err != nil {
		return err
	}
	return checkAgainst(rawURL, headers, creds)
}

// crossCheck is CheckCredentials' part that depends on the endpoint's URL
// scheme and static headers.
func crossCheck(scheme string, static []wire.Header, set *credential.Set) error {
	if set.TLS != nil && scheme != "https" {
		return ErrTLSOverHTTP
	}
	auth := set.Basic != nil || set.Bearer != nil || set.OAuth2 != nil
	for _, sh := range static {
		if auth && strings.EqualFold(sh.Name, "Authorization") {
			return fmt.Errorf("static header %q: %w", sh.Name, credential.ErrAuthorizationHeader)
		}
		for _, ch := range set.Headers {
			if strings.EqualFold(sh.Name, ch.Name) {
				return fmt.Errorf("credential header %q repeats a static header: %w", ch.Name, wire.ErrHeaderRepeated)
			}
		}
	}
	return nil
}

// Credentials are an endpoint's credential.Set made ready to send for one
// configuration of the endpoint: checked (with its URL and static
// headers), its values formatted as headers, its HTTPS client built.
// Sender.Prepare makes them when the endpoint is registered; an attempt
// only applies them. They are immutable (the token cache has its own
// lock), so attempts read them without locking.
type Credentials struct {
	fp string // set.Fingerprint()
	// err refuses every attempt with these credentials (InvalidRequest).
	err error

	// headerKeys (canonical) and headerVals (len == cap, shared by all
	// attempts) are the credential headers.
	headerKeys []string
	headerVals [][]string
	// authorization is the Basic or Bearer Authorization value, nil
	// otherwise (OAuth2 sets it per attempt).
	authorization []string
	tlsFP         string
	client        *http.Client
	oauth         *tokenCache
	// needles are the values redacted from response excerpts.
	needles [][]byte
}

// Err is why every attempt with c is refused, nil when none is.
func (c *Credentials) Err() error { return c.err }

// credCache holds the prepared credentials of each endpoint and the HTTPS
// clients they share, for preparations alone (attempts carry their
// Credentials): under mu, one at a time.
type credCache struct {
	mu         sync.Mutex
	byEndpoint map[string]*Credentials
	tls        map[string]*tlsClient // by credential.Set.TLSFingerprint
}

// tlsClient is an HTTPS client for one TLS fingerprint, shared by the
// endpoints whose Sets have it.
type tlsClient struct {
	client *http.Client
	refs   int
}

// Prepare checks set as CheckCredentials does, against the endpoint's URL
// and static headers, and makes it ready for the attempts of endpoint (its
// ID); nil for an empty Set. The engine calls it once per version of an
// endpoint. A Set with the endpoint's former fingerprint keeps what was
// prepared (its OAuth2 token, its HTTPS client); a new fingerprint is
// prepared afresh and the former one's HTTPS client released. A Set that
// cannot be sent gives Credentials whose Err refuses every attempt; the
// error names fields and headers, never values.
func (s *Sender) Prepare(endpoint, rawURL string, static []wire.Header, set *credential.Set) *Credentials {
	if set.Empty() {
		s.Forget(endpoint)
		return nil
	}
	s.once.Do(s.init)
	c := &s.creds
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.byEndpoint[endpoint]
	fp := set.Fingerprint()
	var np *Credentials
	if p != nil && p.fp == fp {
		cp := *p
		np = &cp
	} else {
		np = s.prepare(set, fp)
	}
	if np.err == nil {
		np.err = checkAgainst(rawURL, static, set)
	}
	if c.byEndpoint == nil {
		c.byEndpoint = map[string]*Credentials{}
	}
	c.byEndpoint[endpoint] = np
	if p != nil && np.fp != p.fp {
		c.releaseTLS(p.tlsFP)
	}
	return np
}

// checkAgainst is crossCheck for an endpoint's URL.
func checkAgainst(rawURL string, static []wire.Header, set *credential.Set) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return urlParseError(err)
	}
	return crossCheck(u.Scheme, static, set)
}

// Forget drops what the sender prepared for endpoint (its OAuth2 token,
// its share of an HTTPS client, whose idle connections are closed when no
// other endpoint uses it). The engine calls it when an endpoint is
// removed. Attempts that still carry its Credentials send with them.
func (s *Sender) Forget(endpoint string) {
	c := &s.creds
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.byEndpoint[endpoint]
	delete(c.byEndpoint, endpoint)
	if p != nil {
		c.releaseTLS(p.tlsFP)
	}
}

// prepare checks set and builds what its attempts need. The caller holds
// s.creds.mu.
func (s *Sender) prepare(set *credential.Set, fp string) *Credentials {
	p := &Credentials{fp: fp, client: s.client}
	if err := set.Check(); err != nil {
		p.err = err
		return p
	}
	for _, h := range set.Headers {
		p.headerKeys = append(p.headerKeys, http.CanonicalHeaderKey(h.Name))
		p.headerVals = append(p.headerVals, []string{string(h.Value.Reveal())}[:1:1])
		p.addNeedle(h.Value)
	}
	switch {
	case set.Basic != nil:
		enc := base64.StdEncoding.EncodeToString([]byte(string(set.Basic.Username.Reveal()) + ":" + string(set.Basic.Password.Reveal())))
		p.authorization = []string{"Basic " + enc}[:1:1]
		p.addNeedle(set.Basic.Username)
		p.addNeedle(set.Basic.Password)
		p.addNeedle(sensitive.Bytes(enc))
	case set.Bearer != nil:
		p.authorization = []string{"Bearer " + string(set.Bearer.Reveal())}[:1:1]
		p.addNeedle(set.Bearer)
	case set.OAuth2 != nil:
		p.oauth = newTokenCache(set.OAuth2)
		p.addNeedle(set.OAuth2.ClientID)
		p.addNeedle(set.OAuth2.ClientSecret)
	}
	if set.TLS != nil {
		client, err := s.creds.acquireTLS(s.client, set.TLSFingerprint(), set.TLS)
		if err != nil {
			p.err = err
			return p
		}
		p.tlsFP = set.TLSFingerprint()
		p.client = client
	}
	return p
}

// acquireTLS returns the HTTPS client for fingerprint fp, building it from
// base the first time: base's transport cloned (its guarded dialer
// included) with t's client certificate and roots. The caller holds mu.
func (c *credCache) acquireTLS(base *http.Client, fp string, t *credential.TLS) (*http.Client, error) {
	if tc := c.tls[fp]; tc != nil {
		tc.refs++
		return tc.client, nil
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	tr, ok := rt.(*http.Transport)
	if !ok {
		return nil, ErrTLSTransport
	}
	cfg, err := t.Config()
	if err != nil {
		return nil, err
	}
	tr = tr.Clone()
	if base := tr.TLSClientConfig; base != nil {
		// Keep what the base client configures (a test's roots, a
		// minimum version) and add the endpoint's.
		merged := base.Clone()
		if cfg.Certificates != nil {
			merged.Certificates = cfg.Certificates
		}
		if cfg.RootCAs != nil {
			merged.RootCAs = cfg.RootCAs
		}
		merged.MinVersion = max(merged.MinVersion, cfg.MinVersion)
		cfg = merged
	}
	tr.TLSClientConfig = cfg
	client := *base
	client.Transport = tr
	if c.tls == nil {
		c.tls = map[string]*tlsClient{}
	}
	c.tls[fp] = &tlsClient{client: &client, refs: 1}
	return &client, nil
}

// releaseTLS gives up one endpoint's share of fp's client; the last one
// closes its idle connections and drops it. Attempts still running on it
// finish; their connections are closed when idle for IdleConnTimeout. The
// caller holds mu.
func (c *credCache) releaseTLS(fp string) {
	tc := c.tls[fp]
	if fp == "" || tc == nil {
		return
	}
	if tc.refs--; tc.refs > 0 {
		return
	}
	delete(c.tls, fp)
	tc.client.CloseIdleConnections()
}

// apply sets the credential headers and the Basic or Bearer Authorization
// on h; crossCheck has made sure none of them repeats a static header.
func (p *Credentials) apply(h http.Header) {
	for i, k := range p.headerKeys {
		h[k] = p.headerVals[i]
	}
	if p.authorization != nil {
		h["Authorization"] = p.authorization
	}
}

// addNeedle adds v, raw and JSON-escaped, to what is redacted from
// excerpts.
func (p *Credentials) addNeedle(v sensitive.Bytes) {
	p.needles = appendNeedles(p.needles, v.Reveal())
}

func appendNeedles(needles [][]byte, v []byte) [][]byte {
	if len(v) < minRedactLength {
		return needles
	}
	needles = append(needles, v)
	if q, err := json.Marshal(string(v)); err == nil {
		if esc := q[1 : len(q)-1]; string(esc) != string(v) {
			needles = append(needles, esc)
		}
	}
	return needles
}

// redact removes every credential value of p, and the access token sent,
// from a response excerpt: a receiver that echoes its request headers
// must not put them into the ledger.
func (p *Credentials) redact(excerpt []byte, token string) []byte {
	if len(excerpt) == 0 {
		return excerpt
	}
	needles := p.needles
	if token != "" {
		needles = appendNeedles(needles[:len(needles):len(needles)], []byte(token))
	}
	return redactValues(excerpt, needles)
}
