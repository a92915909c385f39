package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gate is a commit function that reports each batch and then blocks until
// the test releases it, so tests decide what queues during a commit.
type gate struct {
	batches chan []int
	release chan error
}

func newGate() *gate {
	return &gate{batches: make(chan []int, 100), release: make(chan error)}
}

func (g *gate) fn(_ context.Context, reqs []int) ([]string, error) {
	g.batches <- slices.Clone(reqs)
	if err := <-g.release; err != nil {
		return nil, err
	}
	res := make([]string, len(reqs))
	for i, r := range reqs {
		res[i] = fmt.Sprint("r", r)
	}
	return res, nil
}

// newGated returns a batcher over g whose queued items are announced on
// the returned channel.
func newGated(t *testing.T, g *gate, opts Options) (*Batcher[int, string], chan struct{}) {
	t.Helper()
	b := New(g.fn, opts)
	queued := make(chan struct{}, 1000)
	b.testHookQueued = func() { queued <- struct{}{} }
	t.Cleanup(func() {
		close(g.release) // unblock any commit still waiting
		b.Close()
	})
	return b, queued
}

func (b *Batcher[Req, Res]) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

type outcome struct {
	req int
	res string
	err error
}

// submit runs Do(ctx, req) in a goroutine and reports on out.
func submit(ctx context.Context, b *Batcher[int, string], req int, out chan<- outcome) {
	go func() {
		res, err := b.Do(ctx, req)
		out <- outcome{req, res, err}
	}()
}

func TestDoIdleCommitsAtOnce(t *testing.T) {
	var calls atomic.Int32
	b := New(func(_ context.Context, reqs []int) ([]int, error) {
		calls.Add(1)
		out := make([]int, len(reqs))
		for i, r := range reqs {
			out[i] = r * 2
		}
		return out, nil
	}, Options{MaxDelay: 0})
	defer b.Close()
	for i := range 5 {
		got, err := b.Do(context.Background(), i)
		if err != nil || got != i*2 {
			t.Fatalf("Do(%d) = %d, %v; want %d, nil", i, got, err, i*2)
		}
	}
	if n := calls.Load(); n != 5 {
		t.Errorf("sequential calls made %d commits, want 5 (one each, no waiting)", n)
	}
}

func TestBatchesWhatQueuedDuringCommitInOrder(t *testing.T) {
	g := newGate()
	b, queued := newGated(t, g, Options{MaxBatch: 16})
	out := make(chan outcome, 16)

	submit(context.Background(), b, 0, out)
	<-queued
	if got := <-g.batches; !slices.Equal(got, []int{0}) {
		t.Fatalf("first batch = %v, want [0]", got)
	}
	// The committer is busy with [0]: queue 1..10 one after the other.
	for i := 1; i <= 10; i++ {
		submit(context.Background(), b, i, out)
		<-queued
	}
	g.release <- nil
	want := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if got := <-g.batches; !slices.Equal(got, want) {
		t.Fatalf("second batch = %v, want %v (everything queued meanwhile, in order)", got, want)
	}
	g.release <- nil
	for range 11 {
		o := <-out
		if o.err != nil || o.res != fmt.Sprint("r", o.req) {
			t.Errorf("Do(%d) = %q, %v; want its own result", o.req, o.res, o.err)
		}
	}
}

func TestMaxBatchCapsBatches(t *testing.T) {
	g := newGate()
	b, queued := newGated(t, g, Options{MaxBatch: 4})
	out := make(chan outcome, 16)

	submit(context.Background(), b, 0, out)
	<-queued
	<-g.batches
	for i := 1; i <= 10; i++ {
		submit(context.Background(), b, i, out)
		<-queued
	}
	for _, want := range [][]int{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10}} {
		g.release <- nil
		if got := <-g.batches; !slices.Equal(got, want) {
			t.Fatalf("batch = %v, want %v", got, want)
		}
	}
	g.release <- nil
	for range 11 {
		if o := <-out; o.err != nil || o.res != fmt.Sprint("r", o.req) {
			t.Errorf("Do(%d) = %q, %v", o.req, o.res, o.err)
		}
	}
}

