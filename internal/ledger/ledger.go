package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/credential"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// Store is the durable ledger. Two implementations, SQLite (embedded,
// one process) and PostgreSQL (shared by several processes), pass one
// conformance suite (package ledgertest). The contract:
//
//   - Every method that changes state does so in one transaction; a crash
//     at any point leaves either all of its effects or none.
//   - Batch methods (EventInsertMany, AttemptRecordMany) commit all their
//     items in one transaction, so that durability costs one sync per batch,
//     not per delivery; per-item failures are reported per item and do not
//     abort the batch.
//   - Time is never read from the database or the wall clock: every method
//     that needs "now" takes it in its params, so tests pin it. One
//     exception, which no method returns as state: the change stamps of
//     EndpointActivitySince come from the store's own clock (the server's,
//     on PostgreSQL), since a feed's readers and writers must share one.
//   - A delivery in state in_flight belongs to the owner of its lease until
//     the lease expires; then DeliveryClaim may hand it to another owner.
//     AttemptRecordMany and DeliveryRelease refuse (ErrLeaseLost) a caller
//     that no longer holds the lease, so an attempt is never counted twice.
//   - Per-endpoint statistics are maintained in the same transactions as the
//     state changes they count, so reading them costs the same whatever the
//     size of the ledger.
//   - Secrets: when a transition leaves an event with no pending delivery
//     (scheduled, in_flight, awaiting_ack), the same transaction scrubs the
//     event's Secrets (SecretNames stay, SecretsScrubAt is set) if the
//     longest SecretGracePeriod among its endpoints' policies is 0, or sets
//     SecretsScrubDue to now + that period for SecretsScrubDue to finish.
//   - Errors are the sentinels below (wrapped with context) or driver errors
//     wrapped with context; drivers translate native errors in one place.
//   - What both drivers do alike beyond one statement runs once, in this
//     package, over narrow statement interfaces that each driver implements:
//     Prune's stages (prune.go), ExhaustedList's pages (exhausted.go), the
//     acknowledgement preambles (acks.go), RecoveryApply's plan
//     (recovery.go), ReplayList's walk and ReplayApply's plan (replay.go)
//     and RetryBudgetAcquire's transaction (budget.go).
type Store interface {
	// Lifecycle: acknowledgements, secrets, retention, budgets, recovery.
	Lifecycle
	// Browser: the history, page by page, for the delivery API.
	Browser
	// Evidence: what each attempt achieved, per endpoint and policy.
	Evidence
	// Breakers: each endpoint's circuit breaker, shared by every engine.
	Breakers
	// Quotas: each namespace's publish quota, checked and counted in the
	// transaction that inserts its events (quota.go).
	Quotas
	// Limits: each endpoint's rateLimit and maxInFlight, shared by every
	// engine.
	Limits
	// Snapshots: the last known state of the Kubernetes objects the data
	// plane needs through an API-server outage (snapshots.go).
	Snapshots

	// EndpointUpsert creates or replaces an endpoint's configuration and
	// returns it with its new Version (1 on creation, +1 on every change).
	EndpointUpsert(ctx context.Context, params *EndpointUpsertParams) (Endpoint, error)
	// EndpointDelete removes an endpoint: its scheduled and in-flight
	// deliveries become cancelled (their history stays) and it no longer
	// matches new events. It returns how many deliveries were cancelled.
	// Deleting an unknown endpoint returns ErrNotFound.
	EndpointDelete(ctx context.Context, params *EndpointDeleteParams) (int, error)
	// EndpointGet returns one endpoint, or ErrNotFound.
	EndpointGet(ctx context.Context, id string) (Endpoint, error)
	// EndpointList returns every endpoint, ordered by ID.
	EndpointList(ctx context.Context) ([]Endpoint, error)
	// EndpointOwners returns the Owner of each endpoint of ids that has
	// one, keyed by ID: deleted endpoints included (their deliveries keep
	// their history), unknown IDs and endpoints without an owner absent.
	// It reads no secrets, for the delivery read APIs.
	EndpointOwners(ctx context.Context, ids []string) (map[string]string, error)

	// EventInsertMany ingests events in one transaction. Each event fans
	// out to every endpoint of its namespace whose EventTypes match its type
	// (paused endpoints included: their deliveries wait), as deliveries in
	// state scheduled due at Now. With an IdempotencyKey, an event whose key
	// was already used in the namespace is not inserted again: the result is
	// the original event and deliveries with Duplicate set when the
	// BodyHash matches, and Err = ErrIdempotencyConflict when it does not.
	// An event whose type matches more than MaxFanOut endpoints (when set)
	// is refused whole with Err = *FanOutError: nothing is inserted, and a
	// key that was used before still answers its original.
	// Items of one batch are applied in order, so a key repeated within a
	// batch behaves as if the calls were sequential. The returned error is
	// for the whole batch (nothing was committed).
	EventInsertMany(ctx context.Context, params []*EventInsertParams) ([]EventInsertResult, error)
	// WriteMany commits w.Attempts and w.Events in one transaction, with
	// the results AttemptRecordMany(w.Attempts) and then
	// EventInsertMany(w.Events) would give (either may be empty); the
	// returned error is for the whole batch. It lets ingest and attempt
	// records share one commit: at low rates an event's insert and the
	// previous event's record cost one fsync, not two.
	WriteMany(ctx context.Context, w *WriteBatch) (WriteResult, error)

	// DeliveryClaim leases up to Limit due deliveries to Owner until
	// Now+LeaseFor, earliest due first: scheduled deliveries due at or before
	// Now, and in-flight deliveries whose lease expired at or before Now
	// (an expired lease returns the delivery to the pool; the interrupted
	// attempt was never recorded, so nothing is double-counted). Deliveries
	// of paused or deleted endpoints and of ExcludeEndpoints are skipped;
	// past an endpoint's EndpointSlots, its later deliveries are too.
	// On PostgreSQL concurrent claimers never receive the same delivery
	// (FOR UPDATE SKIP LOCKED).
	DeliveryClaim(ctx context.Context, params *DeliveryClaimParams) ([]ClaimedDelivery, error)
	// DeliveryClaimExpired leases to Owner, until Now+LeaseFor, up to Limit
	// deliveries whose event's ValidUntil is at or before Now, earliest
	// ValidUntil first: scheduled ones, due or not, and in-flight ones
	// whose lease expired, of any endpoint, paused or held by its breaker
	// included (nothing may send them any more). The caller records each
	// cancelled with CancelExpired (AttemptRecordParams.Unsent), as it does
	// a claimed delivery it finds expired before sending it. It reads an
	// index of the deliveries still to send whose event has a bound, so a
	// call costs what it finds, whatever the size of the ledger.
	DeliveryClaimExpired(ctx context.Context, params *DeliveryClaimExpiredParams) ([]ClaimedDelivery, error)
	// DeliveryRelease returns a leased delivery to scheduled, due at DueAt,
	// without recording an attempt (used when a claimed delivery cannot be
	// sent now: rate limit, in-flight limit, shutdown).
	DeliveryRelease(ctx context.Context, params *DeliveryReleaseParams) error
	// LeasesReclaim returns to scheduled, due as they were, the in-flight
	// deliveries leased by earlier processes of Instance (owners
	// OwnerOf(Instance, ...)) other than Keep, without waiting for their
	// leases to expire, and returns how many. The caller vouches that no
	// such process is still running (see docs/adr/0008). Like an expired
	// lease, the interrupted attempt was never recorded.
	LeasesReclaim(ctx context.Context, params *LeasesReclaimParams) (int, error)
	// AttemptRecordMany records finished attempts and the resulting
	// transitions in one transaction. For each item, in order: the delivery
	// must be in_flight and leased by Owner (else that item fails with
	// ErrLeaseLost and changes nothing); the attempt is appended with the
	// next Number; Attempts increments; FirstAttemptAt is set if unset; the
	// delivery moves to Next. When Next is exhausted the resolution becomes
	// unresolved and, if the endpoint names an existing DeadLetter endpoint,
	// a hookkeeper.delivery.exhausted event (data: DeadLetterData) with one
	// delivery to it is inserted in the same transaction.
	AttemptRecordMany(ctx context.Context, params []*AttemptRecordParams) ([]AttemptRecordResult, error)

	// EventGet returns one event, or ErrNotFound.
	EventGet(ctx context.Context, id string) (Event, error)
	// DeliveryGet returns one delivery, or ErrNotFound.
	DeliveryGet(ctx context.Context, id string) (Delivery, error)
	// AttemptList returns a delivery's attempts in order.
	AttemptList(ctx context.Context, deliveryID string) ([]Attempt, error)
	// EndpointStats returns an endpoint's counters, or ErrNotFound.
	EndpointStats(ctx context.Context, endpointID string) (EndpointStats, error)
	// EndpointActivityList returns, in endpoint ID order, the counters of
	// every endpoint the ledger has counters of (deleted ones included),
	// each as EndpointStats reads it, with its latest retry deferral: one
	// read of the whole ledger's counters, so that a poller can tell whose
	// moved without asking endpoint by endpoint. Writers do nothing for it.
	EndpointActivityList(ctx context.Context) ([]EndpointActivity, error)
	// EndpointActivitySince returns, in endpoint ID order, the activity (as
	// EndpointActivityList reads it) of every endpoint whose counters or
	// retry deferrals changed since c (a new endpoint's counters count as
	// a change), and the cursor of the next call. The zero cursor reads
	// every endpoint. It may also return endpoints that did not change:
	// it reads again the changes of the ActivityOverlap before the
	// cursor, so that a transaction that stamped its change before a read
	// began and committed after it is still seen. It never misses an
	// endpoint whose change committed after c's read began, unless that
	// change's transaction stayed open longer than ActivityOverlap after
	// stamping it. Every transaction that moves an endpoint's counters or
	// records its deferral stamps it, with the store's clock.
	EndpointActivitySince(ctx context.Context, c ActivityCursor) ([]EndpointActivity, ActivityCursor, error)
	// NextDueAt returns when the earliest scheduled delivery (of an
	// unpaused, undeleted endpoint not in excludeEndpoints) is due; ok is
	// false when there is none. The claim loop excludes the endpoints at
	// their in-flight limit, so that their backlog does not keep it polling.
	NextDueAt(ctx context.Context, excludeEndpoints []string) (at time.Time, ok bool, err error)

	// Close releases the store's resources.
	Close() error
}

