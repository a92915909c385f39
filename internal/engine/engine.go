package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"

	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/groupcommit"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// Clock is the engine's source of time; tests inject a fake one.
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Sender sends one attempt; *dispatch.Sender is the real one.
type Sender interface {
	Send(ctx context.Context, req dispatch.Request) dispatch.Result
}

// ExhaustedNotice announces that a delivery was given up on.
type ExhaustedNotice struct {
	Delivery ledger.Delivery
	// DeadLetter is the delivery enqueued to the dead-letter endpoint, if
	// any.
	DeadLetter *ledger.Delivery
}

// Options configure an Engine. Store is required; the rest have defaults.
type Options struct {
	Store ledger.Store
	// Sender makes the attempts. nil means dispatch.NewSender(), which
	// delivers to any address (unit tests and tools); the manager passes
	// dispatch.NewGuardedSender with the operator's destination policy.
	Sender Sender
	// Owner identifies this process in leases; unique per process. Set
	// Instance instead to have it derived.
	Owner string
	// Instance is the identity of the replica this process runs as, stable
	// across restarts of its process and never shared by two live
	// processes (the manager uses the pod's UID). When set, the owner is
	// ledger.OwnerOf(Instance, <random>), and Run first returns the leases
	// of the instance's earlier processes to the pool: a process that
	// crashed mid-attempt has its deliveries sent again at once instead of
	// after their leases expire (docs/adr/0008).
	Instance string
	// Workers bounds the attempts in progress at once (default 128).
	Workers int
	// ClaimBatch bounds the deliveries claimed per query (default 128).
	ClaimBatch int
	// LeaseMargin is added to the longest attempt timeout to form the lease
	// (default 15s): a crashed owner's deliveries return to the pool after
	// it.
	LeaseMargin time.Duration
	// ShutdownGrace is how long attempts in progress may go on once Run's
	// context ends (default 10s); past it they are cut and released. A cut
	// attempt may already have reached its receiver, which then gets the
	// event again from whoever claims it next: letting attempts finish
	// keeps a rolling update from sending duplicates.
	ShutdownGrace time.Duration
	// IdleWait is the longest sleep between claims when nothing is due
	// (default 1s); it bounds how late work inserted by another process is
	// noticed.
	IdleWait time.Duration
	// WriteBatch tunes the group commits of ingest and of attempt records
	// (shared on a serial store: writes.go). Its MaxDelay defaults to
	// DefaultCommitDelay; a negative one commits every item as soon as the
	// committer is free. Its Committers applies to ingest on a concurrent
	// store (default 1: two measured no shorter tail at a steady 1,000/s
	// on PostgreSQL, benchmarks.md, "Issue #26: concurrent ingest
	// commits"); a serial store's shared batcher and a concurrent one's
	// records commit one batch at a time.
	WriteBatch groupcommit.Options
	// RecordWait is how long an attempt's record may wait before it
	// commits: on a serial store for a commit that ingest triggers, on a
	// concurrent one for other records to share its transaction (default
	// 10ms; writes.go).
	// Nobody waits on a record (its worker and endpoint slot are free once
	// the receiver answered) unless the records pending are at their bound
	// (twice Workers), and then it commits at once.
	RecordWait time.Duration
	// OnExhausted is called after an exhaustion is committed. It must not
	// block: hand the notice to a queue.
	OnExhausted func(ExhaustedNotice)
	// OnBreaker is called when this engine sees an endpoint's circuit
	// breaker change: its own transitions, and those of other engines
	// found on a refresh. It must not block.
	OnBreaker func(ledger.Breaker)
	// OnFilterOverrun is called with an endpoint's ID when its filter
	// exceeded a budget on this replica (filters.go): on the first
	// overruns of a filter, then at most once a minute. It must not block.
	OnFilterOverrun func(endpointID string)
	// SharedLimits holds each endpoint's rateLimit and maxInFlight in the
	// ledger for every engine on it together (limits.go): set it when
	// several processes share the ledger (PostgreSQL).
	SharedLimits bool
	Clock        Clock
	// Rand returns values in [0,1) for jitter (default math/rand/v2).
	Rand    func() float64
	Logger  logr.Logger
	Metrics *Metrics
	// SweepInterval paces the background sweeps: overdue acknowledgements
	// and secrets past their grace period (default 1s).
	SweepInterval time.Duration
	// PruneInterval paces retention (default 1m); CompactInterval the
	// compaction that makes scrubbed bytes unrecoverable from the files
	// (default 5m: a truncating checkpoint briefly holds the writer).
	PruneInterval   time.Duration
	CompactInterval time.Duration
	// Retention of events that reached no endpoint (defaults 168h, 720h).
	DefaultPayloadRetention  time.Duration
	DefaultEvidenceRetention time.Duration
}

