// Package groupcommit batches concurrent writes into one commit.
//
// A durable write costs one sync of the ledger, whatever its size; group
// commit shares that sync between every caller that arrived meanwhile.
// Callers submit one item each with Do; a single committer goroutine takes
// everything queued (up to MaxBatch), calls the commit function once, and
// hands each caller its own result.
//
// The committer starts the next commit as soon as the previous one
// returns, with whatever queued during it. An idle system therefore commits
// a lone item at once (no added latency), and a loaded one batches by
// itself: the busier the store, the larger the batches. Between the two, a
// steady rate whose items each find the committer free would pay a sync
// per item; MaxDelay lets such a commit wait for the items that are coming,
// but only while they come (the previous one arrived less than MaxDelay
// before), so that an item after a quiet spell still commits at once. An
// item whose caller can wait (DoLazy) instead waits, up to its own bound,
// for a commit that another item triggers: writes nobody waits on ride in
// the commits of those somebody does.
//
// With Options.Committers above one, up to that many commits run at once:
// an item that queues while a commit runs is taken into the next batch at
// once instead of waiting for that commit to end, which halves the worst
// wait of a store that commits concurrently (PostgreSQL) at a steady rate.
// One batch is collected at a time, so batches stay as large as before
// under load; they commit, and answer their callers, in any order.
//
// Cancellation is ambiguous by nature. A caller whose context ends while
// its item is queued gets ctx.Err(): if the committer had not yet taken the
// item it is dropped, but if it had, the item may still be committed. The
// caller cannot tell which, so work submitted here should be idempotent
// (ingest uses the Idempotency-Key: a retry returns the original).
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("groupcommit: batcher is closed")

// DefaultMaxBatch is the batch cap when Options.MaxBatch is zero.
const DefaultMaxBatch = 128

// Options tune a Batcher. The zero value is sensible: batches of up to
// DefaultMaxBatch, no waiting, no commit timeout.
type Options struct {
	// MaxBatch caps the items per commit (default DefaultMaxBatch).
	MaxBatch int
	// MaxDelay, when positive, lets a batch that is not full wait for more
	// items until its first has been queued for MaxDelay, if that item
	// arrived less than MaxDelay after the Do before it: items coming that
	// close together share a commit, and one after a quiet spell commits at
	// once. Zero commits as soon as the committer is free.
	MaxDelay time.Duration
	// CommitTimeout, when positive, bounds each call of the commit function
	// through its context.
	CommitTimeout time.Duration
	// Committers is how many commits may run at once (default 1). Above
	// one, the commit function must be safe for concurrent use, and the
	// store behind it must let concurrent commits of disjoint batches
	// through without losing or doubling an item (a serial store gains
	// nothing: its commits queue on its writer).
	Committers int
}

// Batcher group-commits items submitted concurrently with Do.
//
// Its queue is not bounded: every queued item has a caller blocked on it,
// so the callers bound it (for ingest, the HTTP server's concurrency), and
// no caller ever waits anywhere that ignores its context.
type Batcher[Req, Res any] struct {
	fn   func(context.Context, []Req) ([]Res, error)
	opts Options

	mu     sync.Mutex
	queue  []*call[Req, Res] // guarded by mu
	closed bool              // guarded by mu
	wake   chan struct{}     // capacity 1: "the queue or closed changed"
	exited chan struct{}

	// lastDo is when the last item of Do arrived (MaxDelay's "items are
	// coming"); guarded by mu. Lazy items do not count: they ride anyway.
	lastDo time.Time

	// testHookQueued, when set before use, runs after an item is queued.
	testHookQueued func()
	// clock, when set before use, replaces time.Now for lastDo.
	clock func() time.Time
}

// Call states: the committer and an abandoning caller race for a queued
// call with a compare-and-swap, so an item is either committed or dropped.
const (
	stateQueued int32 = iota
	stateTaken
	stateAbandoned
)