// Sentinel errors. Drivers wrap them with context; test with errors.Is.
var (
	ErrNotFound            = errors.New("not found")
	ErrIdempotencyConflict = errors.New("idempotency key already used with a different body")
	ErrLeaseLost           = errors.New("delivery is not leased by this owner")
	ErrFanOutLimit         = errors.New("event matches more endpoints than allowed")
	// ErrUnavailable marks an operation that failed because the ledger
	// could not be reached or could not take it now (connection refused or
	// lost, server shutting down, file locked past the busy timeout): it
	// may succeed when retried later. Each driver classifies its native
	// errors into it in its one error translator.
	ErrUnavailable = errors.New("ledger unavailable")
	// ErrStopping is what a writer in front of the ledger (the engine's
	// group commit) wraps when it no longer commits because its process
	// is shutting down; the publish core answers it as unavailable.
	ErrStopping = errors.New("the committer is stopping")
)

// FanOutError refuses an event whose type matches more endpoints of its
// namespace than EventInsertParams.MaxFanOut. It is ErrFanOutLimit.
type FanOutError struct {
	Namespace string
	Type      string
	Matches   int
	Max       int
}

func (e *FanOutError) Error() string {
	return fmt.Sprintf("event type %q matches %d endpoints in namespace %s, more than the %d allowed",
		e.Type, e.Matches, e.Namespace, e.Max)
}

