package v1alpha1

// Condition types. All have positive polarity except DeliveriesExhausted and
// ReissueRequired, which are True while there is work for an admin to do, so
// that `kubectl wait --for=condition=DeliveriesExhausted` reads naturally.
const (
	// ConditionReady is True when the object is fully resolved and in use.
	ConditionReady = "Ready"
	// ConditionHealthy is True while recent attempts to an endpoint succeed.
	ConditionHealthy = "Healthy"
	// ConditionDeliveriesExhausted is True while an endpoint has unresolved
	// exhausted deliveries.
	ConditionDeliveriesExhausted = "DeliveriesExhausted"
	// ConditionComplete is True when a DeliveryRecovery has followed every item
	// to its outcome.
	ConditionComplete = "Complete"
	// ConditionFailed is True when a DeliveryRecovery could not run at all.
	ConditionFailed = "Failed"
	// ConditionReissueRequired is True when a Retry was refused for items whose
	// one-time secrets were scrubbed; only a reissue can resolve them.
	ConditionReissueRequired = "ReissueRequired"
)

// Condition reasons shared by the kinds.
const (
	// ReasonReconciled means the controller resolved everything it needs.
	ReasonReconciled = "Reconciled"
	// ReasonInvalidSpec means the spec passed admission but cannot be used;
	// the message says which field and why.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonReplayWindowTooShort means a RetryPolicy's replayWindow is shorter
	// than its worst-case automatic retry horizon.
	ReasonReplayWindowTooShort = "ReplayWindowTooShort"
	// ReasonInternalError means an unexpected error; the message is for humans
	// and the details are in the operator's log.
	ReasonInternalError = "InternalError"
)