// DefaultCommitDelay is how long a commit of ingest or of attempt records
// may wait for more of them while they keep coming (groupcommit's
// MaxDelay). At a steady rate that would otherwise commit one event at a
// time, a few milliseconds let several share a transaction and its fsync,
// which is most of what an event costs the ledger there (ADR 0027); an
// event after a quiet spell commits at once. 5 ms: an event joins the wait
// only if it came less than the delay after the one before, so 2 ms left
// a steady 500/s committing alone; 5 ms took 18–27% off the CPU per event
// at 500/s and 1,000/s on both stores for +2.5 ms of p50 (ADR 0027).
const DefaultCommitDelay = 5 * time.Millisecond

// Engine delivers the ledger's due deliveries. Create it with New, run it
// with Run; Publish, RegisterEndpoint and the other methods may be called
// before and while it runs.
type Engine struct {
	opts  Options
	store ledger.Store
	// publisher and recorder group-commit ingest and attempt records; on
	// a serial store they are one batcher (writes.go).
	publisher, recorder *groupcommit.Batcher[writeItem, writeOutcome]
	// alarm wakes the claim loop for work that is due before it would
	// look again.
	alarm *alarm
	// workers holds a slot per attempt sending (workers.go); records holds
	// one per attempt whose outcome is being recorded, so that a slow
	// commit holds no worker and bounds the records pending instead.
	workers *workers
	records chan struct{}
	// backlog is set while the last claim found more due work than it
	// took (or could take none): a publish then leaves its deliveries to
	// the claims, which take them in due order, instead of leasing them
	// itself (handoff.go).
	backlog atomic.Bool
	// behind is set while the last claim took a full batch, due work
	// probably left behind; a publish to one of the namespaces it left
	// behind (backlogOf) then waits for the next claim round (rounds)
	// before it commits (yield).
	behind atomic.Bool
	rounds rounds
	// running is what a publish needs to start attempts itself while Run
	// runs (handoff.go).
	running running
	// roundOK is when the last claim round ended without error (unix
	// nanoseconds of opts.Clock), for Ready.
	roundOK atomic.Int64

	mu        sync.Mutex
	endpoints map[string]*endpointState
	// watched are the endpoints a claim round counts, broken those with a
	// breaker open or ramping, timeouts and ramps the configurations'
	// attempt timeouts and breaker ramps, and slots the last count of
	// free slots, kept as endpoints change (endpointindex.go).
	watched, broken map[string]*endpointState
	// filtered are the endpoints with a filter, by namespace, which a
	// publish decides before its commit; overruns what their filters
	// exceeded (filters.go).
	filtered map[string]map[string]*endpointState
	overruns map[string]*overruns
	// byNamespace are the endpoints of each namespace, and shares what
	// each namespace holds of the workers (fairshare.go).
	byNamespace map[string]map[string]*endpointState
	shares      fairShares
	// backlogged are the namespaces the last claim left due work of,
	// while backlog is set (nil: every namespace); their publishes leave
	// their deliveries to the claims (handoff.go).
	backlogged      atomic.Pointer[map[string]bool]
	timeouts, ramps durationCounts
	slots           slotCache
	// throttledUntil is the latest time an endpoint's shared rate holds
	// it until (limits.go): the slot count changes then, uncached.
	throttledUntil time.Time
	// waiting caches the throttled backlog for the controllers (limits.go).
	waiting waitingCache
	// claim holds, from a claim's slot count to the start of what it
	// claimed, what it may take of each limited endpoint, and a publish's
	// hand-off reserves the slots it leases (endpointState.reserved) until
	// their attempts start: neither takes the slots the other counted on
	// (handoff.go).
	claim *claimHold
	// probes are the deliveries this engine leased as breaker probes.
	probes map[string]bool
	// longestOverride is the longest attempt timeout of an event type's
	// policy seen so far (nanoseconds): leases cover it (leaseFor).
	longestOverride atomic.Int64
}

