package dispatch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/signing"
	"github.com/hookkeeper/hookkeeper/internal/tracing"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// Sender sends attempts. Its zero value works with the defaults; its
// fields are read on the first Send, and it must not be copied after.
type Sender struct {
	// Client sends the requests (NewClient when nil; NewGuardedClient
	// restricts the destinations). Send uses a copy
	// that never follows redirects and keeps no cookies, whatever Client
	// says, so a redirect can never carry an envelope elsewhere.
	Client *http.Client
	// MaxExcerpt bounds the response excerpt: DefaultMaxExcerpt when 0,
	// none when negative.
	MaxExcerpt int
	// Now gives the attempt time (webhook-timestamp, and the reference of
	// an HTTP-date Retry-After); time.Now when nil. Durations are measured
	// on the monotonic clock whatever Now is.
	Now func() time.Time
	// UserAgent is sent as User-Agent; DefaultUserAgent when empty.
	UserAgent string

	once   sync.Once
	client *http.Client
	ua     []string
	// creds holds what Prepare made for each endpoint with credentials
	// (their OAuth2 tokens, HTTPS clients), to reuse and release them.
	creds credCache
}

func (s *Sender) init() {
	c := NewClient()
	if s.Client != nil {
		cp := *s.Client
		c = &cp
	}
	c.CheckRedirect = refuseRedirect
	c.Jar = nil
	s.client = c
	s.ua = []string{DefaultUserAgent}
	if s.UserAgent != "" {
		s.ua = []string{s.UserAgent}
	}
}

func (s *Sender) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Send makes one attempt: it POSTs the envelope of req, signed with every
// signing secret and carrying req.Credentials (as Prepare made them), and
// reads at most MaxExcerpt bytes of the response. It never returns an error of its own:
// failures are in the Result.
//
// With OAuth2 credentials, a token endpoint that fails is the attempt's
// failure (NetworkError, Timeout or ForbiddenDestination, with an error
// of its own that quotes neither its answer nor the client secret), and a
// 401 from the receiver renews the token and resends once. TLS
// credentials need the Client's Transport to be an *http.Transport
// (ErrTLSTransport otherwise).
func (s *Sender) Send(ctx context.Context, req Request) Result {
	s.once.Do(s.init)
	began := time.Now()
	res := s.send(ctx, &req)
	res.Duration = time.Since(began)
	return res
}

func (s *Sender) send(ctx context.Context, req *Request) Result {
	res := Result{Start: s.now()}
	invalid := func(err error) Result {
		res.Err, res.Class = err, InvalidRequest
		return res
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	payload, err := envelope(req)
	if err != nil {
		return invalid(err)
	}
	sig, err := signing.SignatureHeader(req.SigningSecrets, req.EventID, res.Start, payload)
	if err != nil {
		return invalid(err)
	}

	// A *bytes.Reader body (NewRequest sets GetBody and ContentLength from
	// it) is one net/http knows to be in memory, so it writes the headers
	// and the body in one write; any other reader gets the headers flushed
	// on their own first (Go issue 22088): a second system call and TCP
	// segment per attempt, and a second read for the receiver.
	hr, err := http.NewRequestWithContext(actx, http.MethodPost, req.URL, bytes.NewReader(payload))
	if err != nil {
		return invalid(urlParseError(err))
	}
	if err := wire.CheckParsedURL(req.URL, hr.URL); err != nil {
		return invalid(fmt.Errorf("endpoint %w", err))
	}
	client := s.client
	creds := req.Credentials // prepared with the endpoint; nil sends none
	if creds != nil {
		if creds.err != nil {
			return invalid(creds.err)
		}
		client = creds.client
	}
	h := hr.Header
	for _, sh := range req.Headers {
		// A reserved name is refused, never overwritten below: the
		// registration refuses it, so only a configuration stored before
		// the rule can carry one. The error names the header, never the
		// value, which may be a credential.
		if err := wire.CheckHeader(sh.Name, sh.Value); err != nil {
			return invalid(fmt.Errorf("static %w", err))
		}
		h.Add(sh.Name, sh.Value)
	}
	// One backing array for the per-attempt values; every slice has
	// len == cap, so an append elsewhere copies instead of overwriting.
	vals := [...]string{req.EventID, strconv.FormatInt(res.Start.Unix(), 10), sig}
	perAttempt := vals[:]
	h["Content-Type"] = contentTypeJSON
	h["User-Agent"] = s.ua
	h["Webhook-Id"] = perAttempt[0:1:1]
	h["Webhook-Timestamp"] = perAttempt[1:2:2]
	h["Webhook-Signature"] = perAttempt[2:3:3]
	if req.DeliveryID != "" {
		h[DeliveryIDHeader] = []string{req.DeliveryID}
	}
	// The attempt's span, when tracing is on: the receiver's spans join
	// the publisher's trace (issue #46).
	tracing.Inject(ctx, h)
	if !req.ReplayUntil.IsZero() {
		h[wire.ReplayUntilHeader] = []string{FormatReplayUntil(req.ReplayUntil)}
	}
	var token string // the OAuth2 access token sent, redacted from the excerpt
	var fetch *tokenFetch
	if creds != nil {
		creds.apply(h)
		if creds.oauth != nil {
			fetch = &tokenFetch{ctx: ctx, actx: actx, client: client, now: s.now, timeout: timeout}
			if token, res.Class, res.Err = creds.oauth.get(fetch, ""); res.Err != nil {
				return res
			}
			h["Authorization"] = []string{"Bearer " + token}
		}
	}

	resp, err := client.Do(hr)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && token != "" {
		// The token was revoked or rotated before its expiry: a new one
		// and one resend of the same request (same body, same
		// webhook-id); its answer is the attempt's.
		_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
		_ = resp.Body.Close()
		if token, res.Class, res.Err = creds.oauth.get(fetch, token); res.Err != nil {
			return res
		}
		hr = hr.Clone(actx)
		hr.Header["Authorization"] = []string{"Bearer " + token}
		hr.Body, _ = hr.GetBody()
		resp, err = client.Do(hr)
	}
	if err != nil {
		res.Class, res.Err = transportError(ctx, actx, err, hr.URL, timeout)
		return res
	}
	res.StatusCode = resp.StatusCode
	if res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable {
		res.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), s.now())
	}
	// Errors reading the body do not change the outcome: the status
	// arrived. A body longer than the drain limit closes the connection.
	if resp.Body != http.NoBody {
		res.Excerpt = redactSecrets(readExcerpt(resp.Body, s.maxExcerpt(), resp.ContentLength), req.Secrets)
		if creds != nil {
			res.Excerpt = creds.redact(res.Excerpt, token)
		}
		_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	}
	_ = resp.Body.Close()
	return res
}

// contentTypeJSON is shared by all requests; len == cap keeps it immutable.
var contentTypeJSON = []string{"application/json"}[:1:1]

func (s *Sender) maxExcerpt() int {
	if s.MaxExcerpt == 0 {
		return DefaultMaxExcerpt
	}
	return s.MaxExcerpt
}

// readExcerpt reads up to limit bytes of r.
func readExcerpt(r io.Reader, limit int, contentLength int64) []byte {
	if limit <= 0 || contentLength == 0 {
		return nil
	}
	n := limit
	if contentLength > 0 && contentLength < int64(n) {
		n = int(contentLength)
	}
	buf := make([]byte, n)
	k, _ := io.ReadFull(r, buf)
	if k == 0 {
		return nil
	}
	return buf[:k:k]
}
