package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RecoveryMode is what a DeliveryRecovery does with the deliveries it
// selects, or Replay: send the events of a time window to the endpoint.
// +kubebuilder:validation:Enum=Auto;Retry;Reissue;Dismiss;Replay
type RecoveryMode string

const (
	// RecoveryModeAuto retries where a retry is allowed and reissues
	// otherwise.
	RecoveryModeAuto RecoveryMode = "Auto"
	// RecoveryModeRetry resends the same event identity; items that can no
	// longer be replayed are refused.
	RecoveryModeRetry RecoveryMode = "Retry"
	// RecoveryModeReissue asks for a new event identity with fresh material.
	RecoveryModeReissue RecoveryMode = "Reissue"
	// RecoveryModeDismiss resolves the deliveries without resending.
	RecoveryModeDismiss RecoveryMode = "Dismiss"
	// RecoveryModeReplay sends the namespace's events that spec.replay
	// selects to the endpoint, under their own identity (the same
	// webhook-id), whether or not it received them before
	// (docs/adr/0034).
	RecoveryModeReplay RecoveryMode = "Replay"
)

// ReplayFallback is what a Replay does with an event it cannot send under
// its own identity.
// +kubebuilder:validation:Enum=Refuse;Reissue
type ReplayFallback string

const (
	// ReplayFallbackRefuse refuses the event with the reason a Retry gives
	// (ReissueRequired, ReplayWindowExceeded, PayloadExpired).
	ReplayFallbackRefuse ReplayFallback = "Refuse"
	// ReplayFallbackReissue reissues it to the endpoint, as Auto does: a
	// copy with a new identity when the event is complete and never
	// carried secrets, else a hookkeeper.reissue.requested event to its
	// producer.
	ReplayFallbackReissue ReplayFallback = "Reissue"
)

// ReplaySpec selects the events a Replay sends: those of the namespace
// created in [since, until) whose type matches eventTypes, oldest first,
// up to spec.limit. The engine's own events (hookkeeper.*) are never
// selected.
// +kubebuilder:validation:XValidation:rule="!has(self.until) || self.since < self.until",message="replay.since must be earlier than replay.until"
type ReplaySpec struct {
	// since selects events created at or after this time.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	Since metav1.Time `json:"since"`

	// until selects events created before this time; absent (or later)
	// means before the operation first starts, so that applying it again
	// never selects newer events.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	Until *metav1.Time `json:"until,omitempty"`

	// eventTypes selects events of these types or patterns ("order.*");
	// "*" selects every type.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	EventTypes []EventTypePattern `json:"eventTypes"`

	// onUnreplayable is what happens to an event that cannot be sent under
	// its own identity (its one-time secrets scrubbed, its payload pruned,
	// or past the endpoint's replay window): Refuse (the item is refused
	// with the reason) or Reissue (it is reissued to the endpoint).
	// +optional
	// +kubebuilder:default=Refuse
	OnUnreplayable ReplayFallback `json:"onUnreplayable,omitempty"`
}

// DeliverySelector selects unresolved exhausted deliveries of the endpoint.
// Criteria are ANDed; an empty selector selects all of them.
// +kubebuilder:validation:XValidation:rule="!has(self.exhaustedAfter) || !has(self.exhaustedBefore) || self.exhaustedAfter < self.exhaustedBefore",message="selector.exhaustedAfter must be earlier than selector.exhaustedBefore"
type DeliverySelector struct {
	// deliveryIDs selects these deliveries.
	// +optional
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=set
	DeliveryIDs []string `json:"deliveryIDs,omitempty"`

	// eventIDs selects the deliveries of these events.
	// +optional
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=set
	EventIDs []string `json:"eventIDs,omitempty"`

	// eventTypes selects deliveries of events of these types or patterns.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	EventTypes []EventTypePattern `json:"eventTypes,omitempty"`

	// exhaustedAfter selects deliveries exhausted at or after this time.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	ExhaustedAfter *metav1.Time `json:"exhaustedAfter,omitempty"`

	// exhaustedBefore selects deliveries exhausted before this time.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	ExhaustedBefore *metav1.Time `json:"exhaustedBefore,omitempty"`
}