// endpointState is the engine's view of one endpoint: its configuration at
// a version, and this process's in-flight count and rate limiter.
type endpointState struct {
	cfg      ledger.Endpoint
	inFlight int
	// reserved are the slots publishes in progress leased to this
	// endpoint, whose attempts have not started yet (handoff.go).
	reserved int
	limiter  *rate.Limiter
	// creds are cfg's credentials as the sender prepared them (apply).
	creds *dispatch.Credentials
	// breaker is the ledger's circuit breaker as last seen (zero: closed,
	// never opened), streak this engine's run of failures, and opening
	// set while this engine opens it (breaker.go).
	breaker ledger.Breaker
	streak  streak
	opening bool
	// slots is this engine's lease of the endpoint's in-flight slots, and
	// throttledUntil when its shared rate allows the next send, while
	// limits are shared (limits.go).
	slots          slotLease
	throttledUntil time.Time
	// sends are places on the shared rate this engine reserved and has
	// not used yet, in order; claimedAhead the deliveries of the claim
	// being started that will want one (limits.go).
	sends        []time.Time
	claimedAhead int
}

// New returns an Engine for opts.
func New(opts Options) (*Engine, error) {
	if opts.Store == nil {
		return nil, errors.New("engine: a Store is required")
	}
	if opts.Sender == nil {
		opts.Sender = dispatch.NewSender()
	}
	switch {
	case opts.Instance != "" && opts.Owner != "":
		return nil, errors.New("engine: set Owner or Instance, not both")
	case opts.Instance != "":
		opts.Owner = ledger.OwnerOf(opts.Instance, randomSuffix())
	case opts.Owner == "":
		opts.Owner = defaultOwner()
	}
	if opts.Workers <= 0 {
		opts.Workers = 128
	}
	if opts.ClaimBatch <= 0 {
		opts.ClaimBatch = 128
	}
	if opts.LeaseMargin <= 0 {
		opts.LeaseMargin = 15 * time.Second
	}
	if opts.IdleWait <= 0 {
		opts.IdleWait = time.Second
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 10 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.Rand == nil {
		opts.Rand = mathrand.Float64
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.WriteBatch.MaxDelay == 0 {
		opts.WriteBatch.MaxDelay = DefaultCommitDelay
	}
	if opts.RecordWait <= 0 {
		opts.RecordWait = 10 * time.Millisecond
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = time.Second
	}
	if opts.PruneInterval <= 0 {
		opts.PruneInterval = time.Minute
	}
	if opts.CompactInterval <= 0 {
		opts.CompactInterval = 5 * time.Minute
	}
	if opts.DefaultPayloadRetention <= 0 {
		opts.DefaultPayloadRetention = 168 * time.Hour
	}
	if opts.DefaultEvidenceRetention <= 0 {
		opts.DefaultEvidenceRetention = 720 * time.Hour
	}
	e := &Engine{
		opts:        opts,
		store:       opts.Store,
		running:     running{started: make(chan struct{})},
		alarm:       newAlarm(),
		records:     make(chan struct{}, 2*opts.Workers),
		endpoints:   map[string]*endpointState{},
		watched:     map[string]*endpointState{},
		filtered:    map[string]map[string]*endpointState{},
		byNamespace: map[string]map[string]*endpointState{},
		shares:      newFairShares(),
		overruns:    map[string]*overruns{},
		broken:      map[string]*endpointState{},
		timeouts:    durationCounts{},
		ramps:       durationCounts{},
		probes:      map[string]bool{},
	}
	e.workers = newWorkers(opts.Workers, e.wake)
	e.backlog.Store(true) // until the first claim finds the queue drained
	// Records commit one batch at a time: nobody waits on them, and they
	// are the ones that meet on shared rows (retry budgets, outcomes).
	serial := opts.WriteBatch
	serial.Committers = 1
	if sw, ok := opts.Store.(ledger.SerialWriter); ok && sw.SerialWrites() {
		e.publisher = groupcommit.New(e.commitWrites, serial)
		e.recorder = e.publisher
	} else {
		e.publisher = groupcommit.New(e.commitWrites, opts.WriteBatch)
		e.recorder = groupcommit.New(e.commitWrites, serial)
	}
	return e, nil
}

func defaultOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomSuffix())
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Owner is this engine's lease owner identity.
func (e *Engine) Owner() string { return e.opts.Owner }

// wake makes the claim loop look for work now.
func (e *Engine) wake() { e.alarm.ring() }

// wakeBy makes the claim loop look again by t, when work comes due.
func (e *Engine) wakeBy(t time.Time) { e.alarm.by(t) }

// Publish commits an event (group-committed with concurrent calls). While
// Run runs with a free worker and no backlog, the event's deliveries are
// leased to this engine in the same commit and their attempts start at
// once (handoff.go); otherwise, or for what was not leased, it wakes the
// claim loop. It implements publish.Committer: once Close ran, it refuses
// with ledger.ErrStopping.
func (e *Engine) Publish(ctx context.Context, params *ledger.EventInsertParams) (ledger.EventInsertResult, error) {
	// Only the namespaces the last claim left behind yield: one
	// namespace's retries must not make another's publishes wait for a
	// claim round (and the ledger's writer) they have no work in.
	if e.behind.Load() && e.backlogOf(params.Namespace) {
		e.yield(ctx)
	}
	params, h := e.offerLease(params)
	out, err := e.publisher.Do(ctx, writeItem{event: params})
	if errors.Is(err, groupcommit.ErrClosed) {
		err = fmt.Errorf("%w: %w", ledger.ErrStopping, err)
	}
	res := out.event
	e.opts.Metrics.observePublish(res, err)
	if h != nil {
		e.handOff(h, &res, err)
	}
	if err == nil && res.Err == nil && !res.Duplicate && len(res.Deliveries) > len(res.Leased) {
		e.wake()
	}
	return res, err
}

// Close stops accepting publishes and attempt records after draining those
// in progress. Call it after Run returned.
func (e *Engine) Close() {
	e.publisher.Close()
	e.recorder.Close()
}

// Run claims and sends due deliveries until ctx is done, then lets the
// attempts in progress finish for up to ShutdownGrace: one cut short after
// that is released, not counted.
func (e *Engine) Run(ctx context.Context) error {
	if err := e.loadEndpoints(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	log := e.opts.Logger.WithValues("owner", e.opts.Owner)
	if e.opts.Instance != "" {
		n, err := e.store.LeasesReclaim(ctx, &ledger.LeasesReclaimParams{Instance: e.opts.Instance, Keep: e.opts.Owner})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("reclaiming the leases of this instance's earlier processes: %w", err)
		}
		if n > 0 {
			log.Info("returned the deliveries of this instance's earlier process to the pool", "deliveries", n)
		}
	}
	log.Info("delivery engine started", "workers", e.opts.Workers)

	// Attempts outlive ctx by up to ShutdownGrace: claiming stops at once,
	// sending does not.
	attemptCtx, cutAttempts := context.WithCancel(context.WithoutCancel(ctx))
	defer cutAttempts()
	var wg sync.WaitGroup
	e.running.start(ctx, attemptCtx, &wg)
	defer func() {
		e.running.stop() // no publish starts an attempt past here
		grace := time.AfterFunc(e.opts.ShutdownGrace, cutAttempts)
		defer grace.Stop()
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.runServices(ctx)
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()

	for {
		if ctx.Err() != nil {
			return nil
		}
		wait, err := e.claimOnce(ctx, attemptCtx, &wg)
		e.running.markStarted()
		if err == nil {
			e.roundOK.Store(e.opts.Clock.Now().UnixNano())
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.Error(err, "claiming deliveries failed; retrying")
			wait = time.Second
		}
		if wait == 0 {
			continue
		}
		if wait = e.alarm.plan(e.opts.Clock.Now(), wait); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return nil
			case <-e.alarm.ch:
			case <-timer.C:
			}
			timer.Stop()
		}
		e.alarm.woke()
	}
}

