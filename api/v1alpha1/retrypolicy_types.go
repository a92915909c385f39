package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackoffStrategy names how the delay between attempts grows.
// +kubebuilder:validation:Enum=Exponential;Linear;Fixed;Schedule
type BackoffStrategy string

const (
	// BackoffExponential multiplies the delay by factor after every attempt.
	BackoffExponential BackoffStrategy = "Exponential"
	// BackoffLinear adds initialDelay after every attempt.
	BackoffLinear BackoffStrategy = "Linear"
	// BackoffFixed waits initialDelay between all attempts.
	BackoffFixed BackoffStrategy = "Fixed"
	// BackoffSchedule waits the listed delays in order, repeating the last.
	BackoffSchedule BackoffStrategy = "Schedule"
)

// Backoff describes the delay before each retry.
// +kubebuilder:validation:XValidation:rule="self.strategy != 'Schedule' || has(self.schedule)",message="schedule is required when strategy is Schedule"
// +kubebuilder:validation:XValidation:rule="self.strategy == 'Schedule' || !has(self.schedule)",message="schedule is only allowed when strategy is Schedule"
// +kubebuilder:validation:XValidation:rule="self.strategy == 'Schedule' || has(self.initialDelay)",message="initialDelay is required for strategies Exponential, Linear and Fixed"
// +kubebuilder:validation:XValidation:rule="self.strategy != 'Schedule' || !has(self.initialDelay)",message="initialDelay is not used by strategy Schedule; put the first delay in schedule"
// +kubebuilder:validation:XValidation:rule="!has(self.factor) || self.strategy == 'Exponential'",message="factor is only allowed when strategy is Exponential"
// +kubebuilder:validation:XValidation:rule="!has(self.maxDelay) || self.strategy in ['Exponential', 'Linear']",message="maxDelay is only allowed when strategy is Exponential or Linear"
// +kubebuilder:validation:XValidation:rule="!has(self.maxDelay) || !has(self.initialDelay) || duration(self.maxDelay) >= duration(self.initialDelay)",message="maxDelay must be at least initialDelay"
type Backoff struct {
	// strategy is how the delay grows: Exponential (initialDelay × factor^n,
	// up to maxDelay), Linear (initialDelay × n, up to maxDelay), Fixed
	// (always initialDelay) or Schedule (the listed delays, the last one
	// repeating).
	// +optional
	// +kubebuilder:default=Exponential
	Strategy BackoffStrategy `json:"strategy,omitempty"`

	// initialDelay is the delay before the first retry, as a Go duration
	// (for example 5s). Required unless strategy is Schedule.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="initialDelay must be greater than zero"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('8760h')",message="initialDelay must be at most 8760h"
	InitialDelay *metav1.Duration `json:"initialDelay,omitempty"`

	// factor multiplies the delay after every retry (Exponential only), as a
	// decimal string greater than 1 and at most 10, such as "2" or "1.5".
	// Defaults to 2 when strategy is Exponential.
	// +optional
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:Pattern=`^[0-9]{1,2}(\.[0-9]{1,3})?$`
	// +kubebuilder:validation:XValidation:rule="double(self) > 1.0 && double(self) <= 10.0",message="factor must be greater than 1 and at most 10"
	Factor string `json:"factor,omitempty"`

	// maxDelay caps the delay between two attempts (Exponential and Linear).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('8760h')",message="maxDelay must be at most 8760h"
	MaxDelay *metav1.Duration `json:"maxDelay,omitempty"`

	// schedule lists the delay before each retry in order (Schedule only);
	// when the horizon allows more retries than listed, the last delay
	// repeats. For example [5s, 5m, 30m, 2h, 5h, 10h, 10h].
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:Type=string
	// +kubebuilder:validation:items:MaxLength=32
	// +kubebuilder:validation:items:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="self.all(d, duration(d) > duration('0s'))",message="every schedule delay must be greater than zero"
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(d, duration(d) <= duration('8760h'))",message="every schedule delay must be at most 8760h"
	Schedule []metav1.Duration `json:"schedule,omitempty"`

	// jitterPercent spreads each delay uniformly by up to this percentage in
	// either direction, so that many failing deliveries do not retry in
	// lockstep. 0 disables jitter.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	JitterPercent *int32 `json:"jitterPercent,omitempty"`
}