// Is makes errors.Is(err, ErrFanOutLimit) hold.
func (e *FanOutError) Is(target error) bool { return target == ErrFanOutLimit }

// CheckFanOut refuses p when it selects filters it does not decide (see
// EventInsertParams.Receives), when matches, the number of endpoints it
// goes to, exceeds p.MaxFanOut, or when p is addressed to an endpoint that
// is not among them (see CheckTarget). Both drivers call it before
// inserting.
func CheckFanOut(p *EventInsertParams, matches int, undecided []FilterTarget) error {
	if len(undecided) > 0 {
		return &UndecidedError{Filters: undecided}
	}
	if err := CheckTarget(p, matches); err != nil {
		return err
	}
	if p.MaxFanOut <= 0 || matches <= p.MaxFanOut {
		return nil
	}
	return &FanOutError{Namespace: p.Namespace, Type: p.Type, Matches: matches, Max: p.MaxFanOut}
}

// DeliveryState is where a delivery stands.
//
//	            claim                  2xx (Response mode)
//	scheduled ─────────▶ in_flight ───────────────────────▶ delivered
//	    ▲  ▲                │ │ │ 2xx (Callback mode)
//	    │  └─ lease expired ┘ │ └───────────────────▶ awaiting_ack ──▶ delivered | exhausted | scheduled
//	    │     or released     │ failure, retryable, within horizon
//	    └─────────────────────┤
//	                          │ failure past the horizon, non-retryable, 410
//	                          └──────────────────────▶ exhausted (resolution: unresolved)
//	endpoint deleted: scheduled | in_flight | awaiting_ack ──▶ cancelled
//	event's ValidUntil passed, not sent: scheduled | in_flight ──▶ cancelled (Expired)
type DeliveryState string

