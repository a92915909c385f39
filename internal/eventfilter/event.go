package eventfilter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// Event is one event as filters see it. Build it once per fan-out and
// evaluate every endpoint's filter on it: its data is decoded on the first
// evaluation that reads it and shared by the others (it is safe for
// concurrent use), and never decoded when no filter reads it.
type Event struct {
	typ, namespace types.String
	raw            []byte

	once sync.Once
	data ref.Val
}

// NewEvent returns the event of this type, published in namespace, with
// data: a JSON object (canonical or not; empty or nil is null). data is
// read, not copied: it must not change while the Event is in use.
func NewEvent(typ, namespace string, data []byte) *Event {
	return &Event{typ: types.String(typ), namespace: types.String(namespace), raw: data}
}

// decoded returns the data as a CEL value, decoding it the first time.
func (e *Event) decoded() ref.Val {
	e.once.Do(func() {
		if len(e.raw) > EstimatedDataBytes {
			// An error value: what reads data fails with it.
			e.data = types.WrapErr(ErrDataTooLarge)
			return
		}
		var err error
		if e.data, err = decodeJSON(e.raw); err != nil {
			e.data = types.WrapErr(&dataError{err})
		}
	})
	return e.data
}

// ErrDataTooLarge is data the cost estimate does not bound: an evaluation
// on it fails (ReasonCost) without reading it.
var ErrDataTooLarge = fmt.Errorf("the event's data is larger than the %d bytes filters read", EstimatedDataBytes)

// dataError is data that is not JSON.
type dataError struct{ err error }

func (e *dataError) Error() string { return "decoding the event's data: " + e.err.Error() }

func (e *dataError) Unwrap() error { return e.err }

// vars is an Event as a CEL activation, a conversion that costs nothing.
type vars Event

// ResolveName implements interpreter.Activation.
func (v *vars) ResolveName(name string) (any, bool) {
	switch name {
	case VarType:
		return v.typ, true
	case VarNamespace:
		return v.namespace, true
	case VarData:
		return (*Event)(v).decoded(), true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (*vars) Parent() interpreter.Activation { return nil }

// decodeJSON turns a JSON document into CEL values once, so that
// evaluations only look up: objects become maps, arrays lists, and a
// number an int when it is written as an integer that fits in 64 bits
// (as Kubernetes decodes JSON for CEL), a double otherwise.
func decodeJSON(raw []byte) (ref.Val, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return types.NullValue, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("more after the JSON value")
	}
	return toVal(v), nil
}

func toVal(v any) ref.Val {
	switch v := v.(type) {
	case nil:
		return types.NullValue
	case bool:
		return types.Bool(v)
	case string:
		return types.String(v)
	case json.Number:
		return number(string(v))
	case []any:
		elems := make([]ref.Val, len(v))
		for i, e := range v {
			elems[i] = toVal(e)
		}
		return types.NewRefValList(types.DefaultTypeAdapter, elems)
	case map[string]any:
		// Converted in place: the map's values become CEL values, which
		// the adapter hands back as they are.
		for k, e := range v {
			v[k] = toVal(e)
		}
		return types.NewStringInterfaceMap(types.DefaultTypeAdapter, v)
	}
	return types.NewErr("unexpected JSON value %T", v)
}

// number is a JSON number as CEL sees it: an int when written as an
// integer in int64's range, so that data.count + 1 stays an int; a double
// otherwise (a fraction, an exponent, or a larger integer). Comparisons
// across the two work either way (cel.CrossTypeNumericComparisons).
func number(s string) ref.Val {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return types.Int(i)
		}
	}
	// Out of double's range ParseFloat fails with ±Inf, the nearest.
	f, _ := strconv.ParseFloat(s, 64)
	return types.Double(f)
}
