package catalog_test

import (
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/hookkeeper/hookkeeper/internal/catalog"
	"github.com/hookkeeper/hookkeeper/internal/catalog/catalogtest"
)

// TestRefusalsNameThePathAndTheRuleNeverTheValue: for every kind of rule
// a schema refuses data by, the refusal names the path and the rule, and
// no part of the value.
func TestRefusalsNameThePathAndTheRuleNeverTheValue(t *testing.T) {
	for _, r := range catalogtest.Refusals {
		t.Run(r.Name, func(t *testing.T) {
			s, err := catalog.Compile([]byte(r.Schema()))
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			v := s.Validate([]byte(r.Data()))
			if v == nil {
				t.Fatalf("%s accepted", r.Data())
			}
			text := v.Error()
			if leak := catalogtest.Leak(text); leak != "" {
				t.Errorf("the refusal %q shows %q of the value", text, leak)
			}
			if v.Field != r.Field || !strings.Contains(v.Message, r.Rule) {
				t.Errorf("refused %s: %q, want %s: …%s…", v.Field, v.Message, r.Field, r.Rule)
			}
			if strings.Contains(v.Message, v.Field+" ") {
				t.Errorf("the message %q repeats the path", v.Message)
			}
		})
	}
}

// TestRefusalsCoverEveryFormat: catalogtest.Formats are formats the API
// server validates (a format it does not know is not checked at all).
func TestRefusalsCoverEveryFormat(t *testing.T) {
	for _, f := range catalogtest.Formats {
		s := &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}, Format: f}}
		if u := validation.GetUnrecognizedFormats(s, environment.DefaultCompatibilityVersion()); len(u) > 0 {
			t.Errorf("format %s is not validated", f)
		}
	}
}

// TestFieldError: a refusal as a field error says its type once.
func TestFieldError(t *testing.T) {
	path := field.NewPath("spec", "data", "v")
	for _, c := range []struct {
		message string
		typ     field.ErrorType
		want    string
	}{
		{"Invalid value: should match '^a' (x)", field.ErrorTypeInvalid, "spec.data.v: Invalid value: should match '^a' (x)"},
		{"Required value (x)", field.ErrorTypeRequired, "spec.data.v: Required value: (x)"},
		{"Required value", field.ErrorTypeRequired, "spec.data.v: Required value"},
		{`Unsupported value: supported values: "EUR"`, field.ErrorTypeNotSupported, `spec.data.v: Unsupported value: supported values: "EUR"`},
		{"Too long: may not be more than 3 bytes", field.ErrorTypeTooLong, "spec.data.v: Too long: may not be more than 3 bytes"},
		{"Too many: must have at most 1 items", field.ErrorTypeTooMany, "spec.data.v: Too many: must have at most 1 items"},
		{"Invalid values everywhere", field.ErrorTypeInvalid, "spec.data.v: Invalid value: Invalid values everywhere"},
		{"event type requires a secret", field.ErrorTypeInvalid, "spec.data.v: Invalid value: event type requires a secret"},
	} {
		e := catalog.FieldError(path, c.message)
		if e.Type != c.typ || e.Error() != c.want {
			t.Errorf("%q: %s %q, want %s %q", c.message, e.Type, e.Error(), c.typ, c.want)
		}
	}
}
