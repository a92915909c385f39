// Package eventfilter compiles and evaluates an endpoint's filter: a CEL
// expression over one event that says whether the endpoint wants it, e.g.
// data.amount > 1000 && data.currency == "EUR". CEL because it is what
// Kubernetes admins already write in CRD validation rules and admission
// policies; the environment is the part of Kubernetes' that cel-go itself
// provides (strings, sets, lists and two-variable comprehension
// extensions, optional types, cross-type numeric comparisons), with
// Kubernetes' cost limits.
//
// An expression sees three variables:
//
//	type                string  the event's type
//	publisherNamespace  string  the namespace it was published in
//	                            ("namespace" is a word CEL reserves)
//	data                dyn     its data: a JSON object as CEL maps, lists,
//	                            strings, bools, null, int (a JSON integer
//	                            that fits in 64 bits, written without
//	                            fraction or exponent) or double (any
//	                            other number)
//
// Cost is bounded before any event is seen: Compile refuses an expression
// whose estimated cost exceeds EstimatedCostLimit, with every value in
// data assumed as large as EstimatedDataBytes (a comprehension over data
// inside another one is the usual cause), and an evaluation refuses data
// larger than that, so that the estimate, an upper bound, holds for every
// evaluation (within cel-go's cost model, which counts a few string
// functions such as split as constant though they read their whole
// argument: EstimatedDataBytes bounds that too). cel-go's runtime cost tracking (cel.CostLimit) is not used:
// in v0.29.2 its bookkeeping grows with each iteration of a comprehension
// and rescans itself, so that a comprehension of 40,000 iterations takes
// seconds instead of milliseconds (BenchmarkCostTracking).
// A done context interrupts a comprehension (MatchEvent).
//
// Evaluation never compiles: Cache keeps compiled programs by their text,
// and an Event decodes its data once, on the first evaluation that reads
// it, for all the endpoints of one fan-out.
package eventfilter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
)

// Limits. The cost units are cel-go's, the ones Kubernetes' limits are
// stated in; on this project's benchmark machine a unit of a comprehension
// over data takes about 20 ns, a unit of a regular expression match up to
// 250 ns (docs/benchmarks.md).
const (
	// MaxLength bounds an expression, in characters: the MaxLength of the
	// WebhookEndpoint's spec.filter.
	MaxLength = 4096
	// EstimatedCostLimit bounds an expression's worst-case cost as
	// estimated at compile time, and so the cost of every evaluation:
	// Kubernetes' StaticEstimatedCostLimit for one CRD validation rule
	// (k8s.io/apiextensions-apiserver).
	EstimatedCostLimit = 10_000_000
	// EstimatedDataBytes is the size the estimate assumes for every
	// string, list and map in data, and the largest data an evaluation
	// reads: the publish API's limit for a whole request, which bounds
	// each of them.
	EstimatedDataBytes = 256 << 10
	// interruptEvery is how many comprehension iterations pass between
	// checks of MatchEvent's context (Kubernetes' CheckFrequency).
	interruptEvery = 100
	// maxRange bounds lists.range(n): a filter has no use for big ones.
	maxRange = 10_000
)

// Variable names. The namespace is not "namespace", a word CEL reserves.
const (
	VarType      = "type"
	VarNamespace = "publisherNamespace"
	VarData      = "data"
)

// env is the one CEL environment; building it costs milliseconds, so it
// is built once.
var env = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(VarType, cel.StringType),
		cel.Variable(VarNamespace, cel.StringType),
		cel.Variable(VarData, cel.DynType),
		// What Kubernetes' base environment takes from cel-go.
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(ext.StringsVersion(2)),
		ext.Sets(),
		ext.TwoVarComprehensions(),
		ext.Lists(ext.ListsVersion(3), ext.ListsMaxRangeSize(maxRange)),
		cel.ASTValidators(
			cel.ValidateDurationLiterals(),
			cel.ValidateTimestampLiterals(),
			cel.ValidateRegexLiterals(),
			cel.ValidateHomogeneousAggregateLiterals(),
		),
		cel.CostEstimatorOptions(checker.PresenceTestHasCost(false)),
	)
})

