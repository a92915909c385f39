package main

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// exampleDepth bounds how deep the example nests what the schema leaves
// optional (the data object is at depth 0): nothing optional is made
// deeper, so an object there has only its required properties and an
// array only its minItems items. A CRD schema has no $ref, so required
// properties alone always end.
const exampleDepth = 6

// exampleData is a value of the data schema s for the catalog's example
// publish body, a pure function of s: the schema's example, else its
// default, else its first enum value, else a value of its type that meets
// its format, bounds and lengths; every property of an object (required
// and optional), one item of an array. Patterns are met when one of a few
// plain candidates matches (best effort); allOf, anyOf, oneOf and not are
// not read.
func exampleData(s *apiextensionsv1.JSONSchemaProps) any { return exampleValue(s, 0) }

func exampleValue(s *apiextensionsv1.JSONSchemaProps, depth int) any {
	for _, raw := range []*apiextensionsv1.JSON{s.Example, s.Default, firstEnum(s)} {
		if v, ok := rawValue(raw); ok {
			return v
		}
	}
	if s.XIntOrString {
		return exampleInteger(s)
	}
	switch s.Type {
	case "object":
		return exampleObject(s, depth)
	case "array":
		return exampleArray(s, depth)
	case "string":
		return exampleString(s)
	case "integer":
		return exampleInteger(s)
	case "number":
		return exampleNumber(s)
	case "boolean":
		return true
	}
	// No type: x-kubernetes-preserve-unknown-fields, which takes anything.
	return map[string]any{}
}

func firstEnum(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSON {
	if len(s.Enum) == 0 {
		return nil
	}
	return &s.Enum[0]
}

// rawValue decodes a schema's literal (example, default, enum value).
func rawValue(raw *apiextensionsv1.JSON) (any, bool) {
	if raw == nil || len(raw.Raw) == 0 {
		return nil, false
	}
	var v any
	if err := json.Unmarshal(raw.Raw, &v); err != nil {
		return nil, false
	}
	return v, true
}

func exampleObject(s *apiextensionsv1.JSONSchemaProps, depth int) map[string]any {
	out := map[string]any{}
	for name, p := range s.Properties {
		if depth >= exampleDepth && !slices.Contains(s.Required, name) {
			continue
		}
		out[name] = exampleValue(&p, depth+1)
	}
	// A map (additionalProperties with a schema): one entry, or as many
	// as minProperties asks.
	if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil {
		n := 1
		if depth >= exampleDepth {
			n = 0
		}
		if s.MinProperties != nil && int(*s.MinProperties) > len(out)+n {
			n = int(*s.MinProperties) - len(out)
		}
		for i := range n {
			key := "key"
			if i > 0 {
				key = fmt.Sprintf("key%d", i+1)
			}
			out[key] = exampleValue(ap.Schema, depth+1)
		}
	}
	if s.XEmbeddedResource {
		// An embedded object needs apiVersion, kind and a name.
		for k, v := range map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "example"}} {
			if _, ok := out[k]; !ok {
				out[k] = v
			}
		}
	}
	return out
}

func exampleArray(s *apiextensionsv1.JSONSchemaProps, depth int) []any {
	n := 1
	if depth >= exampleDepth {
		n = 0
	}
	if s.MinItems != nil && int(*s.MinItems) > n {
		n = int(*s.MinItems)
	}
	if s.MaxItems != nil && int(*s.MaxItems) < n {
		n = int(*s.MaxItems)
	}
	out := []any{}
	if s.Items == nil || s.Items.Schema == nil {
		return out
	}
	for range n {
		out = append(out, exampleValue(s.Items.Schema, depth+1))
	}
	return out
}