// claimOnce claims what free workers can take and starts the attempts
// under attemptCtx. It returns how long to wait before the next claim: zero
// when more work is probably ready.
func (e *Engine) claimOnce(ctx, attemptCtx context.Context, wg *sync.WaitGroup) (time.Duration, error) {
	defer e.rounds.end()
	// Open breakers' probes first: one delivery each, leased through the
	// ledger so that one engine probes (breaker.go).
	nextProbe := e.startProbes(ctx, attemptCtx, func(ctx, attemptCtx context.Context, c *ledger.ClaimedDelivery) bool {
		return e.start(ctx, attemptCtx, wg, c, false)
	}, e.opts.Clock.Now())
	// The claim's workers are reserved before it runs, so what it claims
	// starts at once even while publishes hand off theirs (handoff.go);
	// without a backlog it leaves half of the free ones to them.
	limit := e.workers.reserveOrWake(func() int {
		want := min(e.workers.idle(), e.opts.ClaimBatch)
		if !e.backlog.Load() {
			want = (want + 1) / 2
		}
		return want
	})
	if limit == 0 {
		e.backlogged.Store(nil) // every namespace's
		e.backlog.Store(true)
		return e.opts.IdleWait, nil // the next worker freed wakes us sooner
	}
	reserved := limit
	defer func() { e.workers.free(reserved) }()
	now := e.opts.Clock.Now()
	cs := e.beginClaim(limit)
	defer e.endClaim()
	claimed, err := e.store.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{
		Owner:                 e.opts.Owner,
		Now:                   now,
		LeaseFor:              e.leaseFor(),
		Limit:                 limit,
		ExcludeEndpoints:      cs.full,
		EndpointSlots:         cs.slots,
		NamespaceSlots:        cs.namespaceSlots,
		DefaultNamespaceSlots: cs.namespaceShare,
		FirstAttemptsOnly:     cs.firstAttemptsOnly,
	})
	if err != nil {
		return 0, fmt.Errorf("claiming deliveries: %w", err)
	}
	// Full endpoints are no backlog: a publish's Lease.Admit leaves their
	// deliveries scheduled, and hands off everyone else's (handoff.go).
	// A full batch leaves a backlog of its namespaces and of those at
	// their share: their publishes queue behind it, the others' do not.
	e.setBacklog(len(claimed) == limit, claimed, cs.atShare)
	e.noteClaimed(claimed)
	started := 0
	for i := range claimed {
		reserved-- // start owns the slot now, and frees it if it starts nothing
		if e.start(ctx, attemptCtx, wg, &claimed[i], true) {
			started++
		}
	}
	e.workers.free(reserved)
	reserved = 0
	e.endClaim()
	if len(claimed) == limit && started > 0 {
		return 0, nil
	}

	// Deliveries of endpoints at their in-flight limit wait for a slot,
	// whose release wakes this loop: their due times are no reason to poll.
	next, ok, err := e.store.NextDueAt(ctx, e.fullEndpoints())
	if err != nil {
		return 0, fmt.Errorf("finding the next due delivery: %w", err)
	}
	wait := e.opts.IdleWait
	if ok {
		wait = min(wait, max(next.Sub(e.opts.Clock.Now()), 10*time.Millisecond))
	}
	if !nextProbe.IsZero() {
		wait = min(wait, max(nextProbe.Sub(e.opts.Clock.Now()), 10*time.Millisecond))
	}
	return wait, nil
}

