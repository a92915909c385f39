// Package publish is the one way an event enters the ledger, whichever
// door it comes through: the HTTP API's POST /v1/namespaces/{ns}/events
// and the aggregated API's create of a webhookevent both hand it a
// Request and translate its refusals into their own answers.
//
// It owns what publishing means, so that the doors cannot differ in it:
// the rules of a request and the refusals that name the field and the
// rule broken (refusals.go); the canonical form whose hash is the
// idempotency evidence (canonical.go), identical for a request's JSON form
// and its typed form; idempotency (the same key with the same canonical
// body replays the original event, with another body it is a conflict);
// and the commit through a Committer (the engine), whose failures become
// refusals a publisher can act on: a ledger that cannot be reached is
// Unavailable with a retry-after, never an internal error.
package publish

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/tracing"
)

// Defaults of Config.
const (
	DefaultMaxBytes      = 256 << 10
	DefaultMaxSecrets    = 32
	DefaultMaxFanOut     = 100
	DefaultCommitTimeout = 10 * time.Second
	DefaultRetryAfter    = time.Second
)

// Committer commits one event durably before it returns. A per-event
// outcome (idempotent duplicate, idempotency conflict, fan-out limit,
// unknown target) is in the result; the error is for failures of the
// commit itself: one that wraps ledger.ErrUnavailable could not reach the
// ledger, one that wraps ErrStopping was not tried because the process is
// shutting down. The engine implements it.
type Committer interface {
	Publish(ctx context.Context, params *ledger.EventInsertParams) (ledger.EventInsertResult, error)
}

// Config is what publishing needs. Zero values take the defaults.
type Config struct {
	Committer Committer
	// Now is the clock; default time.Now.
	Now func() time.Time
	// MaxBytes bounds a request's JSON form (default DefaultMaxBytes).
	MaxBytes int64
	// MaxSecrets bounds the secrets of one event (default DefaultMaxSecrets).
	MaxSecrets int
	// MaxFanOut bounds the endpoints one event may be delivered to (default
	// DefaultMaxFanOut): an event whose type matches more is refused whole,
	// so that one publish cannot become an unbounded number of requests.
	MaxFanOut int
	// CommitTimeout bounds the wait for a commit (default
	// DefaultCommitTimeout); past it the refusal is Unavailable and the
	// outcome unknown to the publisher, who retries with the same key.
	CommitTimeout time.Duration
	// RetryAfter is the wait an Unavailable refusal advises (default
	// DefaultRetryAfter).
	RetryAfter time.Duration
	// SecretsHashKey, when set, makes secret values part of the body hash
	// (as an HMAC under this key), so that reusing an idempotency key with
	// different secret values is a conflict. Without it only secret names
	// count. Keep it stable for at least the longest replay window.
	SecretsHashKey []byte
	// FilterBudget bounds the time one event's fan-out spends evaluating
	// endpoints' filters, waiting for its namespace's evaluator included
	// (default DefaultFilterBudget); past it, the remaining filtered
	// endpoints do not receive the event, counted as budget (filters.go).
	FilterBudget time.Duration
	// FilterEvalTimeout bounds one evaluation of one filter (default
	// DefaultFilterEvalTimeout); one that takes longer is no match,
	// counted as timeout and told to Overruns.
	FilterEvalTimeout time.Duration
	// FilterSlots is how many filter evaluations of one publishing
	// namespace run at once (default DefaultFilterSlots): the share of the
	// cores one namespace's filters may take.
	FilterSlots int
	// Overruns hears of every filter that exceeded a budget (default:
	// the Committer, when it is an OverrunSink, as the engine is).
	Overruns OverrunSink
	// Contracts, when set, holds publishes to their types' contracts
	// (WebhookEventType): schema, required secrets, strict namespaces,
	// validFor, replay class and retry policy.
	Contracts Contracts
	// Door labels this core's metrics ("http", "kube").
	Door string
	// Metrics, when set, counts what the ledger refused (NewMetrics).
	Metrics *Metrics
}

// Core publishes. Build it with New; it is safe for concurrent use.
type Core struct {
	cfg   Config
	slots *nsSlots
	// filters is the Committer as a FilterSource, nil when it is not one.
	filters FilterSource
}

