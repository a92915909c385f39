package v1alpha1

// DeliveryEvidence is what a schedule achieved: the deliveries settled
// (delivered or exhausted) over the last 24 hours and 7 days. A window is
// the current hour and the hours before it, so it covers between 23 and 24
// hours (6 days 23 hours and 7 days).
type DeliveryEvidence struct {
	// last24h is the evidence of the last 24 hours.
	// +optional
	Last24h *EvidenceWindow `json:"last24h,omitempty"`
	// last7d is the evidence of the last 7 days.
	// +optional
	Last7d *EvidenceWindow `json:"last7d,omitempty"`
}

// EvidenceWindow sums the outcomes of one window.
type EvidenceWindow struct {
	// settled is the number of deliveries delivered or exhausted.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Settled int64 `json:"settled"`
	// firstTry is the share of settled deliveries delivered on their first
	// attempt, in whole percent rounded down ("97%"); empty when none
	// settled.
	// +optional
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:Pattern=`^([0-9]|[1-9][0-9]|100)%$`
	FirstTry string `json:"firstTry,omitempty"`
	// recovered is the number of deliveries delivered by a later attempt.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Recovered int64 `json:"recovered"`
	// recoveredByAttempt counts the recovered deliveries by the attempt
	// that delivered them, ascending.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	RecoveredByAttempt []AttemptCount `json:"recoveredByAttempt,omitempty"`
	// lastRecoveringAttempt is the highest attempt number that recovered
	// anything (0: no retry recovered anything).
	// +optional
	// +kubebuilder:validation:Minimum=0
	LastRecoveringAttempt int32 `json:"lastRecoveringAttempt,omitempty"`
	// exhausted is the number of deliveries exhausted, whatever the reason.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Exhausted int64 `json:"exhausted"`
	// exhaustedByReason counts the exhausted deliveries by reason, ordered
	// by reason.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ExhaustedByReason []ReasonCount `json:"exhaustedByReason,omitempty"`
	// p50TimeToDelivery and p95TimeToDelivery bound the median and 95th
	// percentile of the time from a delivery's creation to its success:
	// the upper bound of the histogram bucket that holds them (1s, 5s, 30s,
	// 1m, 5m, 15m, 30m, 1h, 2h, 6h, 12h, 24h, "over 24h"); empty when
	// nothing was delivered.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	P50TimeToDelivery string `json:"p50TimeToDelivery,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=16
	P95TimeToDelivery string `json:"p95TimeToDelivery,omitempty"`
}

// AttemptCount is a count of deliveries delivered by one attempt.
type AttemptCount struct {
	// attempt is the attempt number (2 is the first retry).
	// +kubebuilder:validation:Minimum=1
	Attempt int32 `json:"attempt"`
	// count is the number of deliveries.
	// +kubebuilder:validation:Minimum=0
	Count int64 `json:"count"`
}

// ReasonCount is a count of deliveries exhausted for one reason.
type ReasonCount struct {
	// reason is the exhaust reason (MaxAttempts, MaxAge, NonRetryable,
	// Gone, AckRejected, AckTimeout).
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// count is the number of deliveries.
	// +kubebuilder:validation:Minimum=0
	Count int64 `json:"count"`
}
