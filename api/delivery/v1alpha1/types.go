package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// MaxAttemptsShown bounds the attempts a Delivery carries: the newest ones,
// with AttemptsOmitted counting the older ones. A policy's horizon bounds
// the attempts of a delivery already, but a MaxAge-only policy may make
// hundreds; one answer must stay small whatever the policy.
const MaxAttemptsShown = 20

// Delivery is one event bound for one endpoint, as the ledger records it.
// Its name is the ledger's delivery ID (dlv_...).
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type Delivery struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DeliverySpec   `json:"spec"`
	Status DeliveryStatus `json:"status"`
}

// DeliverySpec is what the delivery is for.
type DeliverySpec struct {
	// Endpoint is the name of the WebhookEndpoint (same namespace).
	Endpoint string `json:"endpoint"`
	// Owner is that endpoint's spec.owner now (not when the delivery was
	// made): whom to ask about it.
	// +optional
	Owner string `json:"owner,omitempty"`
	// Event is the name of the WebhookEvent delivered (its event ID).
	Event string `json:"event"`
	// EventType is the event's type.
	EventType string `json:"eventType"`
	// RetryOf names the exhausted delivery that a recovery retry resends.
	// +optional
	RetryOf string `json:"retryOf,omitempty"`
	// TraceID is the OpenTelemetry trace its event was published in, and
	// every attempt of it sent in (docs/operations/tracing.md); empty when
	// tracing was off.
	// +optional
	TraceID string `json:"traceID,omitempty"`
}

// DeliveryStatus is where the delivery stands.
type DeliveryStatus struct {
	// State is one of Scheduled, InFlight, AwaitingAck, Delivered,
	// Exhausted, Cancelled.
	State string `json:"state"`
	// AttemptCount is how many attempts were made.
	AttemptCount int32 `json:"attemptCount"`
	// DueAt is when the next attempt is due (State Scheduled).
	// +optional
	DueAt *metav1.Time `json:"dueAt,omitempty"`
	// FirstAttemptAt is when the first attempt started.
	// +optional
	FirstAttemptAt *metav1.Time `json:"firstAttemptAt,omitempty"`
	// AckDeadline is when an acknowledgement is due (State AwaitingAck).
	// +optional
	AckDeadline *metav1.Time `json:"ackDeadline,omitempty"`
	// FinishedAt is when the delivery reached its terminal state.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// LastStatus is the HTTP status of the last attempt (0: no response).
	// +optional
	LastStatus int32 `json:"lastStatus,omitempty"`
	// LastError describes why the last attempt failed.
	// +optional
	LastError string `json:"lastError,omitempty"`
	// Reason says why an exhausted delivery was given up on: MaxAttempts,
	// MaxAge, NonRetryable, Gone, AckRejected, AckTimeout.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Resolution is what became of an exhausted delivery: Unresolved,
	// Retried, Reissued, Dismissed.
	// +optional
	Resolution string `json:"resolution,omitempty"`
	// ResolvedBy names the DeliveryRecovery operation that resolved it.
	// +optional
	ResolvedBy string `json:"resolvedBy,omitempty"`
	// ReplacedBy names what a recovery made of this delivery.
	// +optional
	ReplacedBy *Replacement `json:"replacedBy,omitempty"`
	// Attempts are the newest attempts, oldest first, at most
	// MaxAttemptsShown (20); only a get of one delivery carries them.
	// +optional
	// +listType=atomic
	Attempts []Attempt `json:"attempts,omitempty"`
	// AttemptsOmitted counts the older attempts not shown.
	// +optional
	AttemptsOmitted int32 `json:"attemptsOmitted,omitempty"`
}

// Replacement names what replaced a resolved delivery.
type Replacement struct {
	// Delivery is the retry (same event) or the reissue's new delivery.
	// +optional
	Delivery string `json:"delivery,omitempty"`
	// Event is the reissue's new event (for a retry: the same event).
	// +optional
	Event string `json:"event,omitempty"`
}

// Attempt is one HTTP request to the endpoint and what came back.
type Attempt struct {
	// Number counts attempts from 1.
	Number int32 `json:"number"`
	// StartedAt is when the request started.
	StartedAt metav1.Time `json:"startedAt"`
	// Duration is how long it took, as a Go duration string.
	Duration metav1.Duration `json:"duration"`
	// StatusCode is the HTTP status (0: no response, see Error).
	// +optional
	StatusCode int32 `json:"statusCode,omitempty"`
	// Error describes a failure.
	// +optional
	Error string `json:"error,omitempty"`
}

// DeliveryList is a page of deliveries.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type DeliveryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// +listType=atomic
	Items []Delivery `json:"items"`
}

// WebhookEvent is one published event. Its name is the event ID (evt_...).
// Its one-time secrets are never shown; its data only to callers allowed to
// get the webhookevents/data subresource in its namespace. Creating one
// publishes an event, with the HTTP API's permission, validation and
// idempotency (docs/delivery-api.md).
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type WebhookEvent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec WebhookEventSpec `json:"spec"`
	// Status is the server's; a create leaves it out.
	// +optional
	Status WebhookEventStatus `json:"status,omitempty"`
}

// WebhookEventSpec is the event as published.
type WebhookEventSpec struct {
	// Type is the event type.
	Type string `json:"type"`
	// Data is the JSON object the producer sent; absent when the caller may
	// not read event data (see status.dataHidden) or retention pruned it.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Data *runtime.RawExtension `json:"data,omitempty"`
	// SecretNames names the event's one-time secrets; their values are never
	// shown.
	// +optional
	// +listType=atomic
	SecretNames []string `json:"secretNames,omitempty"`
	// ReissueOf names the event this one reissues.
	// +optional
	ReissueOf string `json:"reissueOf,omitempty"`
	// IdempotencyKey is the key the producer published it with. In a
	// create it is the HTTP API's Idempotency-Key: the same key with the
	// same event answers the original event, with another event 409.
	// +optional
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// Endpoint, in a create only, addresses the event to this one
	// WebhookEndpoint of the namespace (whatever its eventTypes) instead of
	// every endpoint subscribed to its type. Not stored: the event's
	// deliveries say where it went.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// ValidUntil is when the event stops being deliverable: a delivery not
	// delivered by then is cancelled (Expired), never sent late. In a
	// create it may shorten its WebhookEventType's validFor, never
	// lengthen it.
	// +optional
	ValidUntil *metav1.Time `json:"validUntil,omitempty"`
	// TypeGeneration is the generation of the WebhookEventType that
	// validated the event; absent when none did.
	// +optional
	TypeGeneration int64 `json:"typeGeneration,omitempty"`
}

// WebhookEventStatus is what became of the event's material.
type WebhookEventStatus struct {
	// DataHidden is true when the event has data that the caller may not
	// read.
	// +optional
	DataHidden bool `json:"dataHidden,omitempty"`
	// SecretsScrubbedAt is when the one-time secrets were destroyed.
	// +optional
	SecretsScrubbedAt *metav1.Time `json:"secretsScrubbedAt,omitempty"`
	// DataPrunedAt is when retention removed the data.
	// +optional
	DataPrunedAt *metav1.Time `json:"dataPrunedAt,omitempty"`
}

// WebhookEventList is a page of events.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type WebhookEventList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// +listType=atomic
	Items []WebhookEvent `json:"items"`
}
