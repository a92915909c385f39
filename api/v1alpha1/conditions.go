package v1alpha1

// This package is the one source of the condition types and reasons the
// operator writes: the controllers use these constants, and map what the
// engine and the evidence package find onto them (packages below the API
// know nothing of conditions). Types are in this file; reasons, in
// families, beside them and in <kind>_conditions.go.

// Condition types. All have positive polarity (True is the good state)
// except these, which are True while there is something to see or do, so
// that `kubectl wait --for=condition=X` reads naturally:
// DeliveriesExhausted and ReissueRequired (work for an admin),
// RetryBudgetLimited (retries held back), CircuitOpen (deliveries held by
// the circuit breaker), and kstatus's Stalled and Reconciling, whose
// polarity kstatus defines.
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
	// ConditionHorizonFit is the RetryPolicy's advice about its horizon, drawn
	// from what its schedule achieved over 7 days: True (HorizonFits), False
	// (TailRecoversNothing: the last attempts recover nothing;
	// HorizonTooShort: endpoints succeed again soon after the policy gave
	// up) or Unknown (InsufficientEvidence). It is advice: the operator
	// never edits a spec.
	ConditionHorizonFit = "HorizonFit"
	// ConditionRetryBudgetLimited is True while the endpoint's retry budget
	// holds retries back (they are deferred to later minutes, never
	// dropped), with how many and the budget in the message; False once
	// deferrals stop. It counts the deferrals of every replica, from the
	// ledger.
	ConditionRetryBudgetLimited = "RetryBudgetLimited"
	// ConditionCircuitOpen is True while the endpoint's circuit breaker is
	// open (reason Failing or Gone): no attempt is made but one probe at a
	// time, and the endpoint's deliveries wait; the message names the
	// failures, the last one and the next probe. False (reason Closed,
	// ProbeSucceeded, URLChanged or Disabled) while attempts flow. It
	// shows the ledger's breaker, shared by every replica; spec.paused
	// overrides it.
	ConditionCircuitOpen = "CircuitOpen"
	// ConditionStalled (kstatus) is True while the object needs a person:
	// a WebhookEndpoint's Ready=False that the operator cannot get past by
	// itself, or a failed DeliveryRecovery; same reason and message. kstatus
	// (Flux, `kubectl wait`, cli-utils) reads Stalled=True as Failed.
	ConditionStalled = "Stalled"
	// ConditionReconciling (kstatus) is True while a DeliveryRecovery waits
	// or runs; kstatus reads it as InProgress.
	ConditionReconciling = "Reconciling"
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
