package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/hookkeeper/hookkeeper/internal/credential"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// Token refresh margins: a token is refreshed this long before it expires,
// so that it does not expire on its way to the receiver.
const (
	maxRefreshMargin = 30 * time.Second
	refreshFraction  = 10 // a tenth of its lifetime, when shorter
	// maxTokenLifetime bounds expires_in (x/oauth2 reads it as an int32 too).
	maxTokenLifetime = (1<<31 - 1) * time.Second
)

// tokenCache holds an endpoint's OAuth2 access token for one credential
// fingerprint, shared by all the endpoint's attempts in the process. One
// fetch runs at a time: attempts that need a token meanwhile wait for it
// and share its outcome, failures included, so that a slow or failing
// token endpoint is asked once per round, not once per attempt.
type tokenCache struct {
	conf  *clientcredentials.Config
	url   *url.URL
	label string // "oauth2 token from https://auth.example/token"

	mu        sync.Mutex
	token     string
	refreshAt time.Time // zero: until a receiver refuses it
	flight    *tokenFlight
	waiters   int // attempts that joined a flight (tests read it)
}

// tokenFlight is one fetch; done closes when its outcome is set.
type tokenFlight struct {
	done  chan struct{}
	token string
	class ErrorClass
	err   error
}

func newTokenCache(o *credential.OAuth2) *tokenCache {
	params := url.Values{}
	for k, v := range o.Params {
		params.Set(k, v)
	}
	if o.Audience != "" {
		params.Set("audience", o.Audience)
	}
	u, _ := url.Parse(o.TokenURL) // Check parsed it
	label := "oauth2 token from " + u.Scheme + "://" + u.Host + u.EscapedPath()
	return &tokenCache{
		conf: &clientcredentials.Config{
			ClientID:       string(o.ClientID.Reveal()),
			ClientSecret:   string(o.ClientSecret.Reveal()),
			TokenURL:       o.TokenURL,
			Scopes:         o.Scopes,
			EndpointParams: params,
			// RFC 6749 §2.3.1: servers must accept HTTP Basic. Probing
			// (AuthStyleAutoDetect) would ask twice on every failure.
			AuthStyle: oauth2.AuthStyleInHeader,
		},
		url:   u,
		label: label,
	}
}

// tokenFetch is what get needs of the attempt: its contexts (ctx the
// caller's, actx with the attempt's timeout), the client that reaches the
// token URL (guarded, with the endpoint's TLS) and the clock.
type tokenFetch struct {
	ctx, actx context.Context
	client    *http.Client
	now       func() time.Time
	timeout   time.Duration
}

// get returns the access token to send: the cached one unless it is due
// for refresh or is stale (the one a receiver just answered 401 to), else
// a new one, fetched now or by the attempt already fetching it.
func (c *tokenCache) get(f *tokenFetch, stale string) (string, ErrorClass, error) {
	for {
		c.mu.Lock()
		if c.token != "" && c.token != stale && (c.refreshAt.IsZero() || f.now().Before(c.refreshAt)) {
			tok := c.token
			c.mu.Unlock()
			return tok, None, nil
		}
		if fl := c.flight; fl != nil {
			c.waiters++
			c.mu.Unlock()
			select {
			case <-fl.done:
				if fl.class == Canceled {
					continue // the fetching attempt was cut short, not the token endpoint
				}
				return fl.token, fl.class, fl.err
			case <-f.actx.Done():
				class, err := waitError(f.ctx, f.timeout)
				return "", class, err
			}
		}
		fl := &tokenFlight{done: make(chan struct{})}
		c.flight = fl
		c.token = "" // due or refused: never sent again
		c.mu.Unlock()

		var refreshAt time.Time
		fl.token, refreshAt, fl.class, fl.err = c.fetch(f)
		c.mu.Lock()
		c.flight = nil
		if fl.err == nil {
			c.token, c.refreshAt = fl.token, refreshAt
		}
		c.mu.Unlock()
		close(fl.done)
		return fl.token, fl.class, fl.err
	}
}