// start begins the attempt for a leased delivery under attemptCtx, or
// releases it when its endpoint is at its in-flight or rate limit, or,
// for a claimed one (share), when its namespace or endpoint is at its
// fair share: hand-offs during the claim may have taken what the claim's
// view left it (a hand-off's own slot was reserved within the share when
// its commit admitted it; a breaker's probe holds none). It
// reports whether an attempt started. The caller has reserved a worker
// slot for it, which start owns (and frees if no attempt starts): an
// attempt never waits for a worker while its lease runs.
func (e *Engine) start(ctx, attemptCtx context.Context, wg *sync.WaitGroup, c *ledger.ClaimedDelivery, share bool) (started bool) {
	defer func() {
		if !started {
			e.workers.free(1)
		}
	}()
	now := e.opts.Clock.Now()
	if c.Event.Expired(now) {
		// Past its event's ValidUntil: cancelled, never sent late, and
		// before it takes anything from the endpoint's limits.
		e.expire(ctx, c, now)
		return false
	}
	st, err := e.endpointFor(ctx, c.Delivery.EndpointID, c.EndpointVersion)
	if err != nil {
		e.opts.Logger.Error(err, "loading endpoint configuration; releasing delivery", "delivery", c.Delivery.ID)
		e.release(c, now.Add(time.Second), "config")
		return false
	}

	e.mu.Lock()
	st.claimedAhead = max(st.claimedAhead-1, 0)
	if st.breaker.Open && !e.probes[c.Delivery.ID] {
		// Leased before the breaker opened (by a claim or a publish's
		// hand-off): it waits with the rest instead of being sent.
		e.mu.Unlock()
		e.release(c, now, "circuit_open")
		return false
	}
	if share && e.shareFreeLocked(st) <= 0 {
		// The next claim skips what is at its share.
		e.mu.Unlock()
		e.release(c, now, "fair_share")
		return false
	}
	if now.Before(st.throttledUntil) && len(st.sends) == 0 {
		// Other sends of this engine or another took the rate's next
		// places: no ledger round trip to learn it again.
		next := st.throttledUntil
		e.mu.Unlock()
		e.release(c, next, "rate_limit")
		return false
	}
	limit := e.slotLimitLocked(st, now)
	budget := st.cfg.Policy.Budget
	e.mu.Unlock()
	if limit > 0 && e.opts.SharedLimits && !e.ensureSlots(ctx, st, now) {
		e.release(c, now, "max_in_flight")
		return false
	}
	e.mu.Lock()
	if limit = e.slotLimitLocked(st, now); limit > 0 && st.inFlight >= limit {
		e.mu.Unlock()
		e.release(c, now, "max_in_flight")
		return false
	}
	e.mu.Unlock()

	// A retry, and a re-send's first attempt (a recovery, a reissue, a
	// replay), spends the endpoint's retry budget, shared by every engine
	// on the ledger; over budget it waits for the next minute.
	if c.Delivery.SpendsRetryBudget() && budget != nil {
		answer, err := e.store.RetryBudgetAcquire(ctx, &ledger.RetryBudgetParams{EndpointID: c.Delivery.EndpointID, Budget: *budget, Now: now})
		if err != nil {
			e.opts.Logger.Error(err, "taking from the retry budget; releasing delivery", "delivery", c.Delivery.ID)
			e.release(c, now.Add(time.Second), "budget_error")
			return false
		}
		if !answer.Taken {
			e.opts.Metrics.observeDeferred()
			e.recordDeferral(ctx, c.Delivery.EndpointID, now)
			e.release(c, answer.NextAt, "retry_budget")
			return false
		}
	}

	e.mu.Lock()
	e.addInFlightLocked(st, 1)
	e.mu.Unlock()
	sendAt, next, err := e.sendTime(ctx, st, now)
	if sendAt.IsZero() {
		if err != nil {
			e.opts.Logger.Error(err, "taking a send from the endpoint's rate; releasing delivery", "delivery", c.Delivery.ID)
			next = now.Add(time.Second)
		}
		e.mu.Lock()
		e.addInFlightLocked(st, -1)
		e.mu.Unlock()
		e.release(c, next, "rate_limit")
		return false
	}
	e.mu.Lock()
	retry := isRetry(&c.Delivery)
	if retry {
		e.shares.retries++
	}
	cfg, creds := st.cfg, st.creds
	e.mu.Unlock()

	wg.Add(1)
	go func() {
		defer wg.Done()
		sent := sync.OnceFunc(func() {
			e.mu.Lock()
			limit := e.slotLimitLocked(st, e.opts.Clock.Now())
			wasFull := limit > 0 && st.inFlight >= limit
			e.addInFlightLocked(st, -1)
			if retry {
				e.shares.retries--
			}
			e.mu.Unlock()
			e.workers.free(1)
			// Only a freed slot the claim loop was waiting for is worth a
			// claim now (the worker slot wakes it in free); waking on every
			// completion would turn each attempt into a claim transaction.
			if wasFull {
				e.wake()
			}
		})
		defer sent()
		if wait := sendAt.Sub(e.opts.Clock.Now()); wait > 0 {
			// Its place on the endpoint's rate, at most rateHorizon ahead.
			t := time.NewTimer(wait)
			select {
			case <-attemptCtx.Done():
				t.Stop()
				e.release(c, sendAt, "shutdown")
				return
			case <-t.C:
			}
		}
		e.attempt(attemptCtx, &cfg, creds, c, sent)
	}()
	return true
}

