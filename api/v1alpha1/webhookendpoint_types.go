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

// RateLimit bounds how fast attempts are sent to one endpoint.
// +kubebuilder:validation:XValidation:rule="!has(self.burst) || self.burst >= self.perSecond",message="rateLimit.burst must be at least rateLimit.perSecond"
type RateLimit struct {
	// perSecond is the sustained number of attempts per second.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	PerSecond int32 `json:"perSecond"`

	// burst is how many attempts may be sent at once above the sustained
	// rate; defaults to perSecond.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	Burst *int32 `json:"burst,omitempty"`
}

// Header is a static HTTP header sent with every attempt.
// +kubebuilder:validation:XValidation:rule="!(self.name.lowerAscii() in ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'content-type', 'content-length', 'host', 'transfer-encoding', 'connection'])",message="headers must not set webhook-id, webhook-timestamp, webhook-signature, Content-Type, Content-Length, Host, Transfer-Encoding or Connection: hookkeeper sets them"
type Header struct {
	// name is the header name (an HTTP token).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[!#$%&'*+.^_|~0-9A-Za-z-]+$`
	Name string `json:"name"`

	// value is the header value. Do not put credentials here: headers are
	// part of the spec and readable by anyone who can read the endpoint.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[^\r\n\x00]*$`
	Value string `json:"value"`
}

// EventTypePattern is an exact event type ("order.created"), a prefix
// pattern ("order.*") or "*" for every type.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=128
// +kubebuilder:validation:Pattern=`^(\*|[a-zA-Z0-9][a-zA-Z0-9_-]*(\.[a-zA-Z0-9][a-zA-Z0-9_-]*)*(\.\*)?)$`
type EventTypePattern string

// WebhookEndpointSpec is where events of some types go and how.
type WebhookEndpointSpec struct {
	// url receives the deliveries: http or https, with a host, and without
	// user information or a fragment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="url must be an absolute http or https URL"
	// +kubebuilder:validation:XValidation:rule="!isURL(self) || url(self).getHostname() != ''",message="url must name a host"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*@')",message="url must not contain user information: put credentials in the signing secret, not the URL"
	// +kubebuilder:validation:XValidation:rule="!self.contains('#')",message="url must not contain a fragment"
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

	// headers are static headers sent with every attempt.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	Headers []Header `json:"headers,omitempty"`
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
}

// RecoveryAction is what a DeliveryRecovery can do for a delivery.
// +kubebuilder:validation:Enum=Retry;Reissue;Dismiss
type RecoveryAction string

const (
	// RecoveryRetry resends the same event identity.
	RecoveryRetry RecoveryAction = "Retry"
	// RecoveryReissue creates a new event identity with fresh material.
	RecoveryReissue RecoveryAction = "Reissue"
	// RecoveryDismiss resolves without resending.
	RecoveryDismiss RecoveryAction = "Dismiss"
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
	ExhaustedAt metav1.Time `json:"exhaustedAt"`
	// recovery is what can still resolve it: Retry while the event's
	// secrets and payload are present and within the replay window,
	// otherwise Reissue.
	// +required
	Recovery RecoveryAction `json:"recovery"`
}

// WebhookEndpointStatus is the endpoint as the engine sees it.
type WebhookEndpointStatus struct {
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready (policy and secret resolved, URL allowed, registered
	// with the engine), Healthy (recent attempts succeed) and
	// DeliveriesExhausted (True while unresolved exhausted deliveries exist).
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
	LastSuccessTime *metav1.Time `json:"lastSuccessTime,omitempty"`

	// lastFailureTime is when an attempt last failed.
	// +optional
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
}

// WebhookEndpoint is a destination for events of some types in its namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=whep,categories=hookkeeper
// +kubebuilder:validation:XValidation:rule="!has(self.spec.deadLetterRef) || self.spec.deadLetterRef.name != self.metadata.name",message="spec.deadLetterRef must name another endpoint: an endpoint cannot be its own dead-letter destination"
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Healthy",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Healthy")].status`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.deliveries.pending`
// +kubebuilder:printcolumn:name="Exhausted",type=integer,JSONPath=`.status.deliveries.exhaustedUnresolved`
// +kubebuilder:printcolumn:name="Last Success",type=date,JSONPath=`.status.lastSuccessTime`
// +kubebuilder:printcolumn:name="Last Failure",type=string,priority=1,JSONPath=`.status.lastFailureReason`
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