// fetch asks the token endpoint through f.client, so that the destination
// policy and the endpoint's TLS settings apply to it as to the receiver.
func (c *tokenCache) fetch(f *tokenFetch) (string, time.Time, ErrorClass, error) {
	fetched := f.now()
	tok, err := c.conf.Token(context.WithValue(f.actx, oauth2.HTTPClient, f.client))
	if err != nil {
		class, err := c.fetchError(f, err)
		return "", time.Time{}, class, err
	}
	if wire.CheckHeader("Authorization", "Bearer "+tok.AccessToken) != nil {
		return "", time.Time{}, NetworkError, &attemptError{c.label + ": the access token is not a valid header value", errTokenAnswer}
	}
	var refreshAt time.Time
	if life := tokenLifetime(tok); life > 0 {
		refreshAt = fetched.Add(life - min(maxRefreshMargin, life/refreshFraction))
	}
	return tok.AccessToken, refreshAt, None, nil
}

// errTokenAnswer is the cause of a token endpoint's failures that are not
// the network's; its answer is never quoted (it may echo the client
// secret).
var errTokenAnswer = errors.New("oauth2 token endpoint failed")

// oauthErrorCodes are the error codes of RFC 6749 §5.2, the only part of
// a token endpoint's answer repeated in an error: anything else in it is
// the server's text.
var oauthErrorCodes = map[string]bool{
	"invalid_request": true, "invalid_client": true, "invalid_grant": true,
	"unauthorized_client": true, "unsupported_grant_type": true, "invalid_scope": true,
}

// fetchError classifies a failed fetch and describes it with the token
// URL's scheme, host and path, and at most the status and a standard
// error code of the answer: x/oauth2's RetrieveError quotes the body.
func (c *tokenCache) fetchError(f *tokenFetch, err error) (ErrorClass, error) {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		msg := c.label + ": answered"
		if re.Response != nil {
			msg += " " + strconv.Itoa(re.Response.StatusCode)
		}
		if oauthErrorCodes[re.ErrorCode] {
			msg += " (" + re.ErrorCode + ")"
		}
		return NetworkError, &attemptError{msg, errTokenAnswer}
	}
	var ue *url.Error
	if errors.As(err, &ue) || f.actx.Err() != nil {
		class, terr := transportError(f.ctx, f.actx, err, c.url, f.timeout)
		return class, &attemptError{c.label + ": " + terr.Error(), terr}
	}
	return NetworkError, &attemptError{c.label + ": the answer is not a valid token response", errTokenAnswer}
}

// waitError is the failure of an attempt whose time ran out while it
// waited for another attempt's fetch.
func waitError(parent context.Context, timeout time.Duration) (ErrorClass, error) {
	if err := parent.Err(); err != nil {
		return Canceled, &attemptError{"canceled: waiting for an oauth2 token", err}
	}
	return Timeout, &attemptError{"timeout: no response within " + timeout.String() + " (waiting for an oauth2 token)", context.DeadlineExceeded}
}

// tokenLifetime is the token's expires_in, measured here rather than from
// x/oauth2's Expiry, which is on the wall clock (Sender.Now is the
// sender's); 0 when the answer gave none.
func tokenLifetime(tok *oauth2.Token) time.Duration {
	var secs float64
	switch v := tok.Extra("expires_in").(type) {
	case float64:
		secs = v
	case json.Number:
		secs, _ = v.Float64()
	case string:
		secs, _ = strconv.ParseFloat(v, 64)
	default:
		if !tok.Expiry.IsZero() {
			return min(max(time.Until(tok.Expiry), 0), maxTokenLifetime)
		}
	}
	if !(secs > 0) { // NaN too
		return 0
	}
	if secs >= maxTokenLifetime.Seconds() {
		return maxTokenLifetime
	}
	return time.Duration(secs * float64(time.Second))
}