const (
	StateScheduled   DeliveryState = "scheduled"
	StateInFlight    DeliveryState = "in_flight"
	StateAwaitingAck DeliveryState = "awaiting_ack"
	StateDelivered   DeliveryState = "delivered"
	StateExhausted   DeliveryState = "exhausted"
	StateCancelled   DeliveryState = "cancelled"
)

// Terminal reports whether no further attempt follows.
func (s DeliveryState) Terminal() bool {
	return s == StateDelivered || s == StateExhausted || s == StateCancelled
}

// ExhaustReason says why a delivery was given up on: exhausted, or
// cancelled because its event expired (CancelExpired).
type ExhaustReason string

const (
	ExhaustMaxAttempts  ExhaustReason = "MaxAttempts"
	ExhaustMaxAge       ExhaustReason = "MaxAge"
	ExhaustNonRetryable ExhaustReason = "NonRetryable"
	ExhaustGone         ExhaustReason = "Gone"
	ExhaustAckRejected  ExhaustReason = "AckRejected"
	ExhaustAckTimeout   ExhaustReason = "AckTimeout"
	// ExhaustCircuitOpen: the delivery's horizon ran out while its
	// endpoint's breaker held it; it was never sent again (docs/adr/0033).
	ExhaustCircuitOpen ExhaustReason = "CircuitOpen"
)

// Resolution is what became of a terminal delivery that needed an owner.
type Resolution string

const (
	ResolutionNone       Resolution = ""
	ResolutionUnresolved Resolution = "unresolved"
	ResolutionRetried    Resolution = "retried"
	ResolutionReissued   Resolution = "reissued"
	ResolutionDismissed  Resolution = "dismissed"
)

// AckMode says what completes a delivery.
type AckMode string

const (
	AckResponse AckMode = "Response"
	AckCallback AckMode = "Callback"
)

// DeadLetterEventType is the type of the event sent to a dead-letter
// endpoint when a delivery is exhausted.
const DeadLetterEventType = "hookkeeper.delivery.exhausted"

// SigningSecret is one whsec_ secret of an endpoint. During a rotation the
// previous secret stays valid until NotAfter and attempts are signed with
// every secret still valid.
type SigningSecret struct {
	Value sensitive.Bytes
	// NotAfter is when the secret stops being used; zero means current.
	NotAfter time.Time
}

// RateLimit bounds attempts per second to an endpoint; zero means none.
type RateLimit struct {
	PerSecond int `json:"perSecond"`
	Burst     int `json:"burst"`
}

// RetryBudget bounds automatic retries per endpoint per minute.
type RetryBudget struct {
	RatioPercent int `json:"ratioPercent"`
	MinPerMinute int `json:"minPerMinute"`
}

// Policy is the delivery policy of an endpoint, as resolved from its
// RetryPolicy.
type Policy struct {
	// Name and Generation identify the RetryPolicy it was resolved from
	// (Name "" for the operator's default), so that outcome evidence is
	// kept per policy version.
	Name       string `json:"name,omitempty"`
	Generation int64  `json:"generation,omitempty"`

	Backoff backoff.Policy `json:"backoff"`
	// RetryOn lists the retried failure classes: NetworkError, Timeout,
	// 4xx, 5xx or an exact status code.
	RetryOn           []string      `json:"retryOn"`
	ReplayWindow      time.Duration `json:"replayWindow"`
	SecretGracePeriod time.Duration `json:"secretGracePeriod"`
	PayloadRetention  time.Duration `json:"payloadRetention"`
	EvidenceRetention time.Duration `json:"evidenceRetention"`
	Budget            *RetryBudget  `json:"budget,omitempty"`
	// Breaker tunes the endpoint's circuit breaker; nil means the
	// defaults (DefaultBreakerPolicy).
	Breaker *BreakerPolicy `json:"breaker,omitempty"`
}

