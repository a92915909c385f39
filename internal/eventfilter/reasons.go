package eventfilter

import (
	"errors"
	"strings"

	"github.com/google/cel-go/interpreter"
)

// reasonOf classifies an evaluation's error. cel-go gives most of its
// errors as text only, so the messages it is known to use decide.
func reasonOf(err error) string {
	if _, ok := errors.AsType[*dataError](err); ok {
		return ReasonData
	}
	if errors.Is(err, ErrDataTooLarge) {
		return ReasonCost
	}
	if ce, ok := errors.AsType[interpreter.EvalCancelledError](err); ok {
		if ce.Cause == interpreter.CostLimitExceeded {
			return ReasonCost
		}
		return ReasonCanceled
	}
	if errors.Is(err, interpreter.InterruptError{}) {
		return ReasonCanceled
	}
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "no such key"), strings.HasPrefix(msg, "index out of bounds"),
		strings.HasPrefix(msg, "invalid_argument: index out of bounds"):
		return ReasonNoSuchKey
	case strings.HasPrefix(msg, "no such overload"), strings.HasPrefix(msg, "unsupported index type"),
		strings.HasPrefix(msg, "type conversion error"), strings.Contains(msg, "no such overload"):
		return ReasonType
	}
	return ReasonOther
}