// attempt sends one delivery and records the outcome, with the endpoint's
// credentials as prepared for its configuration (registry.go). It calls
// sent once the receiver has answered, to free the worker and endpoint
// slots while the record commits.
func (e *Engine) attempt(ctx context.Context, ep *ledger.Endpoint, creds *dispatch.Credentials, c *ledger.ClaimedDelivery, sent func()) {
	started := e.opts.Clock.Now()
	if c.Event.Expired(started) {
		// The last check before sending (a limit or the budget may have
		// held it since the claim).
		e.expire(context.WithoutCancel(ctx), c, started)
		return
	}
	e.opts.Metrics.observeLag(started.Sub(c.Delivery.DueAt))
	pol := c.Event.PolicyFor(&ep.Policy)
	until, _ := replayUntil(pol, &c.Event, &c.Delivery, started)

	probe := e.isProbe(c.Delivery.ID)
	sendCtx, span := startAttempt(ctx, ep, c, probe)
	res := e.opts.Sender.Send(sendCtx, dispatch.Request{
		URL:            ep.URL,
		Headers:        ep.Headers,
		EventID:        c.Event.ID,
		EventType:      c.Event.Type,
		DeliveryID:     c.Delivery.ID,
		EventTime:      c.Event.CreatedAt,
		Data:           c.Event.Data,
		Secrets:        c.Event.Secrets,
		SigningSecrets: signingSecrets(ep.Secrets, started),
		Timeout:        e.attemptTimeout(pol, &c.Delivery, started),
		Credentials:    creds,
		ReplayUntil:    until,
	})
	if ctx.Err() != nil {
		span.End()
		// Shutdown cut the attempt short (its grace ran out): it proves
		// nothing, so it is not counted; the delivery is due again at once
		// (a probe's lease expires in the breaker and another follows).
		e.release(c, started, "shutdown")
		return
	}
	now := e.opts.Clock.Now()
	out := decide(ep, pol, &c.Delivery, &res, started, now, e.opts.Rand)
	endAttempt(span, &res, &out)
	e.opts.Metrics.observeAttempt(res.Duration, out.next, span.SpanContext())
	if !probe {
		// Before the record: a delivery that a 410 or the last failure of
		// a streak sends back to scheduled is held by then.
		e.observeBreaker(ep, &res, out.failure, now)
	}
	// The delivery stays leased until its record commits, so no claim
	// takes it meanwhile; its slots go to the next delivery now. Taking a
	// record slot first makes the senders wait when records pile up.
	e.records <- struct{}{}
	defer func() { <-e.records }()
	sent()

	recordCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	written, err := e.record(recordCtx, &ledger.AttemptRecordParams{
		DeliveryID: c.Delivery.ID,
		Owner:      e.opts.Owner,
		Attempt: ledger.Attempt{
			DeliveryID:      c.Delivery.ID,
			StartedAt:       started,
			Duration:        res.Duration,
			StatusCode:      res.StatusCode,
			Error:           out.failure,
			ResponseExcerpt: res.Excerpt,
		},
		Next:   out.next,
		Now:    now,
		Leased: c,
	})
	rec := written.attempt
	if probe {
		e.probeDone(ep, c, &res, out.failure, now)
	}
	// Built only when something is logged: most attempts log nothing.
	log := func() logr.Logger {
		return e.opts.Logger.WithValues("delivery", c.Delivery.ID, "event", c.Event.ID, "endpoint", ep.ID)
	}
	switch {
	case err != nil:
		// The lease expires and the delivery is attempted again: at least
		// once, never lost.
		log().Error(err, "recording attempt failed")
		return
	case rec.Err != nil:
		log().V(1).Info("attempt not recorded", "reason", rec.Err.Error())
		return
	}
	if ep.AckMode == ledger.AckCallback {
		// The receiver may have acknowledged before this record: apply
		// (or, if the attempt failed, drop) what the ledger holds. If this
		// fails, the acknowledgement-timeout sweep applies it.
		if err := e.applyHeldAcks(recordCtx, []string{c.Delivery.ID}); err != nil {
			log().Error(err, "applying a held acknowledgement failed; the acknowledgement sweep applies it")
		}
	}
	if out.next.State == ledger.StateScheduled {
		e.wakeBy(out.next.DueAt)
	}
	if out.next.State == ledger.StateExhausted {
		e.exhausted(ExhaustedNotice{Delivery: rec.Delivery, DeadLetter: rec.DeadLetter})
	}
}

