package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AcknowledgementMode says what completes a delivery.
// +kubebuilder:validation:Enum=Response;Callback
type AcknowledgementMode string

const (
	// AcknowledgementResponse completes a delivery on a 2xx response.
	AcknowledgementResponse AcknowledgementMode = "Response"
	// AcknowledgementCallback treats a 2xx as "accepted" only; the delivery
	// completes when the receiver posts a signed acknowledgement, which may
	// also reject the event.
	AcknowledgementCallback AcknowledgementMode = "Callback"
)

// Acknowledgement says what the receiver must do for a delivery to count as
// delivered: a 2xx from an ingress that only queued the envelope is not
// business success.
// +kubebuilder:validation:XValidation:rule="!has(self.timeout) || self.mode == 'Callback'",message="acknowledgement.timeout only applies to mode Callback"
type Acknowledgement struct {
	// mode is Response (a 2xx completes the delivery) or Callback (a 2xx means
	// accepted; completion needs a signed POST to /v1/acks/{deliveryID}).
	// +optional
	// +kubebuilder:default=Response
	Mode AcknowledgementMode `json:"mode,omitempty"`

	// timeout is how long after a 2xx the receiver has to acknowledge
	// (Callback only; defaults to 15m). A missing acknowledgement counts as a
	// failed attempt and is retried on the policy.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('168h')",message="acknowledgement.timeout must be between 1s and 168h"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// RateLimit bounds how fast attempts are sent to one endpoint, by every
// replica together: sends are spaced 1/perSecond apart, burst-1 of them
// allowed ahead after a pause, so that any second sees at most
// perSecond+burst.
type RateLimit struct {
	// perSecond is the sustained number of attempts per second.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	PerSecond int32 `json:"perSecond"`

	// burst is how many attempts may be sent at once after a pause;
	// defaults to 1 (evenly spaced).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	Burst *int32 `json:"burst,omitempty"`
}

// Header is an HTTP header sent with every attempt: a static value, or a
// value read from a Secret (valueFrom), which is where a credential such as
// an API key belongs. The names hookkeeper or the HTTP stack sets are
// refused, compared case-insensitively; the list is
// internal/wire.ReservedHeaders, and a test keeps this rule's list equal to
// it. The value's rule sits here, not on the value, so that a refusal shows
// "object" instead of the value.
// +kubebuilder:validation:XValidation:rule="!(self.name.lowerAscii() in ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'hookkeeper-delivery-id', 'hookkeeper-replay-until', 'content-type', 'user-agent', 'host', 'content-length', 'transfer-encoding', 'trailer', 'te', 'connection', 'keep-alive', 'proxy-connection', 'upgrade', 'accept-encoding'])",message="headers must not set a header hookkeeper or the HTTP stack sets (webhook-id, webhook-timestamp, webhook-signature, hookkeeper-delivery-id, hookkeeper-replay-until, content-type, user-agent, host, content-length, transfer-encoding, trailer, te, connection, keep-alive, proxy-connection, upgrade, accept-encoding)"
// +kubebuilder:validation:XValidation:rule="!has(self.value) || !self.value.matches('[\\x00-\\x08\\x0a-\\x1f\\x7f]|^[ \\t]|[ \\t]$')",message="header values must not contain control characters other than tab, nor begin or end with a space or tab",fieldPath=.value
// +kubebuilder:validation:XValidation:rule="!(has(self.value) && has(self.valueFrom))",message="a header sets value or valueFrom, not both"
type Header struct {
	// name is the header name (an HTTP token), compared case-insensitively.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-!#$%&\\'*+.^_`|~0-9A-Za-z]+$')",message="header names must be HTTP tokens: letters, digits and !#$%&'*+-.^_`|~"
	Name string `json:"name"`

	// value is the header value (empty when neither it nor valueFrom is
	// set, as with a container's environment variable), sent as written: no control characters
	// but tab, and no surrounding spaces or tabs (Go's HTTP client refuses
	// the first and trims the second). Do not put credentials here: the
	// spec is readable by anyone who can read the endpoint; use valueFrom.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value,omitempty"`

	// valueFrom reads the value from a key of a Secret in the endpoint's
	// namespace, at every change of the Secret, on every replica, without
	// a restart. The same rules as value apply to what it holds.
	// +optional
	ValueFrom *HeaderValueSource `json:"valueFrom,omitempty"`
}

// HeaderValueSource says where a header's value comes from.
type HeaderValueSource struct {
	// secretKeyRef selects a key of a Secret in the endpoint's namespace.
	// +required
	SecretKeyRef SecretKeySelector `json:"secretKeyRef"`
}

// Auth is how attempts authenticate to the receiver: exactly one of basic,
// bearer and oauth2, each read from Secrets in the endpoint's namespace.
// It sets the Authorization header.
// +kubebuilder:validation:XValidation:rule="(has(self.basic) ? 1 : 0) + (has(self.bearer) ? 1 : 0) + (has(self.oauth2) ? 1 : 0) == 1",message="auth sets exactly one of basic, bearer and oauth2"
type Auth struct {
	// basic is HTTP basic authentication.
	// +optional
	Basic *BasicAuth `json:"basic,omitempty"`
	// bearer sends a token from a Secret as "Authorization: Bearer <token>".
	// +optional
	Bearer *BearerAuth `json:"bearer,omitempty"`
	// oauth2 fetches an access token with the client credentials grant and
	// sends it as a bearer token.
	// +optional
	OAuth2 *OAuth2Auth `json:"oauth2,omitempty"`
}

// BasicAuth reads a username and a password from one Secret.
type BasicAuth struct {
	// secretRef names a Secret with the keys username and password (a
	// kubernetes.io/basic-auth Secret has them).
	// +required
	SecretRef LocalObjectReference `json:"secretRef"`
}

// BearerAuth reads a bearer token from a Secret.
type BearerAuth struct {
	// tokenSecretRef selects the Secret key that holds the token.
	// +required
	TokenSecretRef SecretKeySelector `json:"tokenSecretRef"`
}

// OAuth2Auth is the OAuth 2.0 client credentials grant (RFC 6749 §4.4).
// The token is fetched once, cached until shortly before it expires,
// shared by the endpoint's attempts, and fetched again once when the
// receiver answers 401. The token URL is a destination like the endpoint's
// url: the same safe-destination rules apply to it.
type OAuth2Auth struct {
	// tokenURL is the authorization server's token endpoint.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="tokenURL must be an absolute http or https URL with a host"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*@')",message="tokenURL must not contain user information: the client id and secret come from Secrets"
	TokenURL string `json:"tokenURL"`

	// clientIDRef selects the Secret key that holds the client id.
	// +required
	ClientIDRef SecretKeySelector `json:"clientIDRef"`

	// clientSecretRef selects the Secret key that holds the client secret.
	// +required
	ClientSecretRef SecretKeySelector `json:"clientSecretRef"`

	// scopes are requested with the token.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^[\x21\x23-\x5b\x5d-\x7e]+$`
	Scopes []string `json:"scopes,omitempty"`

	// audience is sent as the token request's audience parameter.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Audience string `json:"audience,omitempty"`

	// endpointParams are further parameters of the token request (for
	// example resource). They are not secret: they sit in the spec.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['grant_type', 'client_id', 'client_secret', 'scope', 'audience']))",message="endpointParams must not set grant_type, client_id, client_secret, scope or audience: they have fields of their own"
	EndpointParams map[string]string `json:"endpointParams,omitempty"`
}

// EndpointTLS is the HTTPS client of the endpoint (and of its OAuth2 token
// URL): a client certificate for mutual TLS, and the CAs its server
// certificate is verified against.
// +kubebuilder:validation:XValidation:rule="has(self.clientCertificateSecretRef) || has(self.caBundle)",message="tls sets clientCertificateSecretRef, caBundle or both"
// +kubebuilder:validation:XValidation:rule="!has(self.includeSystemRoots) || !self.includeSystemRoots || has(self.caBundle)",message="tls.includeSystemRoots only applies with tls.caBundle"
type EndpointTLS struct {
	// clientCertificateSecretRef names a kubernetes.io/tls Secret (keys
	// tls.crt and tls.key) whose certificate is presented to the receiver.
	// +optional
	ClientCertificateSecretRef *LocalObjectReference `json:"clientCertificateSecretRef,omitempty"`

	// caBundle holds the PEM certificates trusted to sign the receiver's
	// certificate, instead of the system roots (or in addition to them,
	// with includeSystemRoots).
	// +optional
	CABundle *CABundleSource `json:"caBundle,omitempty"`

	// includeSystemRoots trusts the system roots as well as caBundle.
	// +optional
	IncludeSystemRoots bool `json:"includeSystemRoots,omitempty"`
}

// CABundleSource is a key of a ConfigMap or of a Secret in the endpoint's
// namespace holding PEM certificates.
// +kubebuilder:validation:XValidation:rule="has(self.configMapKeyRef) != has(self.secretKeyRef)",message="caBundle sets exactly one of configMapKeyRef and secretKeyRef"
type CABundleSource struct {
	// configMapKeyRef selects a ConfigMap key.
	// +optional
	ConfigMapKeyRef *ConfigMapKeySelector `json:"configMapKeyRef,omitempty"`
	// secretKeyRef selects a Secret key.
	// +optional
	SecretKeyRef *SecretKeySelector `json:"secretKeyRef,omitempty"`
}

// EventTypePattern is an exact event type ("order.created"), a prefix
// pattern ("order.*") or "*" for every type.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=128
// +kubebuilder:validation:Pattern=`^(\*|[a-zA-Z0-9][a-zA-Z0-9_-]*(\.[a-zA-Z0-9][a-zA-Z0-9_-]*)*(\.\*)?)$`
type EventTypePattern string

// WebhookEndpointSpec is where events of some types go and how.
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || (isURL(self.url) && url(self.url).getScheme() == 'https')",message="tls only applies to an https url"
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !has(self.headers) || !self.headers.exists(h, h.name.lowerAscii() == 'authorization')",message="headers must not set Authorization when auth is set"
type WebhookEndpointSpec struct {
	// url receives the deliveries: http or https, with a host that is an IP
	// address or an ASCII DNS name, an optional port from 1 to 65535, and
	// without user information, a fragment or surrounding whitespace. The
	// rules are internal/wire.CheckURL's, which the controller applies too.
	// (The host is matched on self, whose size is bounded: the API server
	// cannot bound the cost of isIP or a regular expression on
	// url().getHostname().)
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self == self.trim()",message="url must not begin or end with whitespace"
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="url must be an absolute http or https URL"
	// +kubebuilder:validation:XValidation:rule="!isURL(self) || url(self).getHostname() != ''",message="url must name a host"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*@')",message="url must not contain user information: put credentials in the signing secret, not the URL"
	// +kubebuilder:validation:XValidation:rule="!self.contains('#')",message="url must not contain a fragment"
	// +kubebuilder:validation:XValidation:rule="!isURL(self) || url(self).getPort() == '' || (size(url(self).getPort()) <= 5 && int(url(self).getPort()) >= 1 && int(url(self).getPort()) <= 65535)",message="url port must be a number from 1 to 65535 of at most 5 digits"
	// +kubebuilder:validation:XValidation:rule="!isURL(self) || url(self).getHostname() == '' || self.matches('^[a-zA-Z][-a-zA-Z0-9+.]*://(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])([.](25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}(:[0-9]*)?([/?#].*)?$') || (self.matches('^[a-zA-Z][-a-zA-Z0-9+.]*://[[][^]/?#@]*[]](:[0-9]*)?([/?#].*)?$') && isIP(self.substring(self.indexOf('[') + 1, self.indexOf(']')))) || (self.matches('^[a-zA-Z][-a-zA-Z0-9+.]*://([A-Za-z0-9_]([-A-Za-z0-9_]{0,61}[A-Za-z0-9_])?[.])*[A-Za-z0-9_]([-A-Za-z0-9_]{0,61}[A-Za-z0-9_])?[.]?(:[0-9]*)?([/?#].*)?$') && !self.matches('^[a-zA-Z][-a-zA-Z0-9+.]*://[0-9.]+(:[0-9]*)?([/?#].*)?$') && (size(url(self).getHostname()) <= 253 || (size(url(self).getHostname()) == 254 && url(self).getHostname().endsWith('.'))))",message="url host must be an IP address (IPv6 in brackets, without a zone, not IPv4-mapped) or a DNS name of ASCII labels of 1 to 63 letters, digits, '-' or '_' (punycode for international names)"
	URL string `json:"url"`

	// eventTypes selects the events delivered here: exact types
	// ("order.created"), prefix patterns ("order.*") or "*".
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	EventTypes []EventTypePattern `json:"eventTypes"`

	// retryPolicyRef names the RetryPolicy in this namespace; absent means the
	// operator's default policy.
	// +optional
	RetryPolicyRef *LocalObjectReference `json:"retryPolicyRef,omitempty"`

	// signingSecretRef names the Secret key holding the whsec_ signing secret.
	// Absent: the operator generates a Secret owned by this endpoint.
	// +optional
	SigningSecretRef *SecretKeyReference `json:"signingSecretRef,omitempty"`

	// signingRotationGracePeriod is how long the previous signing secret
	// stays valid after a rotation; during it every attempt is signed with
	// both, so receivers can roll over without dropping deliveries.
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('720h')",message="signingRotationGracePeriod must be at most 720h"
	SigningRotationGracePeriod *metav1.Duration `json:"signingRotationGracePeriod,omitempty"`

	// acknowledgement says what completes a delivery.
	// +optional
	// +kubebuilder:default={mode: Response}
	Acknowledgement *Acknowledgement `json:"acknowledgement,omitempty"`

	// paused stops attempts to this endpoint. Deliveries keep accumulating
	// and are sent when it is unpaused; nothing is dropped.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// owner names the team or contact responsible for this endpoint's
	// exhausted work (for example team-payments or payments@example.com):
	// it is carried in the DeliveriesExhausted Event and condition, the
	// dead-letter event, the delivery read APIs and the owner label of the
	// exhaustion metrics, so that an alert reaches the team that owns the
	// endpoint. 1-63 characters:
	// letters, digits and . _ - @ +, starting and ending with a letter or
	// digit.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9._@+-]*[A-Za-z0-9])?$`
	Owner string `json:"owner,omitempty"`

	// deadLetterRef names another WebhookEndpoint in this namespace that
	// receives a hookkeeper.delivery.exhausted event for every delivery to
	// this endpoint that is exhausted.
	// +optional
	DeadLetterRef *LocalObjectReference `json:"deadLetterRef,omitempty"`

	// rateLimit bounds the attempts per second to this endpoint.
	// +optional
	RateLimit *RateLimit `json:"rateLimit,omitempty"`

	// maxInFlight bounds the attempts to this endpoint in progress at once.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxInFlight *int32 `json:"maxInFlight,omitempty"`

	// headers are static headers sent with every attempt; names are
	// compared case-insensitively, so a name appears once in any case.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(h, self.exists_one(o, o.name.lowerAscii() == h.name.lowerAscii()))",message="headers must not repeat a name (names are compared case-insensitively)"
	// +listType=map
	// +listMapKey=name
	Headers []Header `json:"headers,omitempty"`

	// auth authenticates attempts to the receiver with credentials read
	// from Secrets: basic, bearer or OAuth2 client credentials.
	// +optional
	Auth *Auth `json:"auth,omitempty"`

	// tls configures the HTTPS client: a client certificate (mutual TLS)
	// and private CAs. Only with an https url.
	// +optional
	TLS *EndpointTLS `json:"tls,omitempty"`

	// filter is a CEL expression over the event that must be true for the
	// endpoint to receive it, in addition to eventTypes: the variables are
	// type (string), data (the event's JSON object) and publisherNamespace (the
	// publisher's), for example `data.amount > 1000 && data.currency ==
	// "EUR"`. It is compiled and cost-checked when the endpoint is
	// reconciled: an invalid expression makes the endpoint not Ready
	// (FilterInvalid) and it receives nothing until it is corrected. An
	// event on which it cannot be evaluated (a missing field) does not
	// match.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Filter string `json:"filter,omitempty"`
}

// DeliveryCounts are the endpoint's deliveries by state.
type DeliveryCounts struct {
	// pending deliveries are scheduled for a first attempt or a retry.
	// +optional
	Pending int64 `json:"pending"`
	// inFlight deliveries have an attempt in progress.
	// +optional
	InFlight int64 `json:"inFlight"`
	// awaitingAck deliveries were accepted and wait for a callback.
	// +optional
	AwaitingAck int64 `json:"awaitingAck"`
	// delivered deliveries completed.
	// +optional
	Delivered int64 `json:"delivered"`
	// exhaustedUnresolved deliveries were given up on and wait for a
	// DeliveryRecovery.
	// +optional
	ExhaustedUnresolved int64 `json:"exhaustedUnresolved"`
	// throttled deliveries are due and not sent yet: held by the
	// endpoint's rateLimit, maxInFlight or retry budget, its namespace's
	// fair share, an open breaker, or engines falling behind (0 while
	// paused, which holds them on purpose). Read at most 10 s before the
	// status was written.
	// +optional
	Throttled int64 `json:"throttled"`
	// oldestThrottledDueTime is when the oldest throttled delivery was due;
	// the shipped alert HookkeeperDeliveriesThrottled fires once it is over
	// 10 minutes old.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	OldestThrottledDueTime *metav1.Time `json:"oldestThrottledDueTime,omitempty"`
}

// RecoveryAction is what a DeliveryRecovery can do for a delivery (or, in
// a Replay's items, Replay: it sent the event again).
// +kubebuilder:validation:Enum=Retry;Reissue;Dismiss;Replay
type RecoveryAction string

const (
	// RecoveryRetry resends the same event identity.
	RecoveryRetry RecoveryAction = "Retry"
	// RecoveryReissue creates a new event identity with fresh material.
	RecoveryReissue RecoveryAction = "Reissue"
	// RecoveryDismiss resolves without resending.
	RecoveryDismiss RecoveryAction = "Dismiss"
	// RecoveryReplay is the action of a Replay's items.
	RecoveryReplay RecoveryAction = "Replay"
)

// ExhaustedDelivery is one unresolved exhausted delivery, as listed on the
// endpoint's status.
type ExhaustedDelivery struct {
	// deliveryID identifies the delivery in the ledger.
	// +required
	DeliveryID string `json:"deliveryID"`
	// eventID is the event identity (the webhook-id header).
	// +required
	EventID string `json:"eventID"`
	// eventType is the event's type.
	// +required
	EventType string `json:"eventType"`
	// attempts is the number of attempts made.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Attempts int32 `json:"attempts"`
	// reason the delivery was exhausted: MaxAttempts, MaxAge, NonRetryable,
	// Gone, AckRejected or AckTimeout.
	// +required
	Reason string `json:"reason"`
	// lastError describes the last attempt's failure (never a secret).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	LastError string `json:"lastError,omitempty"`
	// exhaustedAt is when the delivery was given up on.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	ExhaustedAt metav1.Time `json:"exhaustedAt"`
	// recovery is what can still resolve it: Retry while the event's
	// secrets and payload are present and within the replay window,
	// otherwise Reissue.
	// +required
	Recovery RecoveryAction `json:"recovery"`
}

// CircuitState is whether an endpoint's circuit breaker lets attempts
// through.
// +kubebuilder:validation:Enum=Closed;Open
type CircuitState string

const (
	// CircuitClosed: attempts are made on the retry policy.
	CircuitClosed CircuitState = "Closed"
	// CircuitOpen: no attempt is made but one probe at a time; the
	// endpoint's deliveries wait.
	CircuitOpen CircuitState = "Open"
)

// CircuitBreakerStatus is an endpoint's circuit breaker as the ledger
// holds it, shared by every replica (docs/operations/circuit-breaker.md).
// Only the controller writes it: it is status, so a re-apply of the
// manifest neither resets nor fights it.
type CircuitBreakerStatus struct {
	// state is Closed or Open.
	// +required
	State CircuitState `json:"state"`

	// reason is why the breaker opened last: Failing (a streak of failed
	// attempts) or Gone (the receiver answered 410 Gone). Kept once it
	// closes.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`

	// openedAt is when the breaker opened last.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	OpenedAt *metav1.Time `json:"openedAt,omitempty"`

	// openings is how often the breaker has opened.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Openings int64 `json:"openings,omitempty"`

	// failures is the length of the streak of failures that opened it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Failures int32 `json:"failures,omitempty"`

	// lastFailure describes the streak's last failure, such as "HTTP 503"
	// (never a secret).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	LastFailure string `json:"lastFailure,omitempty"`

	// nextProbeAt is when the next probe is due while it is open; absent
	// when no automatic probe is scheduled (after a 410 Gone, unless the
	// policy sets circuitBreaker.goneProbeInterval).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	NextProbeAt *metav1.Time `json:"nextProbeAt,omitempty"`

	// probes counts the probes since it opened last.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Probes int32 `json:"probes,omitempty"`

	// lastProbeAt is when the last probe since it opened ended.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	LastProbeAt *metav1.Time `json:"lastProbeAt,omitempty"`

	// lastProbeResult is how the last probe failed, such as "HTTP 503";
	// empty when it succeeded.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	LastProbeResult string `json:"lastProbeResult,omitempty"`

	// closedAt is when the breaker closed last.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	ClosedAt *metav1.Time `json:"closedAt,omitempty"`

	// closeReason is why it closed last: ProbeSucceeded or URLChanged.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	CloseReason string `json:"closeReason,omitempty"`

	// probeRequest is the last value of the annotation
	// hookkeeper.dev/probe-requested-at the controller acted on (`kubectl
	// hookkeeper probe`): a request is acted on once, when the annotation
	// differs from it, so re-applying a manifest that carries the
	// annotation asks for nothing.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ProbeRequest string `json:"probeRequest,omitempty"`
}

// WebhookEndpointStatus is the endpoint as the engine sees it.
type WebhookEndpointStatus struct {
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready (policy and secret resolved, URL allowed, registered
	// with the engine), Healthy (recent attempts succeed),
	// DeliveriesExhausted (True while unresolved exhausted deliveries exist)
	// and CircuitOpen (True while the circuit breaker holds deliveries).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// retryPolicyName is the RetryPolicy in effect.
	// +optional
	RetryPolicyName string `json:"retryPolicyName,omitempty"`

	// signingSecretName is the Secret the endpoint signs with (generated
	// when spec.signingSecretRef is absent).
	// +optional
	SigningSecretName string `json:"signingSecretName,omitempty"`

	// deliveries counts the endpoint's deliveries by state.
	// +optional
	Deliveries DeliveryCounts `json:"deliveries,omitempty"`

	// lastSuccessTime is when an attempt last succeeded.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	LastSuccessTime *metav1.Time `json:"lastSuccessTime,omitempty"`

	// lastFailureTime is when an attempt last failed.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	LastFailureTime *metav1.Time `json:"lastFailureTime,omitempty"`

	// lastFailureReason says why the last failed attempt failed.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	LastFailureReason string `json:"lastFailureReason,omitempty"`

	// recentExhausted lists the most recent unresolved exhausted deliveries,
	// newest first, at most 20; deliveries.exhaustedUnresolved has the total.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	RecentExhausted []ExhaustedDelivery `json:"recentExhausted,omitempty"`

	// evidence is what the endpoint's retry policies achieved for it.
	// +optional
	Evidence *DeliveryEvidence `json:"evidence,omitempty"`

	// breaker is the endpoint's circuit breaker (condition CircuitOpen);
	// absent until the controller has read it. spec.paused overrides it:
	// a paused endpoint is sent nothing, probes included, whatever it
	// shows.
	// +optional
	Breaker *CircuitBreakerStatus `json:"breaker,omitempty"`
}

// WebhookEndpoint is a destination for events of some types in its namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=whep,categories=hookkeeper
// +kubebuilder:validation:XValidation:rule="!has(self.spec.deadLetterRef) || self.spec.deadLetterRef.name != self.metadata.name",message="spec.deadLetterRef must name another endpoint: an endpoint cannot be its own dead-letter destination"
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Healthy",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Healthy")].status`
// +kubebuilder:printcolumn:name="Breaker",type=string,JSONPath=`.status.breaker.state`,description="Open while the circuit breaker holds deliveries (condition CircuitOpen)"
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.deliveries.pending`
// +kubebuilder:printcolumn:name="Exhausted",type=integer,JSONPath=`.status.deliveries.exhaustedUnresolved`
// +kubebuilder:printcolumn:name="Last Success",type=date,JSONPath=`.status.lastSuccessTime`
// +kubebuilder:printcolumn:name="Last Failure",type=string,priority=1,JSONPath=`.status.lastFailureReason`
// +kubebuilder:printcolumn:name="First Try",type=string,JSONPath=`.status.evidence.last24h.firstTry`,description="Share of the last 24h's settled deliveries delivered on the first attempt"
// +kubebuilder:printcolumn:name="Recovered",type=integer,priority=1,JSONPath=`.status.evidence.last24h.recovered`,description="Deliveries of the last 24h delivered by a retry"
// +kubebuilder:printcolumn:name="Exhausted 24h",type=integer,priority=1,JSONPath=`.status.evidence.last24h.exhausted`,description="Deliveries exhausted in the last 24h"
// +kubebuilder:printcolumn:name="Budget Limited",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="RetryBudgetLimited")].status`,description="True while the retry budget defers retries"
// +kubebuilder:printcolumn:name="Policy",type=string,priority=1,JSONPath=`.status.retryPolicyName`,description="The RetryPolicy in effect; empty for the operator's default policy"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WebhookEndpoint struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired endpoint.
	// +required
	Spec WebhookEndpointSpec `json:"spec"`

	// status is the endpoint as observed by the controller and the engine.
	// +optional
	Status WebhookEndpointStatus `json:"status,omitempty"`

	// Undecodable lists the stored values the Go types could not decode and
	// left out, as "path: error"; empty for every object the CRD schema
	// admits. Set by UnmarshalJSON, never serialized (see DecodeError).
	Undecodable []string `json:"-"`
}

// WebhookEndpointList is a list of WebhookEndpoint.
// +kubebuilder:object:root=true
type WebhookEndpointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WebhookEndpoint `json:"items"`
}

func init() {
	SchemeBuilder.Register(&WebhookEndpoint{}, &WebhookEndpointList{})
}