// TestDoHonoursContextWhileCloseWaits: with a commit stuck and Close
// waiting for it, a new caller is refused at once and a queued caller can
// still give up.
func TestDoHonoursContextWhileCloseWaits(t *testing.T) {
	g := newGate()
	b, queued := newGated(t, g, Options{})
	out := make(chan outcome, 4)
	submit(context.Background(), b, 0, out)
	<-queued
	<-g.batches // stuck until released
	ctx, cancel := context.WithCancel(context.Background())
	submit(ctx, b, 1, out)
	<-queued
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()

	cancel()
	if o := <-out; o.req != 1 || !errors.Is(o.err, context.Canceled) {
		t.Fatalf("queued caller = %+v, want context.Canceled", o)
	}
	for !b.isClosed() { // Close marks it at once, before it waits
		runtime.Gosched()
	}
	if _, err := b.Do(context.Background(), 2); !errors.Is(err, ErrClosed) {
		t.Errorf("Do while Close waits = %v, want ErrClosed at once", err)
	}
	g.release <- nil // [0]
	<-closed
	if o := <-out; o.req != 0 || o.err != nil {
		t.Errorf("Do(0) = %+v", o)
	}
}

func TestBatchErrorFansOut(t *testing.T) {
	g := newGate()
	b, queued := newGated(t, g, Options{})
	out := make(chan outcome, 8)

	submit(context.Background(), b, 0, out)
	<-queued
	<-g.batches
	for i := 1; i <= 3; i++ {
		submit(context.Background(), b, i, out)
		<-queued
	}
	g.release <- nil // [0] succeeds
	if o := <-out; o.err != nil {
		t.Fatalf("Do(0): %v", o.err)
	}
	<-g.batches
	boom := errors.New("disk full")
	g.release <- boom // [1 2 3] fails as a whole
	for range 3 {
		o := <-out
		if !errors.Is(o.err, boom) || o.res != "" {
			t.Errorf("Do(%d) = %q, %v; want the batch error", o.req, o.res, o.err)
		}
	}
	// The committer carries on.
	submit(context.Background(), b, 4, out)
	<-g.batches
	g.release <- nil
	if o := <-out; o.err != nil || o.res != "r4" {
		t.Errorf("after a failed batch: Do(4) = %q, %v", o.res, o.err)
	}
}

func TestMisbehavingCommitFunction(t *testing.T) {
	tests := []struct {
		name string
		fn   func(context.Context, []int) ([]int, error)
		want string
	}{
		{"too few results", func(context.Context, []int) ([]int, error) { return nil, nil }, "returned 0 results for 1 requests"},
		{"panic", func(context.Context, []int) ([]int, error) { panic("bug") }, "commit panicked: bug"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(tt.fn, Options{})
			defer b.Close()
			for range 2 { // the committer survives
				if _, err := b.Do(context.Background(), 1); err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Do = %v, want an error containing %q", err, tt.want)
				}
			}
		})
	}
}

func TestCloseDrainsThenRefuses(t *testing.T) {
	g := newGate()
	b, queued := newGated(t, g, Options{})
	out := make(chan outcome, 8)

	submit(context.Background(), b, 0, out)
	<-queued
	<-g.batches
	for i := 1; i <= 3; i++ {
		submit(context.Background(), b, i, out)
		<-queued
	}
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()

	select {
	case <-closed:
		t.Fatal("Close returned while a commit was running")
	default:
	}
	g.release <- nil // [0]
	if got := <-g.batches; !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("drained batch = %v, want [1 2 3]", got)
	}
	g.release <- nil
	<-closed
	for range 4 {
		if o := <-out; o.err != nil || o.res != fmt.Sprint("r", o.req) {
			t.Errorf("queued before Close: Do(%d) = %q, %v; want committed", o.req, o.res, o.err)
		}
	}
	if _, err := b.Do(context.Background(), 9); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close = %v, want ErrClosed", err)
	}
	b.Close() // idempotent
}

func TestCloseConcurrentWithDo(t *testing.T) {
	var committed atomic.Int64
	b := New(func(_ context.Context, reqs []int) ([]int, error) {
		committed.Add(int64(len(reqs)))
		return reqs, nil
	}, Options{MaxBatch: 8})
	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	for i := range 200 {
		wg.Go(func() {
			got, err := b.Do(context.Background(), i)
			switch {
			case err == nil && got == i:
				ok.Add(1)
			case errors.Is(err, ErrClosed):
				refused.Add(1)
			default:
				t.Errorf("Do(%d) = %d, %v", i, got, err)
			}
		})
	}
	b.Close()
	wg.Wait()
	if ok.Load()+refused.Load() != 200 || committed.Load() != ok.Load() {
		t.Errorf("ok %d + refused %d, committed %d: every call must be answered, and only answered ones committed",
			ok.Load(), refused.Load(), committed.Load())
	}
}

