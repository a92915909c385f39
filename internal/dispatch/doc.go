// Package dispatch sends one delivery attempt and says what its outcome
// means; the engine decides what happens next (package backoff) and records
// it (package ledger).
//
// It exists as its own package so that everything that touches the wire is
// in one place and testable against real HTTP servers:
//
//   - the envelope {id, type, timestamp, data}, into whose data the event's
//     one-time secrets are merged here and nowhere else, so they exist only
//     in the request body (lesson 3);
//   - Standard Webhooks signing with every valid secret (package signing),
//     with webhook-id = event id, stable across retries (lesson 2);
//   - a per-attempt timeout, no redirects (a 3xx is a failure: following it
//     would send the body, secrets included, to another address), a bounded
//     response excerpt, Retry-After on 429 and 503;
//   - through NewGuardedSender, which the manager always uses, connections
//     dialled by package destination's policy, so that an endpoint cannot
//     be aimed at loopback, cloud metadata or the cluster's own ranges, by
//     URL or by DNS (ForbiddenDestination, never retried);
//   - an endpoint's credentials (package credential) on each attempt:
//     headers and Basic or Bearer authorization from Secrets, an OAuth2
//     client-credentials token fetched through the same guarded client,
//     cached per endpoint until shortly before it expires and renewed once
//     on a 401, and a client certificate and private roots through one
//     HTTPS client per TLS fingerprint (credentials.go, oauth2.go); every
//     credential value is redacted from response excerpts;
//   - errors that name neither the URL's path, query or user information
//     nor any secret, because they are stored in the ledger and shown on
//     resources;
//   - Classify, a pure function from a Result and a policy's retryOn list
//     to a Verdict.
//
// The engine pushes thousands of attempts per second to one receiver, so
// Send reuses connections (a tuned http.Transport), encodes each envelope
// into one buffer of its size, sends headers and envelope in one write and
// allocates little else.
package dispatch
