package catalog

import (
	"math"
	"strconv"
	"unicode/utf8"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
)

// fastNode is a schema node compiled for a check that can only say "this
// data certainly conforms". kube-openapi's validator builds a validator for
// every node of the schema on every call, which is most of a publish's cost
// with a schema; the fast check walks a compiled tree instead. It knows the
// common keywords (type, properties, required, items, string enums, bounds
// of numbers, strings and arrays, nullable) and nothing else: a schema
// with any other keyword is not compiled, and data it does not accept goes
// to kube-openapi, which decides and words the refusal. So it may only be
// wrong by being cautious, never by accepting what the API server would
// refuse (FuzzFastAgreesWithTheValidator holds it to that).
type fastNode struct {
	typ      string
	nullable bool

	props    map[string]*fastNode
	required []string
	items    *fastNode

	enum             map[string]bool
	minimum, maximum *float64
	exclMin, exclMax bool
	// minInt and maxInt are the bounds an int64 is compared with
	// (int64Bound); nil when the fast check cannot compare with them.
	minInt, maxInt *int64
	minLen, maxLen *int64
	minItems       *int64
	maxItems       *int64
}

// compileFast compiles s; false when s uses a keyword the fast check does
// not know.
func compileFast(s *apiextensions.JSONSchemaProps) (*fastNode, bool) {
	if s.Ref != nil || s.Format != "" || s.Pattern != "" || s.MultipleOf != nil || s.UniqueItems ||
		s.AdditionalProperties != nil || s.AdditionalItems != nil || s.PatternProperties != nil || s.Dependencies != nil ||
		len(s.AllOf) > 0 || len(s.AnyOf) > 0 || len(s.OneOf) > 0 || s.Not != nil ||
		s.MinProperties != nil || s.MaxProperties != nil || s.XIntOrString || s.XPreserveUnknownFields != nil ||
		s.XEmbeddedResource || s.Definitions != nil {
		return nil, false
	}
	n := &fastNode{typ: s.Type, nullable: s.Nullable, required: s.Required,
		minimum: s.Minimum, maximum: s.Maximum, exclMin: s.ExclusiveMinimum, exclMax: s.ExclusiveMaximum,
		minInt: int64Bound(s.Minimum), maxInt: int64Bound(s.Maximum),
		minLen: s.MinLength, maxLen: s.MaxLength, minItems: s.MinItems, maxItems: s.MaxItems}
	switch s.Type {
	case "object":
		if s.Items != nil {
			return nil, false
		}
		n.props = make(map[string]*fastNode, len(s.Properties))
		for name, p := range s.Properties {
			child, ok := compileFast(&p)
			if !ok {
				return nil, false
			}
			n.props[name] = child
		}
	case "array":
		if s.Items == nil || s.Items.Schema == nil || len(s.Items.JSONSchemas) > 0 {
			return nil, false
		}
		child, ok := compileFast(s.Items.Schema)
		if !ok {
			return nil, false
		}
		n.items = child
	case "string", "number", "integer", "boolean":
		if len(s.Properties) > 0 || s.Items != nil {
			return nil, false
		}
	default:
		return nil, false
	}
	if len(s.Enum) > 0 {
		if s.Type != "string" {
			return nil, false
		}
		n.enum = make(map[string]bool, len(s.Enum))
		for _, e := range s.Enum {
			str, ok := e.(string)
			if !ok {
				return nil, false
			}
			n.enum[str] = true
		}
	}
	return n, true
}

// maxSafeInteger bounds the integers written as floats (1.0, 1e3) the fast
// check accepts: beyond it a float64 no longer tells integers apart, and
// kube-openapi decides.
const maxSafeInteger = 1 << 53

// int64Bound is the bound b as kube-openapi compares an int64 with it
// (int64(b)), when the fast check may do the same: b is an integer an
// int64 holds exactly, and kube-openapi's check that the bound fits an
// integer (its shortest decimal form parsed as an int64) passes, without
// which it refuses every value of an integer field. nil otherwise: the
// fast check cannot tell, and kube-openapi decides.
func int64Bound(b *float64) *int64 {
	if b == nil || *b != math.Trunc(*b) || *b < -(1<<63) || *b >= 1<<63 {
		return nil
	}
	if _, err := strconv.ParseInt(strconv.FormatFloat(*b, 'f', -1, 64), 10, 64); err != nil {
		return nil
	}
	i := int64(*b)
	return &i
}

// ok reports whether v (decoded as Validate decodes data: numbers as int64
// or float64) certainly conforms to n; false when it does not, or it
// cannot tell.
func (n *fastNode) ok(v any) bool {
	if v == nil {
		// kube-openapi checks a null against the enum too, and refuses
		// it unless the enum lists null: with an enum, null goes to it.
		return n.nullable && n.enum == nil
	}
	switch n.typ {
	case "object":
		m, isMap := v.(map[string]any)
		if !isMap {
			return false
		}
		for _, r := range n.required {
			if _, present := m[r]; !present {
				return false
			}
		}
		for k, child := range n.props {
			if cv, present := m[k]; present && !child.ok(cv) {
				return false
			}
		}
		return true
	case "array":
		a, isArray := v.([]any)
		if !isArray || (n.minItems != nil && int64(len(a)) < *n.minItems) || (n.maxItems != nil && int64(len(a)) > *n.maxItems) {
			return false
		}
		for _, item := range a {
			if !n.items.ok(item) {
				return false
			}
		}
		return true
	case "string":
		s, isString := v.(string)
		if !isString || (n.enum != nil && !n.enum[s]) {
			return false
		}
		if n.minLen != nil || n.maxLen != nil {
			l := int64(utf8.RuneCountInString(s))
			if (n.minLen != nil && l < *n.minLen) || (n.maxLen != nil && l > *n.maxLen) {
				return false
			}
		}
		return true
	case "number", "integer":
		switch x := v.(type) {
		case int64:
			return n.intOK(x)
		case float64:
			return n.floatOK(x)
		}
		return false
	case "boolean":
		_, isBool := v.(bool)
		return isBool
	}
	return false
}

// intOK reports whether x, number data held as an integer, certainly
// conforms to n, a number or integer node.
func (n *fastNode) intOK(x int64) bool {
	if n.minimum != nil && (n.minInt == nil || x < *n.minInt || (n.exclMin && x == *n.minInt)) {
		return false
	}
	if n.maximum != nil && (n.maxInt == nil || x > *n.maxInt || (n.exclMax && x == *n.maxInt)) {
		return false
	}
	return true
}

// floatOK reports whether f, number data held as a float (it has a
// fraction, an exponent or does not fit in an int64), certainly conforms
// to n, a number or integer node.
func (n *fastNode) floatOK(f float64) bool {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return false
	}
	if n.typ == "integer" {
		// kube-openapi refuses every value of an integer field whose
		// bound does not fit an integer.
		if f != math.Trunc(f) || math.Abs(f) >= maxSafeInteger ||
			(n.minimum != nil && n.minInt == nil) || (n.maximum != nil && n.maxInt == nil) {
			return false
		}
	}
	if n.minimum != nil && (f < *n.minimum || (n.exclMin && f == *n.minimum)) {
		return false
	}
	if n.maximum != nil && (f > *n.maximum || (n.exclMax && f == *n.maximum)) {
		return false
	}
	return true
}