type call[Req, Res any] struct {
	req      Req
	queuedAt time.Time
	// patience is how long the item may wait, once queued, for the commit
	// that takes it: MaxDelay, or DoLazy's within.
	patience time.Duration
	state    atomic.Int32
	res      Res
	err      error
	done     chan struct{}
}

// New starts a Batcher that commits with fn. Close it to stop its
// committer goroutine.
func New[Req, Res any](fn func(context.Context, []Req) ([]Res, error), opts Options) *Batcher[Req, Res] {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.Committers <= 0 {
		opts.Committers = 1
	}
	b := &Batcher[Req, Res]{
		fn:     fn,
		opts:   opts,
		wake:   make(chan struct{}, 1),
		exited: make(chan struct{}),
	}
	go b.run()
	return b
}

// Do queues req for the next commit and waits for its result. It returns
// the commit function's error for the whole batch if there was one,
// ErrClosed after Close, and ctx.Err() if ctx ends first, in which case the
// item may or may not have been committed (see the package documentation).
func (b *Batcher[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	return b.do(ctx, req, -1)
}

// DoLazy is Do for an item whose caller can wait: it may stay queued for up
// to within (or MaxDelay, if longer) so that it rides in a commit another
// item triggers instead of costing one of its own. An item queued with Do
// (and no MaxDelay) still commits at once, taking the lazy ones with it.
func (b *Batcher[Req, Res]) DoLazy(ctx context.Context, req Req, within time.Duration) (Res, error) {
	return b.do(ctx, req, max(within, b.opts.MaxDelay))
}

// do queues req with the given patience; a negative one marks an item of
// Do, whose patience is MaxDelay while items are coming and zero otherwise.
func (b *Batcher[Req, Res]) do(ctx context.Context, req Req, patience time.Duration) (Res, error) {
	var zero Res
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	c := &call[Req, Res]{req: req, queuedAt: time.Now(), patience: patience, done: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return zero, ErrClosed
	}
	if patience < 0 {
		c.patience = b.eagerPatience()
	}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	b.signal()
	if b.testHookQueued != nil {
		b.testHookQueued()
	}

	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		// Drop the item if the committer has not taken it yet; otherwise
		// it is being committed and the outcome is unknown to this caller.
		c.state.CompareAndSwap(stateQueued, stateAbandoned)
		return zero, ctx.Err()
	}
}

// eagerPatience is how long an item of Do may wait for company: MaxDelay
// if the previous item of Do arrived less than MaxDelay before this one,
// zero otherwise. b.mu must be held.
func (b *Batcher[Req, Res]) eagerPatience() time.Duration {
	now := time.Now
	if b.clock != nil {
		now = b.clock
	}
	t := now()
	coming := !b.lastDo.IsZero() && t.Sub(b.lastDo) < b.opts.MaxDelay
	b.lastDo = t
	if coming {
		return b.opts.MaxDelay
	}
	return 0
}

// Close refuses new work with ErrClosed, waits until every item already
// queued is committed, and stops the committer. It is safe to call more
// than once and concurrently with Do.
func (b *Batcher[Req, Res]) Close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.signal()
	<-b.exited
}

// signal wakes the committer; a wake-up already pending is enough.
func (b *Batcher[Req, Res]) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// slot is what one commit in flight owns: its batch and the requests
// handed to the commit function, reused from one batch to the next.
type slot[Req, Res any] struct {
	batch []*call[Req, Res]
	reqs  []Req
}

// run collects batches until closed with an empty queue, and commits each
// in a free slot: inline with one committer, in its own goroutine with
// more, so that the next batch is collected while it commits.
func (b *Batcher[Req, Res]) run() {
	defer close(b.exited)
	n := b.opts.Committers
	free := make(chan *slot[Req, Res], n)
	for range n {
		free <- &slot[Req, Res]{
			batch: make([]*call[Req, Res], 0, b.opts.MaxBatch),
			reqs:  make([]Req, 0, b.opts.MaxBatch),
		}
	}
	// One timer serves every batch's wait: at a steady rate nearly every
	// batch waits, and a timer made per batch was an allocation each.
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		// Wait for a free slot before taking anything: while every
		// committer is busy, items queue and the next batch takes them all.
		s := <-free
		var done bool
		s.batch, done = b.collect(s.batch[:0], timer)
		if done {
			for range n - 1 { // the commits still in flight
				<-free
			}
			return
		}
		if n == 1 {
			b.commitSlot(s)
			free <- s
			continue
		}
		go func() {
			b.commitSlot(s)
			free <- s
		}()
	}
}