// BreakerPolicy is when an endpoint's circuit breaker opens and how it
// probes (docs/adr/0033).
type BreakerPolicy struct {
	// Disabled turns the breaker off: every delivery is attempted on its
	// backoff, and 410 Gone exhausts the delivery as without a breaker.
	Disabled bool `json:"disabled,omitempty"`
	// Failures in a row (network errors, timeouts, 5xx; a 2xx or another
	// answer resets the streak) that open the breaker, once they span at
	// least MinDuration.
	Failures    int           `json:"failures"`
	MinDuration time.Duration `json:"minDuration"`
	// ProbeInterval is the wait before the first probe; each failed probe
	// doubles it, up to MaxProbeInterval.
	ProbeInterval    time.Duration `json:"probeInterval"`
	MaxProbeInterval time.Duration `json:"maxProbeInterval"`
	// GoneProbeInterval is the wait between probes after a 410 Gone; 0
	// means none: only an admin's probe or a new URL closes it.
	GoneProbeInterval time.Duration `json:"goneProbeInterval,omitempty"`
	// Ramp is how long, after it closes, the endpoint's in-flight attempts
	// grow from one to the full limit, so that the backlog does not land
	// at once.
	Ramp time.Duration `json:"ramp"`
}

// DefaultBreakerPolicy applies to endpoints whose policy sets none.
var DefaultBreakerPolicy = BreakerPolicy{
	Failures:         10,
	MinDuration:      time.Minute,
	ProbeInterval:    30 * time.Second,
	MaxProbeInterval: 10 * time.Minute,
	Ramp:             time.Minute,
}

// BreakerPolicyOrDefault is p's breaker policy, or the defaults.
func (p *Policy) BreakerPolicyOrDefault() BreakerPolicy {
	if p.Breaker == nil {
		return DefaultBreakerPolicy
	}
	return *p.Breaker
}

// Endpoint is a destination's configuration as registered by the
// controllers. ID is "<namespace>/<name>".
type Endpoint struct {
	ID         string
	Namespace  string
	Name       string
	URL        string
	EventTypes []string
	Secrets    []SigningSecret
	Policy     Policy
	AckMode    AckMode
	AckTimeout time.Duration
	Paused     bool
	DeadLetter string // endpoint ID in the same namespace, or ""
	// Owner is the team or contact responsible for the endpoint
	// (WebhookEndpoint spec.owner), or "". It is not a lease owner: the
	// ledger only carries it to whoever reads about the endpoint's work
	// (dead-letter events, delivery reads, exhaustion metrics).
	Owner       string
	RateLimit   RateLimit
	MaxInFlight int
	Headers     []wire.Header
	// Credentials are the values read from Secrets that attempts carry
	// (auth, headers, TLS); nil for none. Stored with the rest, revealed
	// only in the store's column.
	Credentials *credential.Set
	// Filter is a CEL expression over the event that fan-out must also
	// match (EventInsertParams.Decided decides it), "" for none.
	Filter string
	// Version increments on every upsert; the engine uses it to notice a
	// changed configuration.
	Version   int64
	UpdatedAt time.Time
}

// EndpointID returns the ID of the endpoint name in namespace.
func EndpointID(namespace, name string) string { return namespace + "/" + name }

// NamespaceOf is the namespace of an endpoint ID.
func NamespaceOf(endpointID string) string {
	ns, _, _ := strings.Cut(endpointID, "/")
	return ns
}

// EndpointUpsertParams carries the configuration to store; Version and
// UpdatedAt are set by the store (UpdatedAt from Now).
type EndpointUpsertParams struct {
	Endpoint Endpoint
	Now      time.Time
}

// EndpointDeleteParams names the endpoint to delete.
type EndpointDeleteParams struct {
	ID  string
	Now time.Time
}

// Event is one published event. Data is the JSON object the producer sent;
// Secrets the separate one-time secrets object, merged into data only on the
// wire, and nil once scrubbed (SecretNames stays).
type Event struct {
	ID             string
	Namespace      string
	Type           string
	Data           json.RawMessage
	Secrets        sensitive.Bytes
	SecretNames    []string
	SecretsScrubAt *time.Time
	// SecretsScrubDue is when a grace period ends and the secrets go.
	SecretsScrubDue *time.Time
	// PayloadPrunedAt is set once Data was removed by retention.
	PayloadPrunedAt *time.Time
	ReissueOf       string
	IdempotencyKey  string
	BodyHash        []byte
	CreatedAt       time.Time
	// The contract of the event's type (WebhookEventType), stamped at
	// publish so that every replica reads it from the ledger
	// (docs/adr/0038); zero values for an event of a type without one.
	//
	// TypeGeneration is the generation of the WebhookEventType that validated the event; 0 when none did.
	TypeGeneration int64
	// ReplayClass is the type's replay contract: ReplayRetryable ("" or "Retryable"), ReplayReissueOnly, ReplayNever.
	ReplayClass ReplayClass
	// ValidUntil: a delivery not delivered by then is cancelled with reason Expired, never sent late. nil: no bound.
	ValidUntil *time.Time
	// PolicyOverride is the type's RetryPolicy (spec.retryPolicyRef of the WebhookEventType), replacing the endpoint's policy for this event's deliveries; nil: the endpoint's.
	PolicyOverride *Policy
	// Trace is the trace context of the span that published the event;
	// zero when tracing was off.
	Trace TraceContext
}

