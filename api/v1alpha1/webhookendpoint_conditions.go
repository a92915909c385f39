package v1alpha1

// Reasons of a WebhookEndpoint's conditions, in families: the Ready reasons
// name what is missing, the Healthy reasons what the last attempts did, the
// DeliveriesExhausted reasons whether work waits for an admin.
const (
	// ReasonRetryPolicyNotFound (Ready=False): spec.retryPolicyRef names a
	// RetryPolicy that does not exist. The engine keeps the configuration it
	// had.
	ReasonRetryPolicyNotFound = "RetryPolicyNotFound"
	// ReasonRetryPolicyNotReady (Ready=False): the referenced RetryPolicy
	// exists but is not Ready (its own Ready condition says why). The engine
	// keeps the configuration it had.
	ReasonRetryPolicyNotReady = "RetryPolicyNotReady"
	// ReasonSigningSecretNotFound (Ready=False): the Secret or key named by
	// spec.signingSecretRef does not exist. The engine keeps the
	// configuration it had.
	ReasonSigningSecretNotFound = "SigningSecretNotFound"
	// ReasonSigningSecretInvalid (Ready=False): the signing secret is not a
	// whsec_ secret of 24 to 64 bytes, or the generated Secret's name is
	// taken by a Secret this endpoint does not own. The message never
	// contains the value.
	ReasonSigningSecretInvalid = "SigningSecretInvalid"
	// ReasonDestinationForbidden (Ready=False): spec.url is, or its host
	// resolves to, an address the operator does not deliver to (loopback,
	// link-local, cloud metadata, private or reserved ranges, the cluster's
	// service and pod ranges) and --allowed-destination-cidrs does not allow
	// it. The message names the address and its class. An endpoint never
	// registered stays unregistered; one the engine already had is paused
	// there (its deliveries wait, none is sent) until the url is allowed.
	ReasonDestinationForbidden = "DestinationForbidden"
	// ReasonURLInvalid (Ready=False): spec.url can never be dialled (a
	// port out of range, a host that is neither an IP address nor a DNS
	// name, an IPv6 zone...). The API server refuses such a url; this is
	// for objects stored before a rule existed. The message names the rule.
	// Like DestinationForbidden, the endpoint is not registered, or is
	// paused in the engine.
	ReasonURLInvalid = "URLInvalid"
	// ReasonHeadersInvalid (Ready=False): a static header in spec.headers
	// can never be sent as written: it is reserved (hookkeeper or the HTTP
	// stack sets it), repeats another's name in any case, or Go's HTTP
	// client refuses or alters its value. As for URLInvalid, the API server
	// refuses these; the message names the header, never its value.
	ReasonHeadersInvalid = "HeadersInvalid"
	// ReasonCredentialsUnavailable (Ready=False): a Secret or ConfigMap
	// that spec.headers[].valueFrom, spec.auth or spec.tls names is
	// missing, lacks the key, or holds a value that cannot be used (a
	// certificate and key that do not pair, a CA bundle without a
	// certificate, a header value with a line break). The message names the
	// object and the key, never the value. The engine holds the endpoint
	// paused: its deliveries wait and are sent once the value is readable.
	ReasonCredentialsUnavailable = "CredentialsUnavailable"
	// ReasonFilterInvalid (Ready=False): spec.filter does not compile, is
	// not a boolean, or may cost more than the limit; the message gives the
	// position. The endpoint receives no events until it is corrected.
	ReasonFilterInvalid = "FilterInvalid"
	// ReasonFilterOverBudget (Ready=False, and a Warning Event): spec.filter
	// kept exceeding its evaluation budget (time or cost): the events it
	// could not decide were not delivered to the endpoint. It stays until
	// the spec changes.
	ReasonFilterOverBudget = "FilterOverBudget"
	// ReasonNamespaceTerminating (Ready=False): the endpoint's namespace is
	// being deleted and refuses new objects, so the operator does not
	// re-create what the endpoint needs (its generated signing Secret); the
	// endpoint goes with the namespace. Not an error.
	ReasonNamespaceTerminating = "NamespaceTerminating"

	// ReasonNoFailures (Healthy=True): no attempt to the endpoint failed.
	ReasonNoFailures = "NoFailures"
	// ReasonLastAttemptSucceeded (Healthy=True): attempts failed, but the
	// last success is newer than the last failure.
	ReasonLastAttemptSucceeded = "LastAttemptSucceeded"
	// ReasonLastAttemptFailed (Healthy=False): the last failure is newer
	// than the last success.
	ReasonLastAttemptFailed = "LastAttemptFailed"
	// ReasonConsecutiveFailures (Healthy=False): the endpoint was already
	// unhealthy and attempts kept failing without a success in between.
	ReasonConsecutiveFailures = "ConsecutiveFailures"

	// ReasonUnresolvedDeliveries (DeliveriesExhausted=True): exhausted
	// deliveries wait for a DeliveryRecovery.
	ReasonUnresolvedDeliveries = "UnresolvedDeliveries"
	// ReasonNoneUnresolved (DeliveriesExhausted=False): no exhausted delivery
	// is unresolved.
	ReasonNoneUnresolved = "NoneUnresolved"
)