// commitSlot commits the batch of s and empties it, so that it pins no
// committed item until its next batch.
func (b *Batcher[Req, Res]) commitSlot(s *slot[Req, Res]) {
	s.reqs = s.reqs[:0]
	for _, c := range s.batch {
		s.reqs = append(s.reqs, c.req)
	}
	b.commit(s.batch, s.reqs)
	clear(s.reqs)
	clear(s.batch)
	s.reqs, s.batch = s.reqs[:0], s.batch[:0]
}

// collect waits for a first item and takes everything queued (up to
// MaxBatch); it then waits for more while every item in the batch may
// still wait (its patience: MaxDelay, or DoLazy's within), until one's
// runs out, the batch is full, or the batcher closes. done reports that
// the batcher is closed and drained.
func (b *Batcher[Req, Res]) collect(batch []*call[Req, Res], timer *time.Timer) (_ []*call[Req, Res], done bool) {
	for {
		var closed bool
		batch, closed = b.take(batch)
		if len(batch) > 0 {
			break
		}
		if closed {
			return batch, true
		}
		<-b.wake
	}
	defer timer.Stop() // since Go 1.23 a stopped timer's channel holds nothing stale
	for len(batch) < b.opts.MaxBatch {
		wait := time.Until(deadline(batch))
		if wait <= 0 {
			return batch, false
		}
		timer.Reset(wait)
		select {
		case <-b.wake:
			var closed bool
			if batch, closed = b.take(batch); closed {
				return batch, false // commit now; the rest follows
			}
		case <-timer.C:
			return batch, false
		}
	}
	return batch, false
}

// deadline is when the least patient item of batch stops waiting.
func deadline[Req, Res any](batch []*call[Req, Res]) time.Time {
	d := batch[0].queuedAt.Add(batch[0].patience)
	for _, c := range batch[1:] {
		if t := c.queuedAt.Add(c.patience); t.Before(d) {
			d = t
		}
	}
	return d
}

// take moves queued items into batch, up to MaxBatch, skipping those whose
// callers gave up, and reports whether the batcher is closed.
func (b *Batcher[Req, Res]) take(batch []*call[Req, Res]) ([]*call[Req, Res], bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for n < len(b.queue) && len(batch) < b.opts.MaxBatch {
		c := b.queue[n]
		n++
		if c.state.CompareAndSwap(stateQueued, stateTaken) {
			batch = append(batch, c)
		}
	}
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	return batch, b.closed
}

// commit runs fn once and completes every call of the batch.
func (b *Batcher[Req, Res]) commit(batch []*call[Req, Res], reqs []Req) {
	res, err := b.call(reqs)
	if err == nil && len(res) != len(reqs) {
		err = fmt.Errorf("groupcommit: commit returned %d results for %d requests", len(res), len(reqs))
	}
	for i, c := range batch {
		if err != nil {
			c.err = err
		} else {
			c.res = res[i]
		}
		close(c.done)
	}
}

// call invokes fn, turning a panic into a batch error so that the callers
// of the batch get an answer and the committer keeps serving.
func (b *Batcher[Req, Res]) call(reqs []Req) (res []Res, err error) {
	ctx := context.Background()
	if b.opts.CommitTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.opts.CommitTimeout)
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("groupcommit: commit panicked: %v", r)
		}
	}()
	res, err = b.fn(ctx, reqs)
	if err != nil {
		err = fmt.Errorf("groupcommit: commit of %d items: %w", len(reqs), err)
	}
	return res, err
}
