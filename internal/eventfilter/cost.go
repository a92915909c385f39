package eventfilter

import (
	"math"

	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"

	"github.com/hookkeeper/hookkeeper/internal/eventtype"
)

// maxNamespace is a namespace name's longest (a DNS-1123 label).
const maxNamespace = 63

// estimator gives the compile-time cost estimate the sizes CEL cannot
// know: those of the variables and of every value reached from data,
// which no JSON request of EstimatedDataBytes can exceed. Without it
// any comprehension over data would be estimated unbounded.
type estimator struct{}

func (estimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	path := n.Path()
	if len(path) == 0 {
		if sizeless(n.Type()) {
			// A type, number or bool computed by the expression, e.g.
			// type(data.x): its size never makes anything cost more.
			return &checker.SizeEstimate{Min: 1, Max: 1}
		}
		return nil
	}
	switch path[0] {
	case VarType:
		if len(path) == 1 {
			return &checker.SizeEstimate{Min: 1, Max: eventtype.MaxLength}
		}
	case VarNamespace:
		if len(path) == 1 {
			return &checker.SizeEstimate{Min: 1, Max: maxNamespace}
		}
	case VarData:
		return &checker.SizeEstimate{Min: 0, Max: EstimatedDataBytes}
	}
	return nil
}

func sizeless(t *types.Type) bool {
	if t == nil {
		return false
	}
	switch t.Kind() {
	case types.TypeKind, types.IntKind, types.UintKind, types.DoubleKind, types.BoolKind,
		types.NullTypeKind, types.DurationKind, types.TimestampKind:
		return true
	}
	return false
}

// EstimateCallCost estimates what cel-go's checker leaves at a constant
// cost: the extension functions over strings and lists, whose result can
// be far larger than their input (data.s.replace("a", data.s) makes a
// string as long as the square of data.s). Each is charged, as in
// Kubernetes' library cost estimator, for reading its input, and besides
// for building its result, a unit per byte or element: the same charge
// the run-time tracker makes (runtime.go), so that the estimate bounds
// what an evaluation allocates. Kubernetes' estimator itself
// (k8s.io/apiserver/pkg/cel/library) is not imported: this package is a
// leaf of the engine, which depends on no Kubernetes module.
func (e estimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	switch overloadID {
	case overloads.AddString, overloads.AddBytes:
		if len(args) == 2 {
			size := e.size(args[0]).Add(e.size(args[1]))
			return building(size.MultiplyByCostFactor(common.StringTraversalCostFactor), size)
		}
		return nil
	}
	var in checker.SizeEstimate
	switch {
	case target != nil:
		in = e.size(*target)
	case len(args) > 0:
		in = e.size(args[0])
	default:
		return nil
	}
	read := in.MultiplyByCostFactor(common.StringTraversalCostFactor)
	switch function {
	case "charAt", "indexOf", "lastIndexOf":
		return &checker.CallEstimate{CostEstimate: read}
	case "lowerAscii", "upperAscii", "trim", "substring", "reverse", "distinct", "sort", "slice", "flatten", "@sortByAssociatedKeys":
		// At most as large as the input (flatten: as many elements as
		// the nested lists hold, which data's size bounds too).
		return building(read, in)
	case "strings.quote":
		// An escape is at most six bytes: \u0000.
		return building(read, in.Multiply(checker.SizeEstimate{Min: 1, Max: 6}))
	case "split":
		// Each byte can become an element.
		return building(read.MultiplyByCostFactor(2), in)
	case "replace":
		if target != nil && len(args) >= 2 {
			return building(read.MultiplyByCostFactor(2), replaced(in, e.size(args[0]), e.size(args[1])))
		}
	case "join":
		if target != nil {
			// Every element as large as the list can hold, with a
			// separator between each two.
			size := in.Multiply(elementSize)
			if path := (*target).Path(); len(path) > 0 && path[0] == VarData {
				// A list of data's: its elements together are no larger.
				size = checker.SizeEstimate{Max: EstimatedDataBytes}
			}
			if len(args) > 0 {
				size = size.Add(in.Multiply(e.size(args[0])))
			}
			return building(size.MultiplyByCostFactor(common.StringTraversalCostFactor), size)
		}
	case "format":
		if target != nil && len(args) > 0 {
			// The format, and each argument at most as large as data.
			size := in.Add(e.size(args[0]).Multiply(checker.SizeEstimate{Min: 0, Max: EstimatedDataBytes}))
			return building(size.MultiplyByCostFactor(common.StringTraversalCostFactor), size)
		}
	}
	return nil
}

// building is a call that costs read and builds a result of size.
func building(read checker.CostEstimate, size checker.SizeEstimate) *checker.CallEstimate {
	return &checker.CallEstimate{CostEstimate: read.Add(size.AsCost()), ResultSize: &size}
}

// replaced is the size of replacing, in a string of size in, every
// occurrence of a string of size old by one of size new: at worst every
// old of the smallest size, an empty one matching between every two
// bytes, becomes the largest new.
func replaced(in, old, repl checker.SizeEstimate) checker.SizeEstimate {
	count := in.Max + 1
	if old.Min > 0 {
		count = in.Max/old.Min + 1
	}
	return checker.SizeEstimate{Max: in.Max}.Add(checker.SizeEstimate{Max: count}.Multiply(checker.SizeEstimate{Max: repl.Max}))
}

// size is n's size as computed by the checker or estimated here; unknown
// sizes are unbounded.
func (e estimator) size(n checker.AstNode) checker.SizeEstimate {
	if sz := n.ComputedSize(); sz != nil {
		return *sz
	}
	if sz := e.EstimateSize(n); sz != nil {
		return *sz
	}
	return checker.SizeEstimate{Min: 0, Max: math.MaxUint64}
}

// elementSize bounds the size of an element of a list: the checker knows
// a list's length, not its elements' sizes, and none that data holds is
// larger than data (one built larger was charged when it was built).
var elementSize = checker.SizeEstimate{Min: 0, Max: EstimatedDataBytes}
