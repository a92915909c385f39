package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WebhookQuotaName is the one name a WebhookQuota may have: a namespace
// has at most one, so that its limits are never a sum or a choice.
const WebhookQuotaName = "default"

// WebhookQuotaHard are a namespace's hard limits on publishing; a limit
// left out is no limit.
// +kubebuilder:validation:XValidation:rule="has(self.publishesPerSecond) || has(self.eventsPerDay) || has(self.payloadBytesRetained)",message="hard must set at least one of publishesPerSecond, eventsPerDay, payloadBytesRetained"
// +kubebuilder:validation:XValidation:rule="!has(self.publishBurst) || has(self.publishesPerSecond)",message="publishBurst goes with publishesPerSecond"
type WebhookQuotaHard struct {
	// publishesPerSecond is the sustained rate of publishes the namespace
	// may make, through either door, over every replica together.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	PublishesPerSecond *int32 `json:"publishesPerSecond,omitempty"`

	// publishBurst is how many publishes may come at once above the rate;
	// default: publishesPerSecond (one second's worth).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	PublishBurst *int32 `json:"publishBurst,omitempty"`

	// eventsPerDay bounds the events the namespace may publish per UTC
	// day (idempotent retries of accepted events do not count).
	// +optional
	// +kubebuilder:validation:Minimum=1
	EventsPerDay *int64 `json:"eventsPerDay,omitempty"`

	// payloadBytesRetained bounds the bytes of event data the ledger keeps
	// for the namespace's publishes until retention prunes them (a
	// quantity: "512Mi", "10G"); it must be at least 1 byte.
	// +optional
	PayloadBytesRetained *resource.Quantity `json:"payloadBytesRetained,omitempty"`
}

// WebhookQuotaSpec is a namespace's quota, in the shape of ResourceQuota.
type WebhookQuotaSpec struct {
	// hard are the limits publishes of the namespace are held to. A
	// publish over one is refused with 429, a Retry-After and the code
	// QuotaExceeded naming it, and recorded nowhere.
	// +required
	Hard WebhookQuotaHard `json:"hard"`
}

// WebhookQuotaUsed is what the namespace has used of its limits.
type WebhookQuotaUsed struct {
	// eventsPerDay counts the events accepted in the current UTC day.
	EventsPerDay int64 `json:"eventsPerDay"`

	// payloadBytesRetained is the bytes of event data the ledger keeps
	// for the namespace's publishes.
	PayloadBytesRetained resource.Quantity `json:"payloadBytesRetained"`

	// refusedToday counts the publishes refused by the quota in the
	// current UTC day.
	RefusedToday int64 `json:"refusedToday"`
}

// WebhookQuotaStatus is the quota as the ledger holds it.
type WebhookQuotaStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready is True once every replica holds publishes to
	// spec.hard.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// used is what the namespace has used, as of updatedAt (refreshed
	// about every minute while it moves).
	// +optional
	Used *WebhookQuotaUsed `json:"used,omitempty"`

	// updatedAt is when used was read from the ledger.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	UpdatedAt *metav1.Time `json:"updatedAt,omitempty"`
}

// WebhookQuota holds the publishes of its namespace to hard limits: rate,
// events per day and payload bytes retained. One per namespace, named
// "default"; the cluster's admins write it (namespace editors only read
// it), and the controller keeps status.used.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=whq,categories=hookkeeper
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'default'",message="a namespace has one WebhookQuota, named default"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Rate",type=integer,JSONPath=`.spec.hard.publishesPerSecond`,description="Hard publishes per second"
// +kubebuilder:printcolumn:name="Events Today",type=integer,JSONPath=`.status.used.eventsPerDay`,description="Events accepted in the current UTC day"
// +kubebuilder:printcolumn:name="Events/Day",type=integer,JSONPath=`.spec.hard.eventsPerDay`,description="Hard events per UTC day"
// +kubebuilder:printcolumn:name="Bytes",type=string,JSONPath=`.status.used.payloadBytesRetained`,description="Payload bytes retained"
// +kubebuilder:printcolumn:name="Bytes Hard",type=string,JSONPath=`.spec.hard.payloadBytesRetained`,description="Hard payload bytes retained"
// +kubebuilder:printcolumn:name="Refused Today",type=integer,JSONPath=`.status.used.refusedToday`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WebhookQuota struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the namespace's hard limits.
	// +required
	Spec WebhookQuotaSpec `json:"spec"`

	// status is the quota as the ledger holds it.
	// +optional
	Status WebhookQuotaStatus `json:"status,omitempty"`

	// Undecodable lists the stored values the Go types could not decode and
	// left out, as "path: error"; empty for every object the CRD schema
	// admits. Set by UnmarshalJSON, never serialized (see DecodeError).
	Undecodable []string `json:"-"`
}

// WebhookQuotaList is a list of WebhookQuota.
// +kubebuilder:object:root=true
type WebhookQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WebhookQuota `json:"items"`
}

// UnmarshalJSON decodes a WebhookQuota leniently; see Undecodable.
func (q *WebhookQuota) UnmarshalJSON(data []byte) error {
	type plain WebhookQuota
	problems, err := decodeLeniently(data, (*plain)(q))
	q.Undecodable = problems
	return err
}

// DecodeError is nil when q decoded completely, else an error naming every
// field that was left out.
func (q *WebhookQuota) DecodeError() error { return undecodableError(q.Undecodable) }

func init() {
	SchemeBuilder.Register(&WebhookQuota{}, &WebhookQuotaList{})
}