// EventInsertParams is one event to ingest. ID is generated by the caller
// (NewID("evt")) so that the ID is known before the commit.
type EventInsertParams struct {
	ID             string
	Namespace      string
	Type           string
	Data           json.RawMessage
	Secrets        sensitive.Bytes
	SecretNames    []string
	ReissueOf      string
	IdempotencyKey string
	BodyHash       []byte
	// The contract of the event's type (WebhookEventType), stamped at
	// publish so that every replica reads it from the ledger
	// (docs/adr/0038); zero values for an event of a type without one.
	//
	// TypeGeneration is the generation of the WebhookEventType that validated the event; 0 when none did.
	TypeGeneration int64
	// ReplayClass is the type's replay contract: ReplayRetryable ("" or "Retryable"), ReplayReissueOnly, ReplayNever.
	ReplayClass ReplayClass
	// ValidUntil: a delivery not delivered by then is cancelled with reason Expired, never sent late. nil: no bound.
	ValidUntil *time.Time
	// PolicyOverride is the type's RetryPolicy (spec.retryPolicyRef of the WebhookEventType), replacing the endpoint's policy for this event's deliveries; nil: the endpoint's.
	PolicyOverride *Policy
	// MaxFanOut, when positive, bounds the deliveries one event may create:
	// it keeps a single publish from becoming an unbounded number of
	// outbound requests.
	MaxFanOut int
	// Trace is the trace context of the span that publishes the event,
	// stored with it (once per event, never per attempt); zero when
	// tracing is off.
	Trace TraceContext
	// Decided says which filters of the endpoints whose patterns select
	// the event it matches (Receives); an insert that selects a filter it
	// does not decide is refused with an *UndecidedError.
	Decided FilterDecisions `json:"-"`
	// Endpoint, when set, addresses the event to that one endpoint (its
	// ID, "<namespace>/<name>") instead of fanning it out by type: see
	// Receives and CheckTarget (targeting.go).
	Endpoint string
	Now      time.Time
	// LeaseTo, when set, hands the event's new deliveries straight to the
	// engine that publishes it: each delivery to an endpoint that is neither
	// paused nor refused by LeaseTo.Admit is inserted in_flight, leased to LeaseTo.Owner until
	// LeaseTo.Until, in the transaction that commits the event, so the
	// engine sends it without finding it again with a claim (NewDelivery).
	// A duplicate returns the originals untouched.
	LeaseTo *Lease
}

// SerialWriter is implemented by a store that commits one transaction at
// a time (SQLite's single writer): there, ingest and attempt records
// sharing commits through WriteMany is pure gain, while on a store that
// commits concurrently (PostgreSQL) separate commits overlap instead.
type SerialWriter interface {
	SerialWrites() bool
}

// WriteBatch is what WriteMany commits.
type WriteBatch struct {
	Attempts []*AttemptRecordParams
	Events   []*EventInsertParams
}

// WriteResult holds WriteMany's results, one per item of the batch, in
// order.
type WriteResult struct {
	Attempts []AttemptRecordResult
	Events   []EventInsertResult
}

// Lease is the lease EventInsertParams.LeaseTo asks for: its holder, when
// it expires, and which endpoints' deliveries it takes.
type Lease struct {
	Owner string
	Until time.Time
	// Admit, when set, is asked for each endpoint (not paused) that the
	// event is routed to whether its delivery is leased (true) or stays
	// scheduled for the claims (false): the holder counts its own
	// in-flight limits, one endpoint at a time, so that what a publish
	// costs does not grow with the endpoints registered (nil: every one
	// is leased). Stores call it inside the insert's transaction, again
	// for each endpoint if they retry the transaction, so it must be
	// quick and must not call the store.
	Admit func(endpointID string) bool `json:"-"`
}

// admits reports whether l takes the delivery to endpointID.
func (l *Lease) admits(endpointID string) bool { return l.Admit == nil || l.Admit(endpointID) }