// New fills cfg's defaults; Committer is required.
func New(cfg Config) (*Core, error) {
	if cfg.Committer == nil {
		return nil, errors.New("publish: Committer is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxSecrets <= 0 {
		cfg.MaxSecrets = DefaultMaxSecrets
	}
	if cfg.MaxFanOut <= 0 {
		cfg.MaxFanOut = DefaultMaxFanOut
	}
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = DefaultCommitTimeout
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.FilterBudget <= 0 {
		cfg.FilterBudget = DefaultFilterBudget
	}
	if cfg.FilterEvalTimeout <= 0 {
		cfg.FilterEvalTimeout = DefaultFilterEvalTimeout
	}
	if cfg.FilterSlots <= 0 {
		cfg.FilterSlots = DefaultFilterSlots
	}
	if cfg.Overruns == nil {
		cfg.Overruns, _ = cfg.Committer.(OverrunSink)
	}
	c := &Core{cfg: cfg, slots: newNSSlots(cfg.FilterSlots)}
	c.filters, _ = cfg.Committer.(FilterSource)
	return c, nil
}

// Config returns the core's configuration, defaults filled in.
func (c *Core) Config() Config { return c.cfg }

// Through returns the core as the door named sees it: the same settings,
// the same per-namespace filter slots and contracts, its metrics labelled
// door. A process builds one core and hands each door its view, so that a
// publish and its retry through the other door hash, limit and refuse
// alike, and a namespace's filters get one share of the cores, not one per
// door.
func (c *Core) Through(door string) *Core {
	d := *c
	d.cfg.Door = door
	return &d
}

// Request is one publish in typed form. Its JSON form (PublishJSON) is
// the object {"type", "data", "secrets", "reissueOf", "endpoint"}.
type Request struct {
	Namespace string
	// IdempotencyKey, when set, makes the publish safe to retry (see the
	// package doc).
	IdempotencyKey string
	Type           string
	// Data is the event's payload: a JSON object, in any formatting.
	Data []byte
	// Secrets, when set, is a JSON object of one-time secrets, merged into
	// data only when sent and scrubbed once no delivery is pending.
	Secrets sensitive.Bytes
	// ReissueOf names the event this one replaces ("evt_...").
	ReissueOf string
	// Endpoint, when set, addresses the event to this WebhookEndpoint of
	// the namespace instead of fanning it out.
	Endpoint string
	// ValidUntil, when set, bounds when a delivery may still be sent;
	// it may shorten the type's validFor, never lengthen it.
	ValidUntil *time.Time
}

// Publish validates r, commits it and returns the new event, or with
// Duplicate set the original one of a replayed key. A refusal is one of
// the errors of refusals.go; any other error is internal.
func (c *Core) Publish(ctx context.Context, r *Request) (ledger.EventInsertResult, error) {
	if err := c.checkAddress(r.Namespace, r.IdempotencyKey); err != nil {
		return ledger.EventInsertResult{}, err
	}
	// The size of its JSON form, give or take whitespace: bounded before
	// any parsing.
	size := len(r.Type) + len(r.Data) + len(r.Secrets) + len(r.ReissueOf) + len(r.Endpoint) +
		len(`{"type":"","data":,"secrets":,"reissueOf":"","endpoint":""}`)
	if int64(size) > c.cfg.MaxBytes {
		return ledger.EventInsertResult{}, &TooLargeError{Limit: c.cfg.MaxBytes}
	}
	b, err := canonicalRequest(r, c.cfg.MaxSecrets, c.cfg.SecretsHashKey)
	if err != nil {
		return ledger.EventInsertResult{}, err
	}
	return c.commit(ctx, r.Namespace, r.IdempotencyKey, b)
}

// PublishJSON is Publish of the request whose JSON form is doc, in
// namespace ns with idempotency key key (empty: none).
func (c *Core) PublishJSON(ctx context.Context, ns, key string, doc []byte) (ledger.EventInsertResult, error) {
	if err := c.checkAddress(ns, key); err != nil {
		return ledger.EventInsertResult{}, err
	}
	if int64(len(doc)) > c.cfg.MaxBytes {
		return ledger.EventInsertResult{}, &TooLargeError{Limit: c.cfg.MaxBytes}
	}
	b, err := parseBody(doc, c.cfg.MaxSecrets, c.cfg.SecretsHashKey)
	if err != nil {
		return ledger.EventInsertResult{}, err
	}
	return c.commit(ctx, ns, key, b)
}

func (c *Core) checkAddress(ns, key string) error {
	if !ValidNamespace(ns) {
		return invalid(RuleInvalid, FieldNamespace,
			"namespace must be a DNS-1123 label: at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit")
	}
	if key != "" && !ValidIdempotencyKey(key) {
		return invalid(RuleInvalid, FieldIdempotencyKey,
			"the idempotency key must be 1 to %d printable ASCII characters", MaxIdempotencyKeyLength)
	}
	return nil
}

// commit hands b to the Committer and explains its outcome.
func (c *Core) commit(ctx context.Context, ns, key string, b *canonicalBody) (ledger.EventInsertResult, error) {
	now := c.cfg.Now()
	params := &ledger.EventInsertParams{
		ID:             ledger.NewID("evt", now),
		Namespace:      ns,
		Type:           b.Type,
		Data:           b.Data,
		Secrets:        b.Secrets,
		SecretNames:    b.SecretNames,
		ReissueOf:      b.ReissueOf,
		IdempotencyKey: key,
		BodyHash:       b.Hash,
		MaxFanOut:      c.cfg.MaxFanOut,
		Endpoint:       targetEndpoint(ns, b.Endpoint),
		Now:            now,
		Decided:        ledger.FilterDecisions{},
	}
	// The publish span's context, stored once with the event: each
	// attempt's span continues it (internal/tracing).
	params.Trace.Parent, params.Trace.State = tracing.Carried(ctx)
	if err := c.applyContract(ns, b, params, now); err != nil {
		return ledger.EventInsertResult{}, err
	}
	f := c.newFanOut(ns, b.Type, b.Data)
	if c.filters != nil && params.Endpoint == "" {
		f.decide(ctx, c.filters.EndpointFilters(ns, b.Type), params.Decided)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
	defer cancel()
	for round := 1; ; round++ {
		res, err := c.cfg.Committer.Publish(ctx, params)
		if err != nil {
			return res, c.commitError(params.ID, err)
		}
		if ue, ok := errors.AsType[*ledger.UndecidedError](res.Err); ok && round < maxDecideRounds {
			// The ledger knows endpoints this process had not seen yet.
			f.decide(ctx, ue.Filters, params.Decided)
			continue
		}
		if res.Err != nil {
			return res, outcomeError(params, res.Err)
		}
		trace.SpanFromContext(ctx).SetAttributes(tracing.AttrEventID.String(res.Event.ID), tracing.AttrEventType.String(res.Event.Type),
			tracing.AttrDuplicate.Bool(res.Duplicate), tracing.AttrDeliveries.Int(len(res.Deliveries)))
		return res, nil
	}
}

// targetEndpoint is the ledger ID of the endpoint an addressed publish
// names; empty when it names none.
func targetEndpoint(ns, name string) string {
	if name == "" {
		return ""
	}
	return ns + "/" + name
}

// commitError explains a commit that failed as a whole: this is the one
// place that decides what a publisher may retry.
func (c *Core) commitError(id string, err error) error {
	var u *UnavailableError
	switch {
	case errors.Is(err, ErrStopping):
		u = &UnavailableError{Reason: Stopping, Err: err,
			Message: "the server is shutting down and did not record the event; retry"}
	case errors.Is(err, ledger.ErrUnavailable):
		u = &UnavailableError{Reason: LedgerUnreachable, Err: err,
			Message: "the ledger cannot be reached now; the event may or may not be recorded: retry with the same idempotency key (send one to make retries safe)"}
	case errors.Is(err, context.DeadlineExceeded):
		u = &UnavailableError{Reason: CommitTimeout, Err: err,
			Message: "the commit did not finish in time; the event may or may not be recorded: retry with the same idempotency key (send one to make retries safe)"}
	case errors.Is(err, context.Canceled):
		u = &UnavailableError{Reason: Canceled, Err: err,
			Message: "the request ended before the commit finished; the event may or may not be recorded: retry with the same idempotency key (send one to make retries safe)"}
	default:
		return fmt.Errorf("publishing event %s: %w", id, err)
	}
	u.RetryAfter = c.cfg.RetryAfter
	if u.LedgerOutage() {
		c.cfg.Metrics.countLedgerUnavailable(c.cfg.Door)
	}
	return u
}

// outcomeError explains an event the ledger refused.
func outcomeError(p *ledger.EventInsertParams, err error) error {
	if errors.Is(err, ledger.ErrIdempotencyConflict) {
		return ErrIdempotencyConflict
	}
	if foe, ok := errors.AsType[*ledger.FanOutError](err); ok {
		return &FanOutError{Namespace: foe.Namespace, Type: foe.Type, Matches: foe.Matches, Max: foe.Max}
	}
	if te, ok := errors.AsType[*ledger.TargetError](err); ok {
		return &UnknownEndpointError{Namespace: te.Namespace, Endpoint: EndpointName(te.Namespace, te.Endpoint)}
	}
	if qe, ok := errors.AsType[*ledger.QuotaError](err); ok {
		return &QuotaExceededError{Namespace: qe.Namespace, Limit: qe.Limit, Hard: qe.Hard, Used: qe.Used, RetryAfter: qe.RetryAfter}
	}
	return fmt.Errorf("publishing event %s: %w", p.ID, err)
}

// EndpointName turns a ledger endpoint ID ("<ns>/<name>") into the name
// the APIs speak.
func EndpointName(ns, endpointID string) string {
	if name, ok := strings.CutPrefix(endpointID, ns+"/"); ok {
		return name
	}
	return endpointID
}