// Program is a compiled filter; it is safe for concurrent use.
type Program struct {
	expr string
	prg  cel.Program
	cost checker.CostEstimate
	// readsData: the expression names data, which an evaluation then
	// decodes before its clock starts (once per Event, for every program).
	readsData bool
}

// Error is an expression Compile refused. Line and Column (1-based) say
// where, when the rule broken is at one place; they are 0 for a rule
// about the whole expression (its length, its cost, its result type).
type Error struct {
	Line, Column int
	Message      string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return "filter: " + e.Message
	}
	return fmt.Sprintf("filter: %d:%d: %s", e.Line, e.Column, e.Message)
}

// Compile parses, type-checks and cost-checks expr. A refusal is an
// *Error whose text names the position and the rule; any other error
// is internal.
func Compile(expr string) (*Program, error) { return compile(expr, true) }

// compile is Compile; without checkCost it keeps what the estimate would
// refuse, for tests of the run-time bounds, which must hold even where the
// estimate is wrong.
func compile(expr string, checkCost bool) (*Program, error) {
	if n := utf8.RuneCountInString(expr); n > MaxLength {
		return nil, &Error{Message: fmt.Sprintf("the expression has %d characters, more than the limit of %d", n, MaxLength)}
	}
	e, err := env()
	if err != nil {
		return nil, fmt.Errorf("filter: building the CEL environment: %w", err)
	}
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		errs := iss.Errors()
		first := errs[0]
		ce := &Error{Line: first.Location.Line(), Column: first.Location.Column() + 1, Message: first.Message}
		if ce.Line <= 0 {
			ce.Line, ce.Column = 0, 0
		}
		if len(errs) > 1 {
			ce.Message += fmt.Sprintf(" (and %d more)", len(errs)-1)
		}
		return nil, ce
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, &Error{Message: fmt.Sprintf("the expression must evaluate to a bool, not %s (compare a field with a value, e.g. data.paid == true)", ast.OutputType())}
	}
	cost, err := e.EstimateCost(ast, estimator{})
	if err != nil {
		return nil, fmt.Errorf("filter: estimating its cost: %w", err)
	}
	if checkCost && cost.Max > EstimatedCostLimit {
		return nil, &Error{Message: fmt.Sprintf("estimated cost %s exceeds the limit of %d (a comprehension over data inside another one, or a string built from data many times over, is the usual cause)",
			strconv.FormatFloat(float64(cost.Max), 'g', 3, 64), EstimatedCostLimit)}
	}
	prg, err := e.Program(ast,
		cel.EvalOptions(cel.OptOptimize),
		cel.InterruptCheckFrequency(interruptEvery),
		cel.CustomDecoratorV2(trackCalls),
	)
	if err != nil {
		return nil, fmt.Errorf("filter: planning the program: %w", err)
	}
	return &Program{expr: expr, prg: prg, cost: cost, readsData: namesData(ast)}, nil
}

// Expression returns the text p was compiled from.
func (p *Program) Expression() string { return p.expr }

// EstimatedCost returns the compile-time bound of one evaluation's cost,
// at most EstimatedCostLimit.
func (p *Program) EstimatedCost() uint64 { return p.cost.Max }

// Match is MatchEvent of a new Event, for one-off evaluations.
func (p *Program) Match(typ, namespace string, data []byte) (bool, error) {
	return p.MatchEvent(context.Background(), NewEvent(typ, namespace, data))
}

// MatchEvent is Eval within the default budget.
func (p *Program) MatchEvent(ctx context.Context, ev *Event) (bool, error) {
	return p.Eval(ctx, ev, Budget{})
}

