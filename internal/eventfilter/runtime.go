package eventfilter

import (
	"sync"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// Run-time bounds. The compile-time estimate refuses what is expensive by
// construction; these stop what the estimate could not foresee (its model
// of a function is wrong, or time is lost elsewhere), in the evaluation
// itself rather than between evaluations:
//
//   - cost: every function call is charged 1, plus what it builds: a
//     byte per byte of a string or bytes result, a unit per element of a
//     list or map result. What an evaluation may allocate is bounded by
//     the same count (RuntimeCostLimit bytes at most).
//   - time: the evaluation is abandoned once its deadline passes, checked
//     every checkEvery calls, so that one evaluation of a loop, however
//     cheap its steps, stops within its time budget.
//
// cel-go's own run-time tracking (cel.CostLimit) is not used: in v0.29.2
// its bookkeeping scans a stack that grows with every iteration of a
// comprehension, so that its time grows with the square of the
// iterations (BenchmarkCostTracking). This tracker keeps two counters.
const (
	// RuntimeCostLimit bounds one evaluation's run-time cost: the
	// estimate's limit, so that an expression the estimate accepts is
	// stopped at run time only when the estimate was wrong.
	RuntimeCostLimit = EstimatedCostLimit
	// DefaultEvalTimeout bounds one evaluation's time: a filter like
	// data.amount > 1000 takes about a microsecond, one comprehension over
	// the largest list data can hold (100,000 elements) some 40 ms.
	DefaultEvalTimeout = 100 * time.Millisecond
	// checkEvery is how many calls pass between two reads of the clock.
	checkEvery = 64
)

// trackerVar is the name under which an evaluation's activation holds its
// tracker: not a CEL identifier, so no expression can name it.
const trackerVar = "#tracker"

// tracker is one evaluation's run-time account.
type tracker struct {
	cost     uint64
	calls    uint64
	deadline time.Time
	now      func() time.Time
	// stopped is why the evaluation was abandoned, "" while it runs.
	stopped string
}

var trackers = sync.Pool{New: func() any { return new(tracker) }}

// charge adds what a call that returned v cost, and abandons the
// evaluation (a panic cel-go's Eval recovers into its error) when a bound
// is passed.
func (t *tracker) charge(v ref.Val) {
	t.cost += 1 + built(v)
	if t.cost > RuntimeCostLimit {
		t.stopped = ReasonCost
		panic(interpreter.EvalCancelledError{Cause: interpreter.CostLimitExceeded,
			Message: "operation cancelled: the filter's run-time cost limit was exceeded"})
	}
	t.calls++
	if t.calls%checkEvery == 0 && t.now().After(t.deadline) {
		t.stopped = ReasonTimeout
		panic(interpreter.EvalCancelledError{Cause: interpreter.ContextCancelled,
			Message: "operation cancelled: the filter's time budget was exceeded"})
	}
}

// built is what producing v allocated, in cost units. A list that a
// comprehension accumulates (a mutable list) grows by one element a step:
// charged 1, not its whole length again.
func built(v ref.Val) uint64 {
	switch v := v.(type) {
	case types.String:
		return uint64(len(v))
	case types.Bytes:
		return uint64(len(v))
	case traits.MutableLister:
		return 1
	case traits.Lister:
		return sizeOf(v)
	case traits.Mapper:
		return sizeOf(v)
	}
	return 0
}

func sizeOf(s traits.Sizer) uint64 {
	if n, ok := s.Size().(types.Int); ok && n > 0 {
		return uint64(n)
	}
	return 0
}

// trackCalls is the decorator that charges every function call to the
// evaluation's tracker. Only calls are wrapped: attributes, constants
// and constructors keep their types, which the planner and its
// optimisations look for.
func trackCalls(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	if call, ok := i.(interpreter.InterpretableCall); ok {
		return &trackedCall{InterpretableCall: call}, nil
	}
	return i, nil
}

// trackedCall is a call charged to its evaluation's tracker.
type trackedCall struct {
	interpreter.InterpretableCall
}

// Exec implements interpreter.InterpretableV2.
func (c *trackedCall) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	v := c.InterpretableCall.Exec(frame)
	// An evaluation without a tracker is the planner folding constants.
	if t, ok := frame.ResolveName(trackerVar); ok {
		t.(*tracker).charge(v)
	}
	return v
}

// Eval implements interpreter.Interpretable.
func (c *trackedCall) Eval(vars interpreter.Activation) ref.Val {
	return c.Exec(interpreter.AsFrame(vars))
}

// evalVars is an Event as the activation of one evaluation: its variables
// and the evaluation's tracker.
type evalVars struct {
	ev *Event
	t  *tracker
}

// ResolveName implements interpreter.Activation.
func (v *evalVars) ResolveName(name string) (any, bool) {
	if name == trackerVar {
		return v.t, true
	}
	return (*vars)(v.ev).ResolveName(name)
}

// Parent implements interpreter.Activation.
func (*evalVars) Parent() interpreter.Activation { return nil }