func TestCancelWhileQueuedDropsTheItem(t *testing.T) {
	g := newGate()
	b, queued := newGated(t, g, Options{})
	out := make(chan outcome, 8)

	submit(context.Background(), b, 0, out)
	<-queued
	<-g.batches
	ctx, cancel := context.WithCancel(context.Background())
	submit(ctx, b, 1, out)
	<-queued
	cancel()
	if o := <-out; o.req != 1 || !errors.Is(o.err, context.Canceled) {
		t.Fatalf("cancelled Do = %+v, want context.Canceled", o)
	}
	g.release <- nil
	<-out
	submit(context.Background(), b, 2, out)
	if got := <-g.batches; !slices.Equal(got, []int{2}) {
		t.Fatalf("next batch = %v, want [2]: an item abandoned before it was taken is not committed", got)
	}
	g.release <- nil
	<-out
}

func TestCancelDuringCommitIsAmbiguous(t *testing.T) {
	g := newGate()
	b, queued := newGated(t, g, Options{})
	out := make(chan outcome, 1)

	ctx, cancel := context.WithCancel(context.Background())
	submit(ctx, b, 7, out)
	<-queued
	<-g.batches // taken: the commit is running
	cancel()
	if o := <-out; !errors.Is(o.err, context.Canceled) {
		t.Fatalf("Do = %+v, want context.Canceled without waiting for the commit", o)
	}
	g.release <- nil // ...and the item is committed all the same
}

func TestDoWithEndedContextQueuesNothing(t *testing.T) {
	b := New(func(context.Context, []int) ([]int, error) {
		t.Error("commit called")
		return nil, nil
	}, Options{})
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Do(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v, want context.Canceled", err)
	}
}

// fakeClock is the arrival clock of a batcher under test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) read() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// nextBatch returns the next batch g is asked to commit, failing the test
// if none comes in a time far beyond anything the batcher waits for here.
func nextBatch(t *testing.T, g *gate) []int {
	t.Helper()
	select {
	case got := <-g.batches:
		return got
	case <-time.After(time.Minute):
		t.Fatal("no commit: the batcher is waiting for more items")
		return nil
	}
}

func TestMaxDelayWaitsForMoreOnlyWhileItemsAreComing(t *testing.T) {
	g := newGate()
	// MaxDelay is far longer than the test: a batch that waits is
	// committed because it is full, not because the delay ran out.
	b, queued := newGated(t, g, Options{MaxBatch: 3, MaxDelay: time.Hour})
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	b.clock = clock.read
	out := make(chan outcome, 5)
	commitAlone := func(req int) {
		t.Helper()
		submit(context.Background(), b, req, out)
		<-queued
		if got := nextBatch(t, g); !slices.Equal(got, []int{req}) {
			t.Fatalf("batch = %v, want %d committed at once, alone", got, req)
		}
		g.release <- nil
		if o := <-out; o.err != nil {
			t.Fatal(o.err)
		}
	}

	commitAlone(0) // the first item: nothing is coming
	clock.advance(2 * time.Hour)
	commitAlone(1) // after a quiet spell longer than MaxDelay

	// Items less than MaxDelay apart wait for each other.
	for i := 2; i < 5; i++ {
		clock.advance(time.Second)
		submit(context.Background(), b, i, out)
		<-queued
	}
	if got := nextBatch(t, g); !slices.Equal(got, []int{2, 3, 4}) {
		t.Fatalf("batch = %v, want [2 3 4]: items a second apart share a commit", got)
	}
	g.release <- nil
	for range 3 {
		if o := <-out; o.err != nil {
			t.Error(o.err)
		}
	}
}

func TestLazyItemsDoNotMakeAnEagerOneWait(t *testing.T) {
	g := newGate()
	b, queued := newGated(t, g, Options{MaxBatch: 10, MaxDelay: time.Hour})
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	b.clock = clock.read
	out := make(chan outcome, 2)
	go func() {
		res, err := b.DoLazy(context.Background(), 1, time.Hour)
		out <- outcome{1, res, err}
	}()
	<-queued
	clock.advance(time.Second)
	submit(context.Background(), b, 2, out)
	<-queued
	if got := nextBatch(t, g); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("batch = %v, want the lazy item riding with the eager one", got)
	}
	g.release <- nil
	for range 2 {
		if o := <-out; o.err != nil {
			t.Error(o.err)
		}
	}
}

