package ledger

// TraceContext is a W3C trace context (https://www.w3.org/TR/trace-context/)
// as its two headers carry it: Parent is a traceparent, State a
// tracestate. The ledger stores it opaque; internal/tracing makes and reads
// it.
type TraceContext struct {
	Parent string
	State  string
}

// IsZero reports whether t carries no trace context.
func (t TraceContext) IsZero() bool { return t.Parent == "" }