// EventInsertResult is the outcome of one EventInsertParams.
type EventInsertResult struct {
	Event      Event
	Deliveries []Delivery
	// Duplicate is true when the idempotency key was used before with the
	// same body: Event and Deliveries are the originals.
	Duplicate bool
	// Err is ErrIdempotencyConflict (wrapped) when the key was used with a
	// different body, or a *FanOutError; nothing was inserted.
	Err error
	// Leased are the new deliveries leased to EventInsertParams.LeaseTo,
	// ready to send like claimed ones (also listed in Deliveries).
	Leased []ClaimedDelivery
}

// Delivery is one event bound for one endpoint.
type Delivery struct {
	ID             string
	EventID        string
	EndpointID     string
	State          DeliveryState
	Attempts       int
	DueAt          time.Time
	FirstAttemptAt *time.Time
	LeaseOwner     string
	LeaseUntil     *time.Time
	AckDeadline    *time.Time
	LastStatus     int
	LastError      string
	ExhaustReason  ExhaustReason
	Resolution     Resolution
	TerminalAt     *time.Time
	// RetryOf is the exhausted delivery a recovery retry resends.
	RetryOf string
	// Resend marks a delivery that sends again what was sent or attempted
	// before: a recovery's retry, the deliveries of a reissued event
	// (ReissueOf), a replay. Its first attempt spends the endpoint's retry
	// budget and is not counted as a first attempt (SpendsRetryBudget,
	// FirstAttempts; docs/adr/0035).
	Resend bool
	// ResolvedBy is the recovery operation that gave the resolution.
	ResolvedBy string
	CreatedAt  time.Time
}

// DeliveryClaimParams selects deliveries to lease.
type DeliveryClaimParams struct {
	Owner            string
	Now              time.Time
	LeaseFor         time.Duration
	Limit            int
	ExcludeEndpoints []string
	// EndpointSlots caps the deliveries claimed per endpoint (the free
	// slots under its in-flight limit); endpoints absent from it are
	// capped by Limit alone. A backlogged endpoint with two free slots
	// then yields two deliveries, not Limit that would be released again.
	EndpointSlots map[string]int
	// NamespaceSlots caps the deliveries claimed per namespace (what is
	// left of its fair share of the claimer's workers); a namespace absent
	// from it is capped by DefaultNamespaceSlots when that is positive,
	// else by Limit alone. It counts only what EndpointSlots kept.
	NamespaceSlots        map[string]int
	DefaultNamespaceSlots int
	// FirstAttemptsOnly claims only deliveries never attempted
	// (Attempts 0): the claimer's retries hold all the workers they may,
	// and the rest are reserved for first attempts.
	FirstAttemptsOnly bool
}

// DeliveryClaimExpiredParams selects expired deliveries to lease
// (DeliveryClaimExpired).
type DeliveryClaimExpiredParams struct {
	Owner    string
	Now      time.Time
	LeaseFor time.Duration
	Limit    int
}

// Validate reports why p cannot be applied.
func (p *DeliveryClaimExpiredParams) Validate() error {
	switch {
	case p == nil:
		return errors.New("claim expired deliveries: nil params")
	case p.Owner == "" || p.Limit <= 0 || p.LeaseFor <= 0 || p.Now.IsZero():
		return errors.New("claim expired deliveries: Owner, Limit, LeaseFor and Now are required")
	}
	return nil
}

// ClaimedDelivery is a leased delivery with what is needed to send it.
type ClaimedDelivery struct {
	Delivery Delivery
	Event    Event
	// EndpointVersion is the endpoint configuration version at claim time.
	EndpointVersion int64
}

// DeliveryReleaseParams returns a leased delivery to scheduled.
type DeliveryReleaseParams struct {
	DeliveryID string
	Owner      string
	DueAt      time.Time
	Now        time.Time
}

// LeasesReclaimParams names the leases LeasesReclaim returns to the pool.
type LeasesReclaimParams struct {
	// Instance is the identity shared by the processes of one replica,
	// one after the other; required.
	Instance string
	// Keep is the calling process's own owner, whose leases stay.
	Keep string
}

// OwnerOf is the lease owner of a process of instance, told apart from the
// instance's other processes by process.
func OwnerOf(instance, process string) string { return instance + "/" + process }

// Attempt is one HTTP request to an endpoint and what came back.
type Attempt struct {
	DeliveryID string
	Number     int
	StartedAt  time.Time
	Duration   time.Duration
	// StatusCode is 0 when no response arrived (see Error).
	StatusCode int
	// Error describes a failure without a response, or why a response
	// failed; never a secret.
	Error string
	// ResponseExcerpt is the start of the response body, bounded by the
	// dispatcher.
	ResponseExcerpt []byte
}