// formatExamples are values of the string formats CRD schemas validate
// (k8s.io/apiextensions-apiserver's supported formats, named without
// dashes as go-openapi normalises them).
var formatExamples = map[string]string{
	"bsonobjectid":   "5f2b6c1e9d3e4a0012345678",
	"uri":            "https://example.com/orders/42",
	"email":          "user@example.com",
	"hostname":       "example.com",
	"ipv4":           "192.0.2.1",
	"ipv6":           "2001:db8::1",
	"cidr":           "192.0.2.0/24",
	"mac":            "00:00:5e:00:53:01",
	"uuid":           "3f1c5b3e-8d2a-4c6b-9f1e-2a7d4b8c9e01",
	"uuid3":          "a3bb189e-8bf9-3888-9912-ace4e6543002",
	"uuid4":          "3f1c5b3e-8d2a-4c6b-9f1e-2a7d4b8c9e01",
	"uuid5":          "886313e1-3b8a-5372-9b90-0c9aee199e5d",
	"isbn":           "0321751043",
	"isbn10":         "0321751043",
	"isbn13":         "978-0321751041",
	"creditcard":     "4111111111111111",
	"ssn":            "123-45-6789",
	"hexcolor":       "#ff8800",
	"rgbcolor":       "rgb(255,136,0)",
	"byte":           "ZXhhbXBsZQ==",
	"password":       "example",
	"date":           "2026-01-02",
	"duration":       "30s",
	"datetime":       "2026-01-02T15:04:05Z",
	"k8s-short-name": "example",
	"k8s-long-name":  "example.com",
}

// stringCandidates are tried in turn against a pattern; the first that
// matches (padded or cut to the lengths) is the example.
var stringCandidates = []string{"example", "Example", "EXAMPLE", "example-1", "example_1", "abc", "ABC", "12345", "a1", "A1", "a", "A", "0"}

func exampleString(s *apiextensionsv1.JSONSchemaProps) string {
	if v, ok := formatExamples[strings.ReplaceAll(s.Format, "-", "")]; ok {
		return fitLength(v, s)
	}
	if v, ok := formatExamples[s.Format]; ok {
		return fitLength(v, s)
	}
	if s.Pattern != "" {
		if re, err := regexp.Compile(s.Pattern); err == nil {
			for _, c := range stringCandidates {
				if v := fitLength(c, s); re.MatchString(v) {
					return v
				}
			}
		}
	}
	return fitLength(stringCandidates[0], s)
}

// fitLength pads v with its last character up to minLength, or cuts it to
// maxLength (both count characters, as the validator does).
func fitLength(v string, s *apiextensionsv1.JSONSchemaProps) string {
	r := []rune(v)
	if s.MinLength != nil && int64(len(r)) < *s.MinLength {
		last := r[len(r)-1]
		for int64(len(r)) < *s.MinLength {
			r = append(r, last)
		}
	}
	if s.MaxLength != nil && int64(len(r)) > *s.MaxLength {
		r = r[:*s.MaxLength]
	}
	return string(r)
}

func exampleInteger(s *apiextensionsv1.JSONSchemaProps) int64 {
	v := exampleNumeric(s, 1, true)
	return int64(v)
}

func exampleNumber(s *apiextensionsv1.JSONSchemaProps) float64 {
	return exampleNumeric(s, 1.5, false)
}

// exampleNumeric is the first of a few candidates (start, the bounds,
// one inside each, their middle; each rounded to multipleOf, to an
// integer when integer) that meets the bounds; start when none does.
func exampleNumeric(s *apiextensionsv1.JSONSchemaProps, start float64, integer bool) float64 {
	lo, hi := math.Inf(-1), math.Inf(1)
	if s.Minimum != nil {
		lo = *s.Minimum
	}
	if s.Maximum != nil {
		hi = *s.Maximum
	}
	fits := func(x float64) bool {
		if integer && x != math.Trunc(x) || math.IsInf(x, 0) || math.IsNaN(x) {
			return false
		}
		if x < lo || s.ExclusiveMinimum && x == lo || x > hi || s.ExclusiveMaximum && x == hi {
			return false
		}
		if m := s.MultipleOf; m != nil && *m > 0 {
			q := x / *m
			return math.Abs(q-math.Round(q)) < 1e-9
		}
		return true
	}
	bases := []float64{start, lo, lo + 1, hi, hi - 1, (lo + hi) / 2, math.Ceil(lo), math.Floor(hi)}
	for _, b := range bases {
		cands := []float64{b}
		if integer {
			cands = append(cands, math.Ceil(b), math.Floor(b))
		}
		if m := s.MultipleOf; m != nil && *m > 0 {
			var more []float64
			for _, c := range cands {
				more = append(more, math.Ceil(c / *m)**m, math.Floor(c / *m)**m)
			}
			cands = append(cands, more...)
		}
		for _, c := range cands {
			if fits(c) {
				return c
			}
		}
	}
	return start
}
