package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	kjson "sigs.k8s.io/json"
)

// The four kinds decode leniently: a stored object whose value the Go types
// cannot decode (a duration that overflows time.Duration, a date-time Go's
// RFC 3339 parser refuses, an integer out of range) would otherwise fail the
// whole list and watch of its kind, in every namespace, and stop the
// operator. Instead the value is left out, the object decodes, and its
// Undecodable field names what was left out, so that its controller refuses
// that one object (Ready False, InvalidSpec) and keeps reconciling the rest.
// The CRD schemas should make this unreachable; it is the defence in depth.

// maxProblemLength bounds one problem's text: the offending value is
// user-written and may be long.
const maxProblemLength = 256

// UnmarshalJSON decodes a RetryPolicy leniently; see Undecodable.
func (r *RetryPolicy) UnmarshalJSON(data []byte) error {
	type plain RetryPolicy
	problems, err := decodeLeniently(data, (*plain)(r))
	r.Undecodable = problems
	return err
}

// UnmarshalJSON decodes a WebhookEndpoint leniently; see Undecodable.
func (e *WebhookEndpoint) UnmarshalJSON(data []byte) error {
	type plain WebhookEndpoint
	problems, err := decodeLeniently(data, (*plain)(e))
	e.Undecodable = problems
	return err
}

// UnmarshalJSON decodes a DeliveryRecovery leniently; see Undecodable.
func (d *DeliveryRecovery) UnmarshalJSON(data []byte) error {
	type plain DeliveryRecovery
	problems, err := decodeLeniently(data, (*plain)(d))
	d.Undecodable = problems
	return err
}

// UnmarshalJSON decodes a WebhookEventType leniently; see Undecodable.
func (t *WebhookEventType) UnmarshalJSON(data []byte) error {
	type plain WebhookEventType
	problems, err := decodeLeniently(data, (*plain)(t))
	t.Undecodable = problems
	return err
}

// DecodeError is nil when t decoded completely, else an error naming every
// field that was left out.
func (t *WebhookEventType) DecodeError() error { return undecodableError(t.Undecodable) }

// DecodeError is nil when r decoded completely, else an error naming every
// field that was left out.
func (r *RetryPolicy) DecodeError() error { return undecodableError(r.Undecodable) }

// DecodeError is nil when e decoded completely, else an error naming every
// field that was left out.
func (e *WebhookEndpoint) DecodeError() error { return undecodableError(e.Undecodable) }

// DecodeError is nil when d decoded completely, else an error naming every
// field that was left out.
func (d *DeliveryRecovery) DecodeError() error { return undecodableError(d.Undecodable) }

func undecodableError(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("the stored object has values the operator cannot decode, left out: %s", strings.Join(problems, "; "))
}

// decodeLeniently decodes data into into the way the Kubernetes JSON
// serializer does (case-sensitive field names). When that fails, it finds
// every value that does not decode into its Go field, returns it in
// problems as "path: error", leaves it out (a list element is dropped) and
// decodes the rest. It fails only when the rest does not decode either.
func decodeLeniently(data []byte, into any) ([]string, error) {
	strictErr := kjson.UnmarshalCaseSensitivePreserveInts(data, into)
	if strictErr == nil {
		return nil, nil
	}
	var doc any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &doc); err != nil {
		return nil, strictErr
	}
	var problems []string
	target := reflect.ValueOf(into).Elem()
	doc, _ = prune(target.Type(), doc, "", &problems)
	if len(problems) == 0 {
		return nil, strictErr
	}
	cleaned, err := json.Marshal(doc)
	if err != nil {
		return problems, errors.Join(strictErr, err)
	}
	target.SetZero()
	if err := kjson.UnmarshalCaseSensitivePreserveInts(cleaned, into); err != nil {
		return problems, fmt.Errorf("decoding after leaving out %s: %w", strings.Join(problems, "; "), err)
	}
	return problems, nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// prune returns v without the values that do not decode into t, and false
// when v itself does not; it appends a problem for each value left out.
func prune(t reflect.Type, v any, path string, problems *[]string) (any, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil {
		return v, true
	}
	switch m, isMap := v.(map[string]any); {
	case reflect.PointerTo(t).Implements(unmarshalerType):
	case t.Kind() == reflect.Struct && isMap:
		pruneStruct(t, m, path, problems)
		return m, true
	case t.Kind() == reflect.Map && isMap:
		for k, sub := range m {
			if kept, ok := prune(t.Elem(), sub, path+"."+k, problems); ok {
				m[k] = kept
			} else {
				delete(m, k)
			}
		}
		return m, true
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		if list, ok := v.([]any); ok {
			kept := make([]any, 0, len(list))
			for i, sub := range list {
				if k, ok := prune(t.Elem(), sub, path+"["+strconv.Itoa(i)+"]", problems); ok {
					kept = append(kept, k)
				}
			}
			return kept, true
		}
	}
	raw, err := json.Marshal(v)
	if err == nil {
		err = kjson.UnmarshalCaseSensitivePreserveInts(raw, reflect.New(t).Interface())
	}
	if err != nil {
		msg := strings.TrimPrefix(path, ".") + ": " + err.Error()
		if len(msg) > maxProblemLength {
			msg = msg[:maxProblemLength-3] + "..."
		}
		*problems = append(*problems, msg)
		return nil, false
	}
	return v, true
}

// pruneStruct prunes the members of m that are fields of the struct t,
// descending into inlined (embedded) structs at the same level.
func pruneStruct(t reflect.Type, m map[string]any, path string, problems *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if name == "" && f.Anonymous {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(unmarshalerType) {
				pruneStruct(ft, m, path, problems)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		sub, present := m[name]
		if !present {
			continue
		}
		if kept, ok := prune(f.Type, sub, path+"."+name, problems); ok {
			m[name] = kept
		} else {
			delete(m, name)
		}
	}
}