// Next is the transition that follows an attempt.
type Next struct {
	State DeliveryState // scheduled, awaiting_ack, delivered or exhausted
	// DueAt is when the retry is due (State scheduled).
	DueAt time.Time
	// AckDeadline is when an acknowledgement is due (State awaiting_ack).
	AckDeadline time.Time
	// Reason says why the delivery was exhausted (State exhausted).
	Reason ExhaustReason
}

// AttemptRecordParams records one finished attempt.
type AttemptRecordParams struct {
	DeliveryID string
	Owner      string
	Attempt    Attempt
	Next       Next
	Now        time.Time
	// Unsent records Next without an attempt: the delivery was never sent
	// (its horizon ran out while its endpoint's breaker held it, see
	// Breakers.BreakerExpire). No attempt row is added, Attempts and
	// FirstAttemptAt stay, and the transition counts as no attempt outcome
	// and no first attempt.
	Unsent bool
	// Leased, when set, is the delivery and its event as the lease to
	// Owner handed them out (EventInsertResult.Leased or a claim). A store
	// may record from this copy instead of reading the row, but only while
	// the row is still exactly the copy (every column a transition keeps
	// or returns); otherwise, and when it is nil, it reads the row. The
	// result is the same either way. Its event's Secrets must be as
	// stored then: secrets are only ever dropped, so an event that had
	// none then has none now.
	Leased *ClaimedDelivery
}

// AttemptRecordResult is the outcome of one AttemptRecordParams.
type AttemptRecordResult struct {
	Delivery Delivery
	// DeadLetter is the delivery created for the dead-letter endpoint, if
	// any.
	DeadLetter *Delivery
	// Err is ErrLeaseLost (wrapped) or ErrNotFound when nothing changed.
	Err error
}

// DeadLetterData is the data of a hookkeeper.delivery.exhausted event.
type DeadLetterData struct {
	DeliveryID string `json:"deliveryID"`
	EventID    string `json:"eventID"`
	EventType  string `json:"eventType"`
	Endpoint   string `json:"endpoint"`
	// Owner is the endpoint's owner when the delivery was exhausted.
	Owner       string        `json:"owner,omitempty"`
	Reason      ExhaustReason `json:"reason"`
	Attempts    int           `json:"attempts"`
	LastStatus  int           `json:"lastStatus,omitempty"`
	LastError   string        `json:"lastError,omitempty"`
	ExhaustedAt time.Time     `json:"exhaustedAt"`
}

// ActivityCursor is where a reader of EndpointActivitySince left off: the
// store's clock (Unix nanoseconds) when its read began. The zero cursor
// has read nothing.
type ActivityCursor struct{ At int64 }

// From is the earliest change stamp a read from c returns: ActivityOverlap
// (overlap, which store tests may shorten) before c, or every stamp for the
// zero cursor.
func (c ActivityCursor) From(overlap time.Duration) int64 {
	if c == (ActivityCursor{}) {
		return math.MinInt64
	}
	return c.At - int64(overlap)
}

// ActivityOverlap is how far before its cursor EndpointActivitySince reads
// again. A change is stamped when its transaction writes it and seen when
// it commits: a read that began in between misses it, and the next read,
// which goes back ActivityOverlap, finds it, unless the transaction stayed
// open longer than that after stamping. Write transactions last
// milliseconds; one that outlives a minute is stuck, and its change still
// shows at the endpoint's next change or the controller's safety resync
// (1–2h, docs/adr/0040). Re-reading a minute of changes costs the rows
// that changed in it, which a poller compares with its previous read.
const ActivityOverlap = time.Minute

// EndpointActivity is what EndpointActivityList reads of one endpoint:
// everything of its status that moves when its deliveries do.
type EndpointActivity struct {
	Stats EndpointStats
	// LastDeferralAt is the latest retry its retry budget deferred, of the
	// deferral buckets the ledger still keeps (BudgetRetention); nil when
	// none. Deferrals move no counter, and RetryBudgetLimited shows them.
	LastDeferralAt *time.Time
}

// EndpointStats are an endpoint's counters.
type EndpointStats struct {
	EndpointID          string
	Pending             int64 // scheduled
	InFlight            int64
	AwaitingAck         int64
	Delivered           int64
	ExhaustedUnresolved int64
	Cancelled           int64
	LastSuccessAt       *time.Time
	LastFailureAt       *time.Time
	LastFailureReason   string
}
