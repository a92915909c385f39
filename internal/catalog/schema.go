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
	utiljson "k8s.io/apimachinery/pkg/util/json"
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
// publish request ("data.amount") and what rule it breaks, worded as the
// body of a Kubernetes field error without the value ("Invalid value:
// should be greater than or equal to 0", "Required value"; refusal.go).
type Violation struct {
	Field   string
	Message string
}

func (v *Violation) Error() string { return v.Field + ": " + v.Message }

// Validate checks data, a JSON object, against s; nil when it conforms.
// The message names the rule, never the value: data may be personal.
//
// Numbers are read as the API server reads a custom resource
// (k8s.io/apimachinery/pkg/util/json): an integer that fits in 64 bits is
// an int64, exactly, and any other number a float64.
func (s *Schema) Validate(data []byte) *Violation {
	var obj any
	if len(data) == 0 {
		data = []byte("{}")
	}
	if err := utiljson.Unmarshal(data, &obj); err != nil {
		// The publish core passes only a JSON object: what is left is a
		// number beyond a float64 (1e400), which the API server cannot
		// read either. The decoder's error quotes the number.
		return &Violation{Field: "data", Message: body(field.ErrorTypeInvalid, "not a JSON object whose numbers fit in a 64-bit float")}
	}
	if s.fast != nil && s.fast.ok(obj) {
		return nil
	}
	return s.slow(obj)
}

// slow is the API server's validator: it decides what the fast check
// could not, and words a refusal (refusal.go).
func (s *Schema) slow(obj any) *Violation {
	res := s.validator.Validate(map[string]any{"data": obj})
	if res.IsValid() {
		return nil
	}
	return violationOf(res.Errors[0])
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