// Reasons of RetryBudgetLimited; ReasonRetriesDeferred is also the reason
// of the one Warning Event that announces a streak of deferrals.
const (
	// ReasonRetriesDeferred (RetryBudgetLimited=True): retries were deferred
	// by the retry budget within the last 2 minutes, on any replica.
	ReasonRetriesDeferred = "RetriesDeferred"
	// ReasonWithinBudget (RetryBudgetLimited=False): no retry was deferred
	// in the last 2 minutes, or the policy sets no budget.
	ReasonWithinBudget = "WithinBudget"
)

// ReasonDeliveriesExhausted is the reason of the Warning Event an endpoint
// gets when deliveries to it are exhausted.
const ReasonDeliveriesExhausted = "DeliveriesExhausted"

// Reasons of CircuitOpen, in two families: why it is open (True), why
// attempts flow (False). The True reasons are the ledger's breaker reasons.
const (
	// ReasonCircuitFailing (CircuitOpen=True): attempts kept failing, a
	// streak of the policy's circuitBreaker.failures over at least
	// circuitBreaker.minDuration. Probes follow at a growing interval.
	ReasonCircuitFailing = "Failing"
	// ReasonCircuitGone (CircuitOpen=True): the receiver answered 410 Gone,
	// a statement about the URL: no automatic probe unless the policy sets
	// circuitBreaker.goneProbeInterval. A new spec.url closes it, `kubectl
	// hookkeeper probe` asks for a probe.
	ReasonCircuitGone = "Gone"
	// ReasonCircuitClosed (CircuitOpen=False): the breaker has never opened.
	ReasonCircuitClosed = "Closed"
	// ReasonProbeSucceeded (CircuitOpen=False): a probe succeeded and closed
	// the breaker; the backlog drains over circuitBreaker.ramp.
	ReasonProbeSucceeded = "ProbeSucceeded"
	// ReasonURLChanged (CircuitOpen=False): spec.url changed while the
	// breaker was open, which closes it: a new URL is a new receiver.
	ReasonURLChanged = "URLChanged"
	// ReasonCircuitBreakerDisabled (CircuitOpen=False): the policy in
	// effect sets circuitBreaker.disabled and the breaker is closed.
	ReasonCircuitBreakerDisabled = "Disabled"
)

// Reasons of the Events of the circuit breaker.
const (
	// ReasonCircuitOpened is the Warning Event of each opening of an
	// endpoint's breaker (one per opening the ledger counts), naming
	// spec.owner.
	ReasonCircuitOpened = "CircuitOpened"
	// ReasonCircuitClosedEvent is the Normal Event of the breaker closing
	// (CircuitClosed).
	ReasonCircuitClosedEvent = "CircuitClosed"
	// ReasonProbeRequested is the Normal Event of a probe requested with
	// AnnotationProbeRequestedAt, once per request.
	ReasonProbeRequested = "ProbeRequested"
	// ReasonProbeRequestInvalid is the Warning Event of a probe request
	// whose value is not an RFC 3339 time; nothing is probed.
	ReasonProbeRequestInvalid = "ProbeRequestInvalid"
)

// AnnotationProbeRequestedAt on a WebhookEndpoint asks for a probe of its
// open circuit breaker now: an RFC 3339 time, written by `kubectl
// hookkeeper probe` with a merge patch (RBAC: patch webhookendpoints). The
// controller acts once per value: it records the value it acted on in
// status.breaker.probeRequest, so a GitOps re-apply of the same value asks
// for nothing.
const AnnotationProbeRequestedAt = "hookkeeper.dev/probe-requested-at"
