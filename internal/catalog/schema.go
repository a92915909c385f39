// Package catalog compiles a WebhookEventType's schema, the dialect of
// CustomResourceDefinition schemas, with the validator the API server uses
// for custom resources (k8s.io/apiextensions-apiserver), so that admins
// write the schemas they already know and a publish is refused for what
// kubectl apply would refuse in a custom resource.
package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Schema is a compiled schema of an event's data; safe for concurrent use.
type Schema struct {
	validator validation.SchemaValidator
	// fast accepts what certainly conforms (fast.go); nil when the
	// schema uses a keyword it does not know.
	fast *fastNode
}

// Compile compiles raw, a JSON schema of the data object. It must be a
// structural schema (every field typed, as in a CRD) of type object. The
// error names the first problem's path under spec.schema.
func Compile(raw []byte) (*Schema, error) {
	var v1 apiextensionsv1.JSONSchemaProps
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v1); err != nil {
		return nil, fmt.Errorf("spec.schema: not an OpenAPI v3 schema: %v", err)
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&v1, &internal, nil); err != nil {
		return nil, fmt.Errorf("spec.schema: %w", err)
	}
	if internal.Type != "object" {
		return nil, errors.New("spec.schema.type: must be object: data is a JSON object")
	}
	// The schema is data's, not a resource's: nested under a root, so
	// that the rules of a CRD's root (metadata, apiVersion and kind
	// constrained) do not apply to it, and violations read "data.…".
	root := apiextensions.JSONSchemaProps{Type: "object", Required: []string{"data"},
		Properties: map[string]apiextensions.JSONSchemaProps{"data": internal}}
	structural, err := structuralschema.NewStructural(&root)
	if err != nil {
		return nil, fmt.Errorf("spec.schema: %s", underSchema(err.Error()))
	}
	if errs := structuralschema.ValidateStructural(nil, structural); len(errs) > 0 {
		return nil, errors.New(underSchema(firstError(errs).Error()))
	}
	validator, _, err := validation.NewSchemaValidator(&root)
	if err != nil {
		return nil, fmt.Errorf("spec.schema: %w", err)
	}
	out := &Schema{validator: validator}
	if fast, ok := compileFast(&internal); ok {
		out.fast = fast
	}
	return out, nil
}

// Violation is the first place data breaks the schema: its path in the
// publish request ("data.amount") and what rule it breaks.
type Violation struct {
	Field   string
	Message string
}

func (v *Violation) Error() string { return v.Field + ": " + v.Message }

// Validate checks data, a JSON object, against s; nil when it conforms.
// The message names the rule, never the value: data may be personal.
func (s *Schema) Validate(data []byte) *Violation {
	var obj any
	if len(data) == 0 {
		data = []byte("{}")
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return &Violation{Field: "data", Message: "not a JSON object"}
	}
	if s.fast != nil && s.fast.ok(obj) {
		return nil
	}
	return s.slow(obj)
}

// slow is the API server's validator: it decides what the fast check
// could not, and words a refusal.
func (s *Schema) slow(obj any) *Violation {
	errs := validation.ValidateCustomResource(nil, map[string]any{"data": obj}, s.validator)
	if len(errs) == 0 {
		return nil
	}
	e := errs[0]
	return &Violation{Field: e.Field, Message: ruleOf(e)}
}

// ruleOf is a field error's text without its value: kube-openapi's
// details quote the value they refuse (a format error ends with `:
// "<value>"`), which may be personal data.
func ruleOf(e *field.Error) string {
	msg := e.Type.String()
	detail := e.Detail
	if v, ok := e.BadValue.(string); ok && v != "" {
		detail = strings.ReplaceAll(detail, strconvQuote(v), "(value not shown)")
		detail = strings.ReplaceAll(detail, v, "(value not shown)")
	}
	if detail != "" {
		msg += ": " + detail
	}
	return msg
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// underSchema names a path of the nested schema as the user wrote it.
func underSchema(msg string) string {
	msg = strings.ReplaceAll(msg, "properties[data].", "spec.schema.")
	return strings.ReplaceAll(msg, "properties[data]", "spec.schema")
}

func firstError(errs field.ErrorList) error {
	msg := errs[0].Error()
	if len(errs) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(errs)-1)
	}
	return errors.New(msg)
}
