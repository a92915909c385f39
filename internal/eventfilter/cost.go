package eventfilter

import (
	"github.com/google/cel-go/checker"
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

func (estimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}