// exhausted announces a committed exhaustion, whatever ended the delivery
// (an attempt, an acknowledgement or its timeout): log, metric, notice, and
// a wake-up for the dead letter.
func (e *Engine) exhausted(n ExhaustedNotice) {
	d := &n.Delivery
	e.opts.Logger.Info("delivery exhausted", "delivery", d.ID, "endpoint", d.EndpointID,
		"reason", d.ExhaustReason, "attempts", d.Attempts, "lastError", d.LastError)
	e.opts.Metrics.observeExhausted(d.ExhaustReason, e.ownerOf(d.EndpointID))
	if n.DeadLetter != nil {
		e.wake()
	}
	if e.opts.OnExhausted != nil {
		e.opts.OnExhausted(n)
	}
}

// release returns a claimed delivery to the pool without an attempt.
func (e *Engine) release(c *ledger.ClaimedDelivery, due time.Time, reason string) {
	defer e.wakeBy(due)
	e.opts.Metrics.observeRelease(reason)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := e.store.DeliveryRelease(ctx, &ledger.DeliveryReleaseParams{
		DeliveryID: c.Delivery.ID, Owner: e.opts.Owner, DueAt: due, Now: e.opts.Clock.Now(),
	})
	if err != nil && !errors.Is(err, ledger.ErrLeaseLost) {
		e.opts.Logger.Error(err, "releasing delivery failed; its lease will expire", "delivery", c.Delivery.ID)
	}
}

// signingSecrets returns the secrets an attempt at now is signed with: the
// current one and those of a rotation still in grace.
func signingSecrets(secrets []ledger.SigningSecret, now time.Time) []sensitive.Bytes {
	out := make([]sensitive.Bytes, 0, len(secrets))
	for _, s := range secrets {
		if s.NotAfter.IsZero() || now.Before(s.NotAfter) {
			out = append(out, s.Value)
		}
	}
	return out
}
