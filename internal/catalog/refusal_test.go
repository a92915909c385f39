package catalog_test

import (
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/hookkeeper/hookkeeper/internal/catalog"
	"github.com/hookkeeper/hookkeeper/test/fixtures/refusals"
)

// TestRefusalsNameThePathAndTheRuleNeverTheValue: for every kind of rule
// a schema refuses data by, the refusal names the path and the rule, and
// no part of the value.
func TestRefusalsNameThePathAndTheRuleNeverTheValue(t *testing.T) {
	for _, r := range refusals.Refusals {
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
			if leak := refusals.Leak(text); leak != "" {
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

// TestRefusalsCoverEveryFormat: refusals.Formats are formats the API
// server validates (a format it does not know is not checked at all).
func TestRefusalsCoverEveryFormat(t *testing.T) {
	for _, f := range refusals.Formats {
		s := &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}, Format: f}}
		if u := validation.GetUnrecognizedFormats(s, environment.DefaultCompatibilityVersion()); len(u) > 0 {
			t.Errorf("format %s is not validated", f)
		}
	}
}