// Budget bounds one evaluation besides RuntimeCostLimit.
type Budget struct {
	// Timeout bounds the evaluation's time (default DefaultEvalTimeout).
	Timeout time.Duration
	// Now is the clock the deadline is read on (default time.Now).
	Now func() time.Time
}

// Eval reports whether ev matches. An error (an *EvalError) means the
// expression could not be evaluated on this event: a missing field, a
// value of another type, data larger than EstimatedDataBytes or not JSON,
// a run-time cost over RuntimeCostLimit, a time over b.Timeout, ctx done
// (before the evaluation, or at a check every 100 iterations of a
// comprehension); callers treat it as no match.
func (p *Program) Eval(ctx context.Context, ev *Event, b Budget) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, &EvalError{Reason: ReasonCanceled, Err: err}
	}
	if b.Timeout <= 0 {
		b.Timeout = DefaultEvalTimeout
	}
	if b.Now == nil {
		b.Now = time.Now
	}
	if p.readsData {
		// Decoding is the Event's, shared by every endpoint's filter: not
		// charged to the first one's budget.
		ev.decoded()
	}
	t := trackers.Get().(*tracker)
	*t = tracker{now: b.Now, deadline: b.Now().Add(b.Timeout)}
	act := &evalVars{ev: ev, t: t}
	var out ref.Val
	var err error
	if ctx.Done() == nil {
		// Nothing can interrupt it: no interrupt state to set up.
		out, _, err = p.prg.Eval(act)
	} else {
		out, _, err = p.prg.ContextEval(ctx, act)
	}
	stopped := t.stopped
	trackers.Put(t)
	if err != nil {
		reason := stopped
		if reason == "" {
			reason = reasonOf(err)
		}
		return false, &EvalError{Reason: reason, Err: err}
	}
	b2, ok := out.(types.Bool)
	if !ok {
		// The checker guarantees a bool; kept for an unforeseen value.
		return false, &EvalError{Reason: ReasonType, Err: fmt.Errorf("the expression gave a %s, not a bool", out.Type())}
	}
	return bool(b2), nil
}

// EvalError is an evaluation that gave no answer. Its text may quote a
// key of the expression or a value of the event: never log it where the
// event's data may not go; Reason is safe anywhere.
type EvalError struct {
	Reason string
	Err    error
}

func (e *EvalError) Error() string { return "filter: " + e.Err.Error() }

func (e *EvalError) Unwrap() error { return e.Err }

// Reasons an evaluation gave no answer, bounded for metric labels.
const (
	ReasonNoSuchKey = "no_such_key" // a field the event does not have
	ReasonType      = "type"        // a value of a type the operation does not take
	ReasonCost      = "cost"        // data larger than EstimatedDataBytes, or a run-time cost over RuntimeCostLimit
	ReasonTimeout   = "timeout"     // an evaluation longer than its Budget's Timeout
	ReasonCanceled  = "canceled"    // MatchEvent's context done
	ReasonData      = "data"        // the event's data is not JSON
	ReasonCompile   = "compile"     // the expression does not compile (see Reason)
	ReasonOther     = "other"
)

// Reasons lists every reason, to initialise metric series.
var Reasons = []string{ReasonNoSuchKey, ReasonType, ReasonCost, ReasonTimeout, ReasonCanceled, ReasonData, ReasonCompile, ReasonOther}

// Reason returns the reason of an error from MatchEvent, or ReasonCompile
// for one from Compile (or Cache.Program).
func Reason(err error) string {
	if ee, ok := errors.AsType[*EvalError](err); ok {
		return ee.Reason
	}
	if _, ok := errors.AsType[*Error](err); ok {
		return ReasonCompile
	}
	return ReasonOther
}

// namesData reports whether a checked expression refers to data.
func namesData(a *cel.Ast) bool {
	for _, r := range a.NativeRep().ReferenceMap() {
		if r.Name == VarData {
			return true
		}
	}
	return false
}