// Horizon bounds automatic retries. At least one bound is required: a
// delivery that is never given up on is never surfaced as unresolved work.
// +kubebuilder:validation:XValidation:rule="has(self.maxAttempts) || has(self.maxAge)",message="horizon needs maxAttempts, maxAge, or both: automatic retries must stop somewhere"
type Horizon struct {
	// maxAttempts is the total number of attempts, the first one included.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxAttempts *int32 `json:"maxAttempts,omitempty"`

	// maxAge is the deadline for automatic retries, measured from the
	// delivery's first attempt; no attempt starts after it.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="maxAge must be greater than zero"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('8760h')",message="maxAge must be at most 8760h"
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// RetryClass names a class of failed attempt that is retried. A class not
// listed exhausts the delivery at once with reason NonRetryable.
// NetworkError covers refused and reset connections and DNS failures, Timeout
// an attempt that exceeded attemptTimeout, "5xx" any 5xx status and a
// three-digit code exactly that status. 410 Gone always exhausts with Gone.
// +kubebuilder:validation:MaxLength=16
// +kubebuilder:validation:Pattern=`^(NetworkError|Timeout|[45]xx|[45][0-9]{2})$`
type RetryClass string

// Retention says how long the ledger keeps what an event leaves behind.
// +kubebuilder:validation:XValidation:rule="!has(self.payloads) || !has(self.evidence) || duration(self.payloads) <= duration(self.evidence)",message="retention.payloads must not be longer than retention.evidence: evidence outlives the payload it describes"
type Retention struct {
	// secretGracePeriod is how long an event's one-time secrets survive once
	// no delivery of the event is pending. After it they are scrubbed,
	// unrecoverably; a later recovery must reissue.
	// +optional
	// +kubebuilder:default="0s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('168h')",message="secretGracePeriod must be at most 168h: one-time secrets must not linger"
	SecretGracePeriod *metav1.Duration `json:"secretGracePeriod,omitempty"`

	// payloads is the investigation period: how long event payloads and
	// attempt response bodies are kept after the event is terminal. A retry
	// is refused with PayloadExpired once it has passed.
	// +optional
	// +kubebuilder:default="168h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('87600h')",message="retention.payloads must be at most 87600h"
	Payloads *metav1.Duration `json:"payloads,omitempty"`

	// evidence is how long the compact evidence (ids, states, hashes and
	// idempotency keys) is kept. It must be at least replayWindow, so that
	// deduplication still works for anything that can come back.
	// +optional
	// +kubebuilder:default="720h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('87600h')",message="retention.evidence must be at most 87600h"
	Evidence *metav1.Duration `json:"evidence,omitempty"`
}

// RetryBudget bounds what automatic retries may cost an endpoint: per minute,
// retries may not exceed ratioPercent of first attempts plus
// minRetriesPerMinute, paced evenly over the minute (10 a minute is one
// every 6 s), so that no 60 s see more than one over the allowance.
// Retries over budget are deferred to when the pace allows them, never
// dropped. A
// DeliveryRecovery's re-sends (retries and reissued events) draw on it too:
// each one's first attempt counts as a retry, not as a first attempt.
type RetryBudget struct {
	// ratioPercent is the number of retries allowed per 100 first attempts.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	RatioPercent int32 `json:"ratioPercent"`

	// minRetriesPerMinute is the floor that applies even when few first
	// attempts are made, so that a quiet endpoint can still recover.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	MinRetriesPerMinute *int32 `json:"minRetriesPerMinute,omitempty"`
}

// CircuitBreaker says when an endpoint's circuit breaker opens and how it
// probes (docs/operations/circuit-breaker.md, docs/adr/0033). While it is
// open no attempt is made to the endpoint except one probe at a time; a
// probe that succeeds closes it and the backlog drains over ramp. Every
// field has a default, so `circuitBreaker: {}` (the default) is the
// recommended breaker.
// +kubebuilder:validation:XValidation:rule="!has(self.probeInterval) || !has(self.maxProbeInterval) || duration(self.probeInterval) <= duration(self.maxProbeInterval)",message="circuitBreaker.maxProbeInterval must be at least circuitBreaker.probeInterval (maxProbeInterval defaults to 10m)",fieldPath=.maxProbeInterval
type CircuitBreaker struct {
	// disabled turns the breaker off: every delivery is attempted on its
	// backoff however often the endpoint fails, and a 410 Gone exhausts
	// only the delivery that got it.
	// +optional
	// +kubebuilder:default=false
	Disabled bool `json:"disabled,omitempty"`

	// failures is how many attempts in a row must fail (no answer: a
	// network error or a timeout; or a 5xx) to open the breaker, once the
	// streak spans at least minDuration. A 2xx ends the streak; other
	// answers (a 4xx about the event, a 429) neither count nor end it.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	Failures *int32 `json:"failures,omitempty"`

	// minDuration is how long the streak of failures must last, from its
	// first failure to its last, before the breaker opens, so that a burst
	// of failures in one second does not open it. "0s" opens on the count
	// alone.
	// +optional
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('24h')",message="circuitBreaker.minDuration must be at most 24h"
	MinDuration *metav1.Duration `json:"minDuration,omitempty"`

	// probeInterval is the wait from the opening to the first probe; each
	// failed probe doubles it, up to maxProbeInterval.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="circuitBreaker.probeInterval must be between 1s and 24h"
	ProbeInterval *metav1.Duration `json:"probeInterval,omitempty"`

	// maxProbeInterval caps the wait between two probes; at least
	// probeInterval.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="circuitBreaker.maxProbeInterval must be between 1s and 24h"
	MaxProbeInterval *metav1.Duration `json:"maxProbeInterval,omitempty"`

	// goneProbeInterval is the wait between probes of a breaker opened by
	// a 410 Gone, which says the URL is gone rather than down. Absent (the
	// default): no automatic probe; a new spec.url or `kubectl hookkeeper
	// probe` closes or probes it.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('168h')",message="circuitBreaker.goneProbeInterval must be between 1s and 168h"
	GoneProbeInterval *metav1.Duration `json:"goneProbeInterval,omitempty"`

	// ramp is how long, after the breaker closes, the endpoint's attempts
	// in flight grow from one to spec.maxInFlight, so that the backlog does
	// not land on a receiver that just came back all at once. "0s" sends at
	// the full limit at once.
	// +optional
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('1h')",message="circuitBreaker.ramp must be at most 1h"
	Ramp *metav1.Duration `json:"ramp,omitempty"`
}

// RetryPolicySpec is how hard hookkeeper tries to deliver, and how long it
// keeps what it needs to prove and replay a delivery.
// +kubebuilder:validation:XValidation:rule="!has(self.horizon.maxAge) || duration(self.replayWindow) >= duration(self.horizon.maxAge)",message="replayWindow must be at least horizon.maxAge: a delivery can still be retried automatically until its horizon"
// +kubebuilder:validation:XValidation:rule="!has(self.retention) || !has(self.retention.evidence) || duration(self.retention.evidence) >= duration(self.replayWindow)",message="retention.evidence must be at least replayWindow: deduplication evidence has to outlive every replay"
type RetryPolicySpec struct {
	// backoff is the delay before each retry.
	// +required
	Backoff Backoff `json:"backoff"`

	// horizon bounds automatic retries by attempts, by age, or both.
	// +required
	Horizon Horizon `json:"horizon"`

	// attemptTimeout is how long one attempt may take, connection included.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('15m')",message="attemptTimeout must be between 1s and 15m"
	AttemptTimeout *metav1.Duration `json:"attemptTimeout,omitempty"`

	// retryOn lists the failure classes that are retried; any other failure
	// exhausts the delivery at once with reason NonRetryable.
	// +optional
	// +kubebuilder:default={"NetworkError","Timeout","408","429","5xx"}
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	RetryOn []RetryClass `json:"retryOn,omitempty"`

	// retryAfterCap is the longest Retry-After (on 429 and 503) that is
	// honoured; a longer one is cut to it. "0s" ignores Retry-After.
	// +optional
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('8760h')",message="retryAfterCap must be at most 8760h"
	RetryAfterCap *metav1.Duration `json:"retryAfterCap,omitempty"`

	// replayWindow is how long after its first attempt an event may still be
	// sent again, by automatic retry or by a DeliveryRecovery. It must be
	// finite (at most 8760h): a manual retry past it is refused with
	// ReplayWindowExceeded.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('8760h')",message="replayWindow must be greater than zero and at most 8760h (one year)"
	ReplayWindow metav1.Duration `json:"replayWindow"`

	// retention says how long secrets, payloads and evidence are kept.
	// +optional
	// +kubebuilder:default={}
	Retention *Retention `json:"retention,omitempty"`

	// retryBudget bounds automatic retries per endpoint; absent means
	// unbounded (still subject to the horizon).
	// +optional
	RetryBudget *RetryBudget `json:"retryBudget,omitempty"`

	// circuitBreaker says when the breaker of an endpoint on this policy
	// opens (a streak of failures, or a 410 Gone) and how it probes. The
	// defaults apply when it is absent; disabled: true turns it off.
	// +optional
	// +kubebuilder:default={}
	CircuitBreaker *CircuitBreaker `json:"circuitBreaker,omitempty"`
}

// RetryPolicyStatus is the policy as the engine will apply it.
type RetryPolicyStatus struct {
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready is True when the policy is valid and usable.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// schedule is the nominal offset of each attempt from the first one,
	// without jitter; at most 25 entries (see scheduleTruncated).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=25
	Schedule []string `json:"schedule,omitempty"`

	// scheduleTruncated is true when the policy makes more attempts than
	// schedule lists.
	// +optional
	ScheduleTruncated bool `json:"scheduleTruncated,omitempty"`

	// attempts is the number of attempts a failing delivery gets in the
	// nominal case, the first one included.
	// +optional
	Attempts int64 `json:"attempts,omitempty"`

	// horizon is the worst-case time from a delivery's first attempt until it
	// is exhausted: every delay at its jitter maximum plus attemptTimeout per
	// attempt, bounded by maxAge.
	// +optional
	Horizon string `json:"horizon,omitempty"`

	// endpoints is the number of WebhookEndpoints that use this policy.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Endpoints int32 `json:"endpoints,omitempty"`

	// evidence is what the schedule achieved, summed over the endpoints
	// that used this generation of the policy or an earlier one.
	// +optional
	Evidence *DeliveryEvidence `json:"evidence,omitempty"`
}

// RetryPolicy is how hard hookkeeper tries to deliver to the endpoints that
// reference it, and how long it keeps secrets, payloads and evidence.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rtp,categories=hookkeeper
// +kubebuilder:printcolumn:name="Strategy",type=string,JSONPath=`.spec.backoff.strategy`
// +kubebuilder:printcolumn:name="Attempts",type=integer,JSONPath=`.status.attempts`
// +kubebuilder:printcolumn:name="Horizon",type=string,JSONPath=`.status.horizon`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="First Try",type=string,JSONPath=`.status.evidence.last24h.firstTry`,description="Share of the last 24h's settled deliveries delivered on the first attempt"
// +kubebuilder:printcolumn:name="Recovered",type=integer,JSONPath=`.status.evidence.last24h.recovered`,description="Deliveries of the last 24h delivered by a retry"
// +kubebuilder:printcolumn:name="Exhausted 24h",type=integer,JSONPath=`.status.evidence.last24h.exhausted`,description="Deliveries exhausted in the last 24h"
// +kubebuilder:printcolumn:name="Horizon Fit",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="HorizonFit")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RetryPolicy struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired policy.
	// +required
	Spec RetryPolicySpec `json:"spec"`

	// status is the policy as observed by the controller.
	// +optional
	Status RetryPolicyStatus `json:"status,omitempty"`

	// Undecodable lists the stored values the Go types could not decode and
	// left out, as "path: error"; empty for every object the CRD schema
	// admits. Set by UnmarshalJSON, never serialized (see DecodeError).
	Undecodable []string `json:"-"`
}

// RetryPolicyList is a list of RetryPolicy.
// +kubebuilder:object:root=true
type RetryPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RetryPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RetryPolicy{}, &RetryPolicyList{})
}
