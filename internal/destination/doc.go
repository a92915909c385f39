// Package destination decides which network addresses hookkeeper may
// deliver to, and refuses the others when a connection is dialled.
//
// An operator that sends HTTP requests on behalf of every namespace must not
// become a way into the cluster's insides: whoever may create a
// WebhookEndpoint could otherwise aim it at the cloud metadata service, the
// kubelet, the API server or any pod. A Policy forbids, by default,
// loopback, the unspecified address, link-local (169.254.0.0/16,
// fe80::/10), the cloud metadata addresses, private ranges (RFC 1918,
// shared address space, unique local IPv6), multicast and reserved ranges,
// plus the cluster's service and pod ranges the operator names. A list of
// allowed networks overrides all of that: an address in an allowed network
// is always allowed (local development and the tests allow loopback).
//
// The check that matters happens at dial time: Policy.DialContext resolves
// the host itself, checks every address the name resolves to, and connects
// only to a checked address (and the dialer's Control hook checks the
// address once more as the socket is created). A DNS name that resolves to
// a forbidden address is therefore refused before any packet is sent to it,
// whatever the name looked like when the endpoint was reconciled. The
// reconcile-time check (Policy.CheckHost) exists to show the refusal on the
// endpoint's status; it is not what enforces it.
//
// IPv4-mapped IPv6 addresses are unmapped, zones are ignored, and the IPv4
// address embedded in a NAT64 (64:ff9b::/96) or 6to4 (2002::/16) address is
// judged as if it had been given directly, so that no spelling of a
// forbidden address slips past.
//
// The package knows nothing of Kubernetes or HTTP: the manager builds the
// Policy from its flags, package dispatch dials through it, and the
// WebhookEndpoint controller checks URLs with it.
package destination
