package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReplayClass says how an event of a type may be sent again once its
// delivery was given up on.
// +kubebuilder:validation:Enum=Retryable;ReissueOnly;Never
type ReplayClass string

const (
	// ReplayRetryable: a Retry resends the same event while it can be sent
	// (its secrets present, within the replay window); a Reissue makes a
	// new one.
	ReplayRetryable ReplayClass = "Retryable"
	// ReplayReissueOnly: a Retry is refused (ReissueRequired) even while
	// the secrets exist; only a new event identity may be sent.
	ReplayReissueOnly ReplayClass = "ReissueOnly"
	// ReplayNever: neither a Retry nor a Reissue; a recovery can only
	// dismiss the delivery.
	ReplayNever ReplayClass = "Never"
)

// WebhookEventTypeSpec is the contract of one event type in a namespace.
type WebhookEventTypeSpec struct {
	// type is the event type this contract is for, exactly as published
	// ("order.created"; no patterns). At most one WebhookEventType of a
	// namespace holds a type: the oldest; a later one is not Ready
	// (TypeConflict).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9_-]*(\.[a-zA-Z0-9][a-zA-Z0-9_-]*)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="type is immutable: create another WebhookEventType"
	Type string `json:"type"`

	// description says what an event of this type means, for the catalog.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// schema is an OpenAPI v3 schema for the event's data, in the dialect
	// of CustomResourceDefinition schemas (type, properties, required,
	// enum, format, minimum, maxLength, pattern, items,
	// x-kubernetes-validations are not evaluated). A publish whose data
	// does not validate is refused with 422 and the path of the first
	// violation. A schema that does not compile makes the type not Ready
	// (SchemaInvalid), and every publish of the type is refused until it is
	// fixed.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Schema *apiextensionsv1.JSON `json:"schema,omitempty"`

	// requiredSecrets names the one-time secrets every publish of this type
	// must carry in secrets; a publish without one is refused, naming it.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	RequiredSecrets []string `json:"requiredSecrets,omitempty"`

	// replay is how an exhausted delivery of this type may be sent again:
	// Retryable (default), ReissueOnly or Never. DeliveryRecovery and
	// replay honour it.
	// +optional
	// +kubebuilder:default=Retryable
	Replay ReplayClass `json:"replay,omitempty"`

	// validFor is how long after its publish an event of this type may
	// still be delivered: a delivery not delivered by then is cancelled
	// with reason Expired and never sent late. A publisher may shorten it
	// per event (validUntil), never lengthen it.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('8760h')",message="validFor must be between 1s and 8760h"
	ValidFor *metav1.Duration `json:"validFor,omitempty"`

	// retryPolicyRef names a RetryPolicy of this namespace that replaces
	// the endpoint's policy for the deliveries of this type.
	// +optional
	RetryPolicyRef *LocalObjectReference `json:"retryPolicyRef,omitempty"`
}

// WebhookEventTypeStatus is the type as the controller sees it.
type WebhookEventTypeStatus struct {
	// observedGeneration is the generation the status describes; events
	// validated by this type record the generation they were validated
	// against.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// schema is None, Valid or Invalid: what publishes are checked
	// against.
	// +optional
	Schema string `json:"schema,omitempty"`

	// endpoints is how many WebhookEndpoints of the namespace subscribe to
	// this type (their eventTypes select it).
	// +optional
	Endpoints int32 `json:"endpoints"`
}

// Ready reasons of a WebhookEventType.
const (
	// ReasonSchemaInvalid (Ready=False): spec.schema is not a schema
	// CustomResourceDefinitions accept; publishes of the type are refused.
	ReasonSchemaInvalid = "SchemaInvalid"
	// ReasonTypeConflict (Ready=False): an older WebhookEventType of the
	// namespace holds the same type; this one is not in effect.
	ReasonTypeConflict = "TypeConflict"
)

// StrictEventTypesLabel on a Namespace, with value "true", refuses a
// publish of a type without a WebhookEventType in that namespace.
const StrictEventTypesLabel = "hookkeeper.dev/strict-event-types"

// WebhookEventType is the contract of an event type in its namespace: the
// schema of its data, the secrets it must carry, how it may be replayed,
// how long it stays valid and the retry policy of its deliveries. Together
// they are the namespace's catalog (kubectl get webhookeventtypes).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=whet,categories=hookkeeper
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Schema",type=string,JSONPath=`.status.schema`
// +kubebuilder:printcolumn:name="Required Secrets",type=string,JSONPath=`.spec.requiredSecrets`
// +kubebuilder:printcolumn:name="Replay",type=string,JSONPath=`.spec.replay`
// +kubebuilder:printcolumn:name="Valid For",type=string,JSONPath=`.spec.validFor`
// +kubebuilder:printcolumn:name="Endpoints",type=integer,JSONPath=`.status.endpoints`,description="WebhookEndpoints of the namespace subscribed to this type"
// +kubebuilder:printcolumn:name="Policy",type=string,priority=1,JSONPath=`.spec.retryPolicyRef.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WebhookEventType struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the type's contract.
	// +required
	Spec WebhookEventTypeSpec `json:"spec"`

	// status is the type as observed by the controller.
	// +optional
	Status WebhookEventTypeStatus `json:"status,omitempty"`

	// Undecodable lists the stored values the Go types could not decode and
	// left out, as "path: error"; empty for every object the CRD schema
	// admits. Set by UnmarshalJSON, never serialized (see DecodeError).
	Undecodable []string `json:"-"`
}

// WebhookEventTypeList is a list of WebhookEventType.
// +kubebuilder:object:root=true
type WebhookEventTypeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WebhookEventType `json:"items"`
}

func init() {
	SchemeBuilder.Register(&WebhookEventType{}, &WebhookEventTypeList{})
}
