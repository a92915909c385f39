package catalog

import (
	"strings"
	"testing"
)

const orderSchema = `{
  "type": "object",
  "required": ["amount", "currency"],
  "properties": {
    "amount": {"type": "number", "minimum": 0},
    "currency": {"type": "string", "enum": ["EUR", "USD"]},
    "lines": {"type": "array", "items": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string", "maxLength": 8}}}},
    "customer": {"type": "object", "properties": {"email": {"type": "string", "format": "email"}}}
  }
}`

// TestValidate: data is checked as the API server checks a custom
// resource, and the refusal names the path of the first violation and the
// rule, never the value.
func TestValidate(t *testing.T) {
	s, err := Compile([]byte(orderSchema))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		data      string
		wantField string // "" when it conforms
		wantRule  string
	}{
		{data: `{"amount": 12.5, "currency": "EUR"}`},
		{data: `{"amount": 3, "currency": "USD", "lines": [{"sku": "A1"}], "extra": true}`},
		{data: `{"currency": "EUR"}`, wantField: "data.amount", wantRule: "Required value"},
		{data: `{"amount": "12", "currency": "EUR"}`, wantField: "data.amount", wantRule: "Invalid value"},
		{data: `{"amount": -1, "currency": "EUR"}`, wantField: "data.amount", wantRule: "Invalid value"},
		{data: `{"amount": 1, "currency": "GBP-secret-value"}`, wantField: "data.currency", wantRule: "Unsupported value"},
		{data: `{"amount": 1, "currency": "EUR", "lines": [{"sku": "A1"}, {}]}`, wantField: "data.lines[1].sku", wantRule: "Required value"},
		{data: `{"amount": 1, "currency": "EUR", "lines": [{"sku": "way-too-long"}]}`, wantField: "data.lines[0].sku", wantRule: "Too long"},
		{data: `{"amount": 1, "currency": "EUR", "customer": {"email": "not-an-email"}}`, wantField: "data.customer.email", wantRule: "Invalid value"},
	}
	for _, tt := range tests {
		v := s.Validate([]byte(tt.data))
		switch {
		case tt.wantField == "" && v != nil:
			t.Errorf("%s: refused %v, want accepted", tt.data, v)
		case tt.wantField != "" && v == nil:
			t.Errorf("%s: accepted, want %s at %s", tt.data, tt.wantRule, tt.wantField)
		case tt.wantField != "" && (v.Field != tt.wantField || !strings.HasPrefix(v.Message, tt.wantRule)):
			t.Errorf("%s: %s %q, want %s %q…", tt.data, v.Field, v.Message, tt.wantField, tt.wantRule)
		case v != nil && (strings.Contains(v.Message, "secret-value") || strings.Contains(v.Message, "not-an-email")):
			t.Errorf("%s: the refusal %q shows the value", tt.data, v.Message)
		}
	}
}

// TestCompileRefuses: what a CRD would refuse as a schema, with the path.
func TestCompileRefuses(t *testing.T) {
	tests := []struct{ schema, want string }{
		{`{"type": "string"}`, "spec.schema.type: must be object"},
		{`{"type": "object", "properties": {"a": {}}}`, "spec.schema.properties[a].type: Required value"},
		{`{"type": "object", "propertiez": {}}`, "not an OpenAPI v3 schema"},
		{`{"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}}`, "spec.schema"},
		{`[1, 2]`, "not an OpenAPI v3 schema"},
	}
	for _, tt := range tests {
		_, err := Compile([]byte(tt.schema))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Compile(%s) = %v, want an error containing %q", tt.schema, err, tt.want)
		}
	}
}

// TestCompileDataNamedLikeAResource: data is not a resource: fields named
// metadata, apiVersion or kind are data like any other.
func TestCompileDataNamedLikeAResource(t *testing.T) {
	s, err := Compile([]byte(`{"type":"object","properties":{"metadata":{"type":"object","properties":{"source":{"type":"string"}}},"kind":{"type":"integer"},"apiVersion":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if v := s.Validate([]byte(`{"metadata":{"source":"crm"},"kind":3,"apiVersion":"x"}`)); v != nil {
		t.Fatalf("refused: %v", v)
	}
	if v := s.Validate([]byte(`{"kind":"three"}`)); v == nil || v.Field != "data.kind" {
		t.Fatalf("got %v, want a violation at data.kind", v)
	}
}