func TestMaxDelayExpires(t *testing.T) {
	b := New(func(_ context.Context, reqs []int) ([]int, error) { return reqs, nil },
		Options{MaxBatch: 100, MaxDelay: time.Millisecond})
	defer b.Close()
	if got, err := b.Do(context.Background(), 3); err != nil || got != 3 {
		t.Errorf("Do = %d, %v", got, err)
	}
}

func TestCommitTimeout(t *testing.T) {
	b := New(func(ctx context.Context, reqs []int) ([]int, error) {
		if _, ok := ctx.Deadline(); !ok {
			return nil, errors.New("no deadline")
		}
		return reqs, nil
	}, Options{CommitTimeout: time.Minute})
	defer b.Close()
	if _, err := b.Do(context.Background(), 1); err != nil {
		t.Error(err)
	}
}

func TestConcurrentCallersGetTheirOwnResults(t *testing.T) {
	var maxBatch atomic.Int64
	b := New(func(_ context.Context, reqs []int) ([]int, error) {
		if n := int64(len(reqs)); n > maxBatch.Load() {
			maxBatch.Store(n) // only the committer writes
		}
		out := make([]int, len(reqs))
		for i, r := range reqs {
			out[i] = -r
		}
		return out, nil
	}, Options{MaxBatch: 32})
	defer b.Close()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				req := g*1000 + i
				if got, err := b.Do(context.Background(), req); err != nil || got != -req {
					t.Errorf("Do(%d) = %d, %v", req, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if maxBatch.Load() > 32 {
		t.Errorf("a batch had %d items, more than MaxBatch", maxBatch.Load())
	}
}

// BenchmarkDo measures throughput against a commit that costs about as much
// as a small fsync, and reports the batch size that load produced.
func BenchmarkDo(b *testing.B) {
	for _, cost := range []time.Duration{0, 100 * time.Microsecond} {
		b.Run(fmt.Sprint("commit=", cost), func(b *testing.B) {
			var items, commits atomic.Int64
			bt := New(func(_ context.Context, reqs []int) ([]int, error) {
				commits.Add(1)
				items.Add(int64(len(reqs)))
				if cost > 0 {
					time.Sleep(cost)
				}
				return reqs, nil
			}, Options{})
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := bt.Do(context.Background(), 1); err != nil {
						b.Error(err)
					}
				}
			})
			bt.Close()
			if c := commits.Load(); c > 0 {
				b.ReportMetric(float64(items.Load())/float64(c), "items/commit")
			}
		})
	}
}

// TestLazyItemRidesWithTheNextEagerOne: a lazy item whose bound is far
// longer than the test waits queued until an eager item arrives, and both
// go in one commit, lazy first.
func TestLazyItemRidesWithTheNextEagerOne(t *testing.T) {
	g := newGate()
	b, queued := newGated(t, g, Options{})
	out := make(chan outcome, 2)
	go func() {
		res, err := b.DoLazy(context.Background(), 1, time.Hour)
		out <- outcome{1, res, err}
	}()
	<-queued
	select {
	case got := <-g.batches:
		t.Fatalf("lazy item committed alone: %v", got)
	default:
	}
	submit(context.Background(), b, 2, out)
	<-queued
	if got := <-g.batches; !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("batch = %v, want [1 2]", got)
	}
	g.release <- nil
	for range 2 {
		if o := <-out; o.err != nil || o.res != fmt.Sprint("r", o.req) {
			t.Errorf("item %d: %q, %v", o.req, o.res, o.err)
		}
	}
}

// TestLazyItemAloneCommitsAfterItsBound: with nothing else coming, a lazy
// item is committed once its bound passed.
func TestLazyItemAloneCommitsAfterItsBound(t *testing.T) {
	var commits atomic.Int32
	b := New(func(_ context.Context, reqs []int) ([]int, error) { commits.Add(1); return reqs, nil }, Options{})
	defer b.Close()
	start := time.Now()
	if got, err := b.DoLazy(context.Background(), 3, 20*time.Millisecond); err != nil || got != 3 {
		t.Fatalf("DoLazy = %d, %v", got, err)
	}
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Errorf("committed after %s, before its 20ms bound", waited)
	}
	if n := commits.Load(); n != 1 {
		t.Errorf("%d commits, want 1", n)
	}
}

