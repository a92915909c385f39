package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/hookkeeper/hookkeeper/internal/catalog"
)

// schemaOf parses a schema written as JSON.
func schemaOf(t *testing.T, raw string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	var s apiextensionsv1.JSONSchemaProps
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatalf("schema %s: %v", raw, err)
	}
	return &s
}

func exampleJSON(t *testing.T, raw string) string {
	t.Helper()
	out, err := json.Marshal(exampleData(schemaOf(t, raw)))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestExampleData: what the generator picks for each kind of schema,
// property by property (the data schema is an object, so each case is a
// property "v" of one).
func TestExampleData(t *testing.T) {
	for _, c := range []struct {
		name, schema, want string
	}{
		// Literals first: example, then default, then the first enum value.
		{"example", `{"type": "string", "example": "ord_42", "default": "d", "enum": ["a", "b"]}`, `"ord_42"`},
		{"default", `{"type": "integer", "default": 7, "enum": [3, 7]}`, `7`},
		{"enum", `{"type": "string", "enum": ["EUR", "USD"]}`, `"EUR"`},
		{"object example", `{"type": "object", "properties": {"a": {"type": "string"}}, "example": {"a": "given"}}`, `{"a":"given"}`},
		// Types.
		{"string", `{"type": "string"}`, `"example"`},
		{"integer", `{"type": "integer"}`, `1`},
		{"number", `{"type": "number"}`, `1.5`},
		{"boolean", `{"type": "boolean"}`, `true`},
		{"int-or-string", `{"x-kubernetes-int-or-string": true}`, `1`},
		{"preserve unknown fields", `{"x-kubernetes-preserve-unknown-fields": true}`, `{}`},
		// Formats.
		{"date-time", `{"type": "string", "format": "date-time"}`, `"2026-01-02T15:04:05Z"`},
		{"datetime", `{"type": "string", "format": "datetime"}`, `"2026-01-02T15:04:05Z"`},
		{"date", `{"type": "string", "format": "date"}`, `"2026-01-02"`},
		{"email", `{"type": "string", "format": "email"}`, `"user@example.com"`},
		{"uuid", `{"type": "string", "format": "uuid"}`, `"3f1c5b3e-8d2a-4c6b-9f1e-2a7d4b8c9e01"`},
		{"uri", `{"type": "string", "format": "uri"}`, `"https://example.com/orders/42"`},
		{"ipv4", `{"type": "string", "format": "ipv4"}`, `"192.0.2.1"`},
		{"duration", `{"type": "string", "format": "duration"}`, `"30s"`},
		{"an unknown format", `{"type": "string", "format": "shoe-size"}`, `"example"`},
		// Lengths and patterns.
		{"minLength", `{"type": "string", "minLength": 10}`, `"exampleeee"`},
		{"maxLength", `{"type": "string", "maxLength": 3}`, `"exa"`},
		{"a format cut to maxLength", `{"type": "string", "format": "hostname", "maxLength": 7}`, `"example"`},
		{"pattern of capitals", `{"type": "string", "pattern": "^[A-Z]{3}$"}`, `"ABC"`},
		{"pattern of digits", `{"type": "string", "pattern": "^[0-9]+$", "minLength": 8}`, `"12345555"`},
		{"pattern no candidate meets", `{"type": "string", "pattern": "^zz$"}`, `"example"`},
		// Numeric bounds.
		{"minimum", `{"type": "integer", "minimum": 18}`, `18`},
		{"exclusive minimum", `{"type": "integer", "minimum": 18, "exclusiveMinimum": true}`, `19`},
		{"maximum", `{"type": "integer", "maximum": -5}`, `-5`},
		{"exclusive maximum", `{"type": "integer", "maximum": 1, "exclusiveMaximum": true}`, `0`},
		{"fractional bounds", `{"type": "integer", "minimum": 2.5, "maximum": 3.5}`, `3`},
		{"multipleOf", `{"type": "integer", "minimum": 2, "multipleOf": 5}`, `5`},
		{"number minimum", `{"type": "number", "minimum": 100}`, `100`},
		{"number between exclusive bounds", `{"type": "number", "minimum": 0, "maximum": 1, "exclusiveMinimum": true, "exclusiveMaximum": true}`, `0.5`},
		{"number multipleOf", `{"type": "number", "multipleOf": 0.25}`, `1.5`},
		// Objects and arrays.
		{"object: required and optional", `{"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}`, `{"a":"example","b":1}`},
		{"map", `{"type": "object", "additionalProperties": {"type": "integer"}}`, `{"key":1}`},
		{"map with minProperties", `{"type": "object", "minProperties": 2, "additionalProperties": {"type": "boolean"}}`, `{"key":true,"key2":true}`},
		{"array: one item", `{"type": "array", "items": {"type": "string", "format": "email"}}`, `["user@example.com"]`},
		{"array: minItems", `{"type": "array", "minItems": 2, "items": {"type": "integer"}}`, `[1,1]`},
		{"array: maxItems 0", `{"type": "array", "maxItems": 0, "items": {"type": "integer"}}`, `[]`},
		{"array of objects", `{"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string", "maxLength": 4}}}}`, `[{"sku":"exam"}]`},
		{"embedded resource", `{"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}`,
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"example"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := exampleJSON(t, `{"type": "object", "properties": {"v": `+c.schema+`}}`)
			if want := `{"v":` + c.want + `}`; got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}

// nested is a schema of depth levels, each an object with a required and
// an optional property holding the next level, and an optional array of it.
func nested(depth int) string {
	s := `{"type": "string"}`
	for range depth {
		s = fmt.Sprintf(`{"type": "object", "required": ["req"], "properties": {"req": %s, "opt": %s, "list": {"type": "array", "items": %s}}}`, s, s, s)
	}
	return s
}

// TestExampleDepth: nothing optional is made deeper than exampleDepth (an
// object there has only its required properties, an array no items), so that a deep schema's example stays
// small; required properties are followed to the end, so the example
// still validates (TestExamplesValidate).
func TestExampleDepth(t *testing.T) {
	v := exampleData(schemaOf(t, nested(exampleDepth+3)))
	for level := 0; ; level++ {
		obj, ok := v.(map[string]any)
		if !ok {
			if v != "example" || level != exampleDepth+3 {
				t.Fatalf("level %d: %v, want the string at level %d", level, v, exampleDepth+3)
			}
			return
		}
		// The list is a level deeper than the object that holds it.
		_, hasOpt := obj["opt"]
		list, _ := obj["list"].([]any)
		if wantOpt, wantItem := level < exampleDepth, level+1 < exampleDepth; hasOpt != wantOpt || (len(list) == 1) != wantItem {
			t.Errorf("level %d: optional property %v, list %v; want a property above level %d, an item above level %d", level, hasOpt, list, exampleDepth, exampleDepth-1)
		}
		v = obj["req"]
	}
}

// twentyFields is the bench's 20-field schema's shape: strings with
// maxLength, numbers with minimum, an enum, formats, a nested object and an
// array of objects.
const twentyFields = `{
  "type": "object",
  "required": ["orderId", "customerId", "amount", "currency", "status", "createdAt", "lines", "shipping"],
  "properties": {
    "orderId": {"type": "string", "maxLength": 32, "pattern": "^ord_[a-z0-9]+$", "example": "ord_8f3a9c1e"},
    "customerId": {"type": "string", "format": "uuid"},
    "email": {"type": "string", "format": "email", "maxLength": 254},
    "amount": {"type": "number", "minimum": 0},
    "tax": {"type": "number", "minimum": 0, "maximum": 1000000},
    "currency": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
    "status": {"type": "string", "enum": ["placed", "paid", "shipped"]},
    "createdAt": {"type": "string", "format": "date-time"},
    "itemCount": {"type": "integer", "minimum": 1, "maximum": 1000},
    "coupon": {"type": "string", "maxLength": 16, "minLength": 4},
    "gift": {"type": "boolean"},
    "note": {"type": "string", "maxLength": 500},
    "channel": {"type": "string", "maxLength": 32, "default": "web"},
    "priority": {"type": "integer", "minimum": 0, "maximum": 9, "multipleOf": 3},
    "website": {"type": "string", "format": "uri"},
    "ip": {"type": "string", "format": "ipv4"},
    "tags": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 24}},
    "attributes": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 64}},
    "shipping": {"type": "object", "required": ["country", "postcode"], "properties": {
      "name": {"type": "string", "maxLength": 128}, "street": {"type": "string", "maxLength": 128},
      "country": {"type": "string", "pattern": "^[A-Z]{2}$", "minLength": 2, "maxLength": 2},
      "postcode": {"type": "string", "maxLength": 16}}},
    "lines": {"type": "array", "minItems": 1, "maxItems": 100, "items": {"type": "object", "required": ["sku", "quantity", "price"], "properties": {
      "sku": {"type": "string", "maxLength": 32}, "quantity": {"type": "integer", "minimum": 1},
      "price": {"type": "number", "minimum": 0, "exclusiveMinimum": true}}}}
  }
}`

// TestExamplesValidate: every example the generator makes is accepted by
// the validator publishes are checked with (internal/catalog, the API
// server's CRD validator), for a table of schemas that covers every
// format CRD schemas check, bounds, lengths, enums, literals, nesting past
// the depth bound and the 20-field schema of the bench.
func TestExamplesValidate(t *testing.T) {
	var formats []string
	for f := range formatExamples {
		formats = append(formats, fmt.Sprintf(`"f_%s": {"type": "string", "format": %q}`, strings.ReplaceAll(f, "-", "_"), f))
	}
	for _, c := range []struct{ name, schema string }{
		{"empty object", `{"type": "object"}`},
		{"every format", `{"type": "object", "properties": {` + strings.Join(formats, ", ") + `}}`},
		{"dashed formats", `{"type": "object", "properties": {"a": {"type": "string", "format": "date-time"}, "b": {"type": "string", "format": "k8s-long-name"}}}`},
		{"scalars with bounds", `{"type": "object", "properties": {
			"i": {"type": "integer", "minimum": -3, "maximum": -3},
			"j": {"type": "integer", "minimum": 10, "exclusiveMinimum": true, "maximum": 12, "exclusiveMaximum": true},
			"k": {"type": "integer", "format": "int32", "multipleOf": 7, "minimum": 8},
			"n": {"type": "number", "minimum": 0.1, "maximum": 0.2, "exclusiveMinimum": true},
			"m": {"type": "number", "multipleOf": 0.01, "minimum": 1.234},
			"s": {"type": "string", "minLength": 12, "maxLength": 12},
			"p": {"type": "string", "pattern": "^[a-z]+-[0-9]$"},
			"b": {"type": "boolean"}}}`},
		{"literals", `{"type": "object", "required": ["e"], "properties": {
			"e": {"type": "string", "enum": ["only"]},
			"d": {"type": "integer", "default": 4, "minimum": 4},
			"x": {"type": "object", "example": {"k": "v"}, "properties": {"k": {"type": "string"}}}}}`},
		{"int-or-string and free fields", `{"type": "object", "properties": {
			"port": {"x-kubernetes-int-or-string": true},
			"free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}`},
		{"maps and lists", `{"type": "object", "minProperties": 1, "properties": {
			"labels": {"type": "object", "minProperties": 3, "additionalProperties": {"type": "string", "maxLength": 8}},
			"matrix": {"type": "array", "items": {"type": "array", "minItems": 2, "items": {"type": "integer", "maximum": 0}}},
			"none": {"type": "array", "maxItems": 0, "items": {"type": "string"}}}}`},
		{"nested past the depth bound", nested(exampleDepth + 2)},
		{"twenty fields", twentyFields},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := catalog.Compile([]byte(c.schema))
			if err != nil {
				t.Fatalf("the schema does not compile: %v", err)
			}
			data, err := json.Marshal(exampleData(schemaOf(t, c.schema)))
			if err != nil {
				t.Fatal(err)
			}
			if v := s.Validate(data); v != nil {
				t.Errorf("the example is refused: %s: %s\n%s", v.Field, v.Message, data)
			}
		})
	}
}