// DeliveryRecoverySpec is the operation to run. It is immutable: to do
// something else, create another DeliveryRecovery.
// +kubebuilder:validation:XValidation:rule="self.action == 'Replay' ? has(self.replay) : !has(self.replay)",message="replay is required with action Replay, and only allowed with it"
// +kubebuilder:validation:XValidation:rule="self.action != 'Replay' || !has(self.selector)",message="selector selects exhausted deliveries: a Replay selects events with replay instead"
type DeliveryRecoverySpec struct {
	// endpointRef names the WebhookEndpoint whose deliveries are recovered,
	// or to which a Replay sends events.
	// +required
	EndpointRef LocalObjectReference `json:"endpointRef"`

	// selector narrows the unresolved exhausted deliveries to recover; absent
	// means all of them.
	// +optional
	Selector *DeliverySelector `json:"selector,omitempty"`

	// action is Retry (same event identity), Reissue (new event identity
	// with fresh material), Auto (retry where allowed, reissue otherwise),
	// Dismiss (resolve without resending), or Replay (send the events that
	// replay selects, under their own identity).
	// +required
	Action RecoveryMode `json:"action"`

	// replay selects the events a Replay sends; required with action
	// Replay and only allowed with it.
	// +optional
	Replay *ReplaySpec `json:"replay,omitempty"`

	// limit is the most deliveries (for a Replay: events) this operation
	// handles, oldest first.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	Limit *int32 `json:"limit,omitempty"`

	// ttlSecondsAfterFinished deletes the DeliveryRecovery this long after
	// it completes or fails, as for Jobs; absent keeps it. The deliveries'
	// resolutions stay in the ledger either way.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// ItemOutcome is where one recovered delivery or replayed event stands.
// +kubebuilder:validation:Enum=Pending;Retried;Reissued;AwaitingReissue;Refused;Dismissed;Delivered;FailedAgain;Replayed;Skipped
type ItemOutcome string

const (
	ItemPending         ItemOutcome = "Pending"
	ItemRetried         ItemOutcome = "Retried"
	ItemReissued        ItemOutcome = "Reissued"
	ItemAwaitingReissue ItemOutcome = "AwaitingReissue"
	ItemRefused         ItemOutcome = "Refused"
	ItemDismissed       ItemOutcome = "Dismissed"
	ItemDelivered       ItemOutcome = "Delivered"
	ItemFailedAgain     ItemOutcome = "FailedAgain"
	// ItemReplayed: a Replay sent the event again; it is on its way.
	ItemReplayed ItemOutcome = "Replayed"
	// ItemSkipped: a Replay found the event already on its way to the
	// endpoint and sent nothing.
	ItemSkipped ItemOutcome = "Skipped"
)

// RecoveryItem is one delivery (for a Replay: one event) handled by the
// operation.
type RecoveryItem struct {
	// deliveryID is the exhausted delivery; empty for a Replay's item.
	// +optional
	DeliveryID string `json:"deliveryID,omitempty"`
	// eventID is its event identity.
	// +required
	EventID string `json:"eventID"`
	// action is what was done for it.
	// +optional
	Action RecoveryAction `json:"action,omitempty"`
	// outcome is where it stands.
	// +required
	Outcome ItemOutcome `json:"outcome"`
	// reason is a machine-readable reason for a refusal (one of the
	// Refused* reasons, deliveryrecovery_conditions.go) or a skip
	// (SkippedAlreadyPending).
	// +optional
	Reason string `json:"reason,omitempty"`
	// message explains the outcome to a human.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
	// newDeliveryID is the delivery created by a retry, replay or reissue.
	// +optional
	NewDeliveryID string `json:"newDeliveryID,omitempty"`
	// newEventID is the event identity created by a reissue.
	// +optional
	NewEventID string `json:"newEventID,omitempty"`
}

// RecoveryCounts are the operation's items by outcome.
type RecoveryCounts struct {
	// matched is how many deliveries the selector matched, or events the
	// replay selected (up to limit).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Matched int32 `json:"matched"`
	// retried items were resent under the same event identity.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Retried int32 `json:"retried"`
	// reissued items were replaced by a new event identity.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Reissued int32 `json:"reissued"`
	// awaitingReissue items wait for the producer's replacement event.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	AwaitingReissue int32 `json:"awaitingReissue"`
	// refused items could not be recovered as asked; see their reason.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Refused int32 `json:"refused"`
	// dismissed items were resolved without resending.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Dismissed int32 `json:"dismissed"`
	// replayed items (of a Replay) were sent again under the same event
	// identity.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Replayed int32 `json:"replayed"`
	// skipped items (of a Replay) were already on their way to the
	// endpoint.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Skipped int32 `json:"skipped"`
	// delivered items reached their receiver after the recovery.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Delivered int32 `json:"delivered"`
	// failedAgain items were exhausted again after the recovery.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	FailedAgain int32 `json:"failedAgain"`
}

// RecoveryState is where a DeliveryRecovery stands, in one word; the
// Complete and Failed conditions say the same and why.
// +kubebuilder:validation:Enum=Waiting;Running;Complete;Failed
type RecoveryState string

const (
	// RecoveryWaiting: the endpoint it names does not exist yet or is not
	// yet registered with the delivery engine; it starts when it is.
	RecoveryWaiting RecoveryState = "Waiting"
	// RecoveryRunning: started, and some item has not reached its outcome.
	RecoveryRunning RecoveryState = "Running"
	// RecoveryComplete: every item reached its outcome (terminal).
	RecoveryComplete RecoveryState = "Complete"
	// RecoveryFailed: it cannot run, for a reason that cannot change
	// (terminal).
	RecoveryFailed RecoveryState = "Failed"
)

// DeliveryRecoveryStatus is the progress of the operation.
type DeliveryRecoveryStatus struct {
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// state is Waiting, Running, Complete or Failed; Complete and Failed
	// are final.
	// +optional
	State RecoveryState `json:"state,omitempty"`

	// conditions: Complete, Failed and ReissueRequired.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// counts are the items by outcome.
	// +optional
	Counts RecoveryCounts `json:"counts,omitempty"`

	// items lists the handled deliveries, at most 100; counts has the totals.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Items []RecoveryItem `json:"items,omitempty"`

	// startTime is when the operation first started: it considers only
	// deliveries exhausted (for a Replay: events created) before it. A DeliveryRecovery applied again
	// under the same name reports the earlier start (docs/adr/0007).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when every item reached its outcome.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// DeliveryRecovery is a one-shot operation, like a Job, that resolves the
// unresolved exhausted deliveries of an endpoint, or (action Replay) sends
// it the events of a time window again. Its effects are keyed by
// its namespace and name, so it never retries or reissues twice, not even
// when it is deleted and applied again (docs/adr/0007).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=drec,categories=hookkeeper
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.endpointRef.name`
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.action`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Complete")].reason`,priority=1
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.counts.matched`
// +kubebuilder:printcolumn:name="Retried",type=integer,JSONPath=`.status.counts.retried`
// +kubebuilder:printcolumn:name="Reissued",type=integer,JSONPath=`.status.counts.reissued`
// +kubebuilder:printcolumn:name="Refused",type=integer,JSONPath=`.status.counts.refused`
// +kubebuilder:printcolumn:name="Replayed",type=integer,JSONPath=`.status.counts.replayed`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DeliveryRecovery struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the operation; immutable once created.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: a DeliveryRecovery runs once; create a new one to recover again"
	Spec DeliveryRecoverySpec `json:"spec"`

	// status is the operation's progress.
	// +optional
	Status DeliveryRecoveryStatus `json:"status,omitempty"`

	// Undecodable lists the stored values the Go types could not decode and
	// left out, as "path: error"; empty for every object the CRD schema
	// admits. Set by UnmarshalJSON, never serialized (see DecodeError).
	Undecodable []string `json:"-"`
}

// DeliveryRecoveryList is a list of DeliveryRecovery.
// +kubebuilder:object:root=true
type DeliveryRecoveryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DeliveryRecovery `json:"items"`
}

func init() {
	SchemeBuilder.Register(&DeliveryRecovery{}, &DeliveryRecoveryList{})
}