// TestCloseCommitsLazyItemsAtOnce: closing does not wait out a lazy
// item's bound.
func TestCloseCommitsLazyItemsAtOnce(t *testing.T) {
	g := newGate()
	b, queued := newGated(t, g, Options{})
	out := make(chan outcome, 1)
	go func() {
		res, err := b.DoLazy(context.Background(), 1, time.Hour)
		out <- outcome{1, res, err}
	}()
	<-queued
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	if got := <-g.batches; !slices.Equal(got, []int{1}) {
		t.Fatalf("batch = %v, want [1]", got)
	}
	g.release <- nil
	if o := <-out; o.err != nil {
		t.Fatal(o.err)
	}
	<-closed
}

// heldBatch is one commit of a slotGate: its items, and the channel that
// ends it.
type heldBatch struct {
	reqs    []int
	release chan error
}

// slotGate is a gate whose commits the test releases one by one, in any
// order, so that tests of Committers decide which commit ends first.
type slotGate struct {
	batches  chan heldBatch
	inFlight atomic.Int32
	peak     atomic.Int32
}

func newSlotGate() *slotGate { return &slotGate{batches: make(chan heldBatch, 100)} }

func (g *slotGate) fn(_ context.Context, reqs []int) ([]string, error) {
	n := g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	h := heldBatch{reqs: slices.Clone(reqs), release: make(chan error)}
	g.batches <- h
	if err := <-h.release; err != nil {
		return nil, err
	}
	res := make([]string, len(reqs))
	for i, r := range reqs {
		res[i] = fmt.Sprint("r", r)
	}
	return res, nil
}

// next is the next batch to reach the commit function.
func (g *slotGate) next(t *testing.T) heldBatch {
	t.Helper()
	select {
	case h := <-g.batches:
		return h
	case <-time.After(10 * time.Second):
		t.Fatal("no batch reached the commit function")
		return heldBatch{}
	}
}

// newSlotGated returns a batcher over g whose queued items are announced
// on the returned channel; its cleanup closes it once the test released
// every commit.
func newSlotGated(t *testing.T, g *slotGate, opts Options) (*Batcher[int, string], chan struct{}) {
	t.Helper()
	b := New(g.fn, opts)
	queued := make(chan struct{}, 1000)
	b.testHookQueued = func() { queued <- struct{}{} }
	t.Cleanup(b.Close)
	return b, queued
}

func wantOwnResult(t *testing.T, o outcome) {
	t.Helper()
	if o.err != nil || o.res != fmt.Sprint("r", o.req) {
		t.Errorf("Do(%d) = %q, %v; want its own result", o.req, o.res, o.err)
	}
}

// With two committers an item that queues while a commit runs is taken
// into a commit of its own at once, and the two answer in whichever order
// they end.
func TestCommittersOverlapCommits(t *testing.T) {
	g := newSlotGate()
	b, queued := newSlotGated(t, g, Options{Committers: 2})
	out := make(chan outcome, 8)

	submit(context.Background(), b, 0, out)
	<-queued
	first := g.next(t)
	submit(context.Background(), b, 1, out)
	<-queued
	second := g.next(t) // reached while [0] still commits
	if !slices.Equal(first.reqs, []int{0}) || !slices.Equal(second.reqs, []int{1}) {
		t.Fatalf("batches = %v, %v; want [0], [1]", first.reqs, second.reqs)
	}
	second.release <- nil
	if o := <-out; o.req != 1 {
		t.Fatalf("first answer is for %d, want 1 (its commit ended first)", o.req)
	} else {
		wantOwnResult(t, o)
	}
	first.release <- nil
	wantOwnResult(t, <-out)
	if p := g.peak.Load(); p != 2 {
		t.Errorf("peak commits in flight = %d, want 2", p)
	}
}

// While every committer is busy items queue, and the first committer free
// takes them all (up to MaxBatch) in order.
func TestCommittersBusyQueueInOrderUpToMaxBatch(t *testing.T) {
	g := newSlotGate()
	b, queued := newSlotGated(t, g, Options{Committers: 2, MaxBatch: 4})
	out := make(chan outcome, 16)

	var held []heldBatch
	for i := range 2 {
		submit(context.Background(), b, i, out)
		<-queued
		held = append(held, g.next(t))
	}
	for i := 2; i <= 7; i++ {
		submit(context.Background(), b, i, out)
		<-queued
	}
	held[1].release <- nil
	next := g.next(t)
	if !slices.Equal(next.reqs, []int{2, 3, 4, 5}) {
		t.Fatalf("batch after a commit ended = %v, want [2 3 4 5]", next.reqs)
	}
	held[0].release <- nil
	last := g.next(t)
	if !slices.Equal(last.reqs, []int{6, 7}) {
		t.Fatalf("batch after the other commit ended = %v, want [6 7]", last.reqs)
	}
	if p := g.peak.Load(); p > 2 {
		t.Errorf("peak commits in flight = %d, want at most Committers (2)", p)
	}
	last.release <- nil
	next.release <- nil
	for range 8 {
		wantOwnResult(t, <-out)
	}
}

// An item whose caller gives up while every committer is busy is dropped.
func TestCommittersCancelWhileQueuedDropsTheItem(t *testing.T) {
	g := newSlotGate()
	b, queued := newSlotGated(t, g, Options{Committers: 2})
	out := make(chan outcome, 8)

	var held []heldBatch
	for i := range 2 {
		submit(context.Background(), b, i, out)
		<-queued
		held = append(held, g.next(t))
	}
	ctx, cancel := context.WithCancel(context.Background())
	submit(ctx, b, 2, out)
	<-queued
	submit(context.Background(), b, 3, out)
	<-queued
	cancel()
	if o := <-out; o.req != 2 || !errors.Is(o.err, context.Canceled) {
		t.Fatalf("cancelled Do = %+v, want context.Canceled", o)
	}
	held[0].release <- nil
	next := g.next(t)
	if !slices.Equal(next.reqs, []int{3}) {
		t.Fatalf("next batch = %v, want [3]: an item abandoned before it was taken is not committed", next.reqs)
	}
	held[1].release <- nil
	next.release <- nil
	for range 3 {
		wantOwnResult(t, <-out)
	}
}

// Close waits for every commit in flight and for the items queued behind
// them, then refuses.
func TestCommittersCloseWaitsForCommitsInFlight(t *testing.T) {
	g := newSlotGate()
	b, queued := newSlotGated(t, g, Options{Committers: 3})
	out := make(chan outcome, 8)

	var held []heldBatch
	for i := range 3 {
		submit(context.Background(), b, i, out)
		<-queued
		held = append(held, g.next(t))
	}
	submit(context.Background(), b, 3, out)
	<-queued
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	for !b.isClosed() {
		runtime.Gosched()
	}
	if _, err := b.Do(context.Background(), 9); !errors.Is(err, ErrClosed) {
		t.Errorf("Do during Close = %v, want ErrClosed", err)
	}
	held[2].release <- nil
	drained := g.next(t)
	if !slices.Equal(drained.reqs, []int{3}) {
		t.Fatalf("drained batch = %v, want [3]", drained.reqs)
	}
	drained.release <- nil
	held[0].release <- nil
	for range 3 {
		wantOwnResult(t, <-out)
	}
	select {
	case <-closed:
		t.Fatal("Close returned while a commit was still in flight")
	default:
	}
	held[1].release <- nil
	<-closed
	wantOwnResult(t, <-out)
}

// Under concurrent load with several committers every item is committed
// exactly once, its caller gets its own result, no batch exceeds MaxBatch
// and no more than Committers commits run at once.
func TestCommittersConcurrentCallersEachCommittedOnce(t *testing.T) {
	const committers, maxBatch = 3, 8
	var (
		mu        sync.Mutex
		seen      = map[int]int{}
		inFlight  atomic.Int32
		peak      atomic.Int32
		overBatch atomic.Bool
	)
	b := New(func(_ context.Context, reqs []int) ([]int, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if len(reqs) > maxBatch {
			overBatch.Store(true)
		}
		mu.Lock()
		for _, r := range reqs {
			seen[r]++
		}
		mu.Unlock()
		runtime.Gosched() // let other commits start meanwhile
		out := make([]int, len(reqs))
		for i, r := range reqs {
			out[i] = -r
		}
		return out, nil
	}, Options{MaxBatch: maxBatch, Committers: committers})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				req := g*1000 + i
				if got, err := b.Do(context.Background(), req); err != nil || got != -req {
					t.Errorf("Do(%d) = %d, %v", req, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.Close()
	if len(seen) != 16*200 {
		t.Errorf("%d items committed, want %d", len(seen), 16*200)
	}
	for r, n := range seen {
		if n != 1 {
			t.Errorf("item %d committed %d times", r, n)
		}
	}
	if p := peak.Load(); p > committers {
		t.Errorf("peak commits in flight = %d, want at most %d", p, committers)
	}
	if overBatch.Load() {
		t.Errorf("a batch exceeded MaxBatch %d", maxBatch)
	}
}
