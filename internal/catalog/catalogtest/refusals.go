// Package catalogtest holds the refusals every door of a publish is tested
// with: one case per kind of rule by which a WebhookEventType's schema can
// refuse data, each carrying Secret in the data it refuses. A refusal
// names the path and the rule; Leak tells whether it shows any part of the
// value.
package catalogtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/catalog"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// Secret is in every refused value: a card number, as data may carry one.
const Secret = "4111111111111111"

// Refusal is data one schema refuses.
type Refusal struct {
	Name string
	// Schema is the WebhookEventType's schema: an object with the
	// property v, whose schema is Property.
	Property string
	// Value is v's value in the data (JSON), and carries Secret.
	Value string
	// Field is the path of the refusal; Rule is in its message.
	Field, Rule string
}

// Schema is the whole schema of r's data.
func (r Refusal) Schema() string {
	return `{"type":"object","properties":{"v":` + r.Property + `}}`
}

// Data is r's data object.
func (r Refusal) Data() string { return `{"v":` + r.Value + `}` }

// Formats are the formats a CRD schema validates strings by
// (k8s.io/apiextensions-apiserver's supported formats), with a name each is
// also written with. "password" refuses nothing.
var Formats = []string{
	"bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac",
	"uuid", "uuid3", "uuid4", "uuid5", "isbn", "isbn10", "isbn13", "creditcard", "ssn",
	"hexcolor", "rgbcolor", "byte", "date", "duration", "datetime", "date-time",
	"k8s-short-name", "k8s-long-name",
}

// badString breaks every format but creditcard, every pattern below and
// every length: it ends with a soft hyphen, which %q escapes and JSON does
// not, and an @.
const badString = `"` + Secret + `\u00ad@"`

// Refusals are the cases, one per rule.
var Refusals = func() []Refusal {
	rs := []Refusal{
		{"type integer, a string", `{"type":"integer"}`, `"` + Secret + `"`, "data.v", "must be of type integer"},
		{"type number, a string", `{"type":"number"}`, badString, "data.v", "must be of type number"},
		{"type boolean, a string", `{"type":"boolean"}`, `"` + Secret + `"`, "data.v", "must be of type boolean"},
		{"type string, a number", `{"type":"string"}`, Secret, "data.v", "must be of type string"},
		{"type object, a string", `{"type":"object"}`, `"` + Secret + `"`, "data.v", "must be of type object"},
		{"type array, a string", `{"type":"array","items":{"type":"string"}}`, `"` + Secret + `"`, "data.v", "must be of type array"},
		{"type integer, a fraction", `{"type":"integer"}`, Secret + ".5", "data.v", "must be of type integer"},
		{"int-or-string, an object", `{"x-kubernetes-int-or-string":true}`, `{"k":"` + Secret + `"}`, "data.v", "must be of type integer,string"},
		{"integer format int32", `{"type":"integer","format":"int32"}`, Secret, "data.v", "must be of type integer with format int32"},
		{"number format float", `{"type":"number","format":"float"}`, Secret + "e280", "data.v", "must be of type number with format float"},
		{"pattern", `{"type":"string","pattern":"^[a-z]+$"}`, `"` + Secret + `"`, "data.v", "should match '^[a-z]+$'"},
		{"enum of strings", `{"type":"string","enum":["EUR","USD"]}`, badString, "data.v", `Unsupported value: supported values: "EUR", "USD"`},
		{"enum of integers", `{"type":"integer","enum":[1,2]}`, Secret, "data.v", `supported values: "1", "2"`},
		{"minimum", `{"type":"integer","minimum":5}`, "-" + Secret, "data.v", "should be greater than or equal to 5"},
		{"maximum", `{"type":"number","maximum":5}`, Secret + ".5", "data.v", "should be less than or equal to 5"},
		{"exclusiveMinimum", `{"type":"number","minimum":5,"exclusiveMinimum":true}`, "-" + Secret + ".25", "data.v", "should be greater than 5"},
		{"exclusiveMaximum", `{"type":"integer","maximum":5,"exclusiveMaximum":true}`, Secret, "data.v", "should be less than 5"},
		{"integer maximum beyond int64", `{"type":"integer","maximum":1e19}`, Secret, "data.v", "maximum is not of type integer"},
		{"multipleOf", `{"type":"integer","multipleOf":7}`, Secret, "data.v", "should be a multiple of 7"},
		{"multipleOf of a number", `{"type":"number","multipleOf":0.3}`, "0." + Secret, "data.v", "should be a multiple of 0.3"},
		{"maxLength", `{"type":"string","maxLength":3}`, badString, "data.v", "Too long: may not be more than 3"},
		{"minLength", `{"type":"string","minLength":40}`, badString, "data.v", "should be at least 40 chars long"},
		{"maxItems", `{"type":"array","items":{"type":"string"},"maxItems":1}`, `["` + Secret + `","` + Secret + `"]`, "data.v", "Too many: must have at most 1 items"},
		{"minItems", `{"type":"array","items":{"type":"string"},"minItems":3}`, `["` + Secret + `"]`, "data.v", "should have at least 3 items"},
		{"uniqueItems", `{"type":"array","items":{"type":"string"},"uniqueItems":true}`, `["` + Secret + `","` + Secret + `"]`, "data.v", "shouldn't contain duplicates"},
		{"maxProperties", `{"type":"object","additionalProperties":{"type":"string"},"maxProperties":1}`, `{"a":"` + Secret + `","b":"` + Secret + `"}`, "data.v", "Too many: must have at most 1 properties"},
		{"minProperties", `{"type":"object","additionalProperties":{"type":"string"},"minProperties":3}`, `{"a":"` + Secret + `"}`, "data.v", "should have at least 3 properties"},
		{"required", `{"type":"object","required":["id"],"properties":{"id":{"type":"string"},"note":{"type":"string"}}}`, `{"note":"` + Secret + `"}`, "data.v.id", "Required value"},
		{"nullable false", `{"type":"string"}`, `null`, "data.v", "must be of type string"},
		{"additionalProperties false", `{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":false}`, `{"extra":"` + Secret + `"}`, "data.v.extra", "is a forbidden property"},
		{"additionalProperties schema", `{"type":"object","additionalProperties":{"type":"integer"}}`, `{"k":"` + Secret + `"}`, "data.v.k", "must be of type integer"},
		{"nested path", `{"type":"object","properties":{"card":{"type":"object","properties":{"number":{"type":"string","pattern":"^x"}}}}}`, `{"card":{"number":"` + Secret + `"}}`, "data.v.card.number", "should match '^x'"},
		{"array items", `{"type":"array","items":{"type":"string","format":"email"}}`, `["ok@example.com",` + badString + `]`, "data.v[1]", "must be of type email"},
		{"array of objects", `{"type":"array","items":{"type":"object","properties":{"n":{"type":"integer","maximum":9}}}}`, `[{"n":1},{"n":` + Secret + `}]`, "data.v[1].n", "should be less than or equal to 9"},
		{"anyOf", `{"type":"string","anyOf":[{"pattern":"^a"},{"pattern":"^b"}]}`, `"` + Secret + `"`, "data.v", "must validate at least one schema (anyOf)"},
		{"oneOf", `{"type":"string","oneOf":[{"pattern":"^a"},{"pattern":"^b"}]}`, `"` + Secret + `"`, "data.v", "must validate one and only one schema (oneOf)"},
		{"allOf: the first schema it fails", `{"type":"string","allOf":[{"pattern":"^4"},{"maxLength":2}]}`, `"` + Secret + `"`, "data.v", "Too long: may not be more than 2"},
		{"not", `{"type":"string","not":{"pattern":"^4"}}`, `"` + Secret + `"`, "data.v", "must not validate the schema (not)"},
	}
	for _, f := range Formats {
		bad := badString
		if f == "creditcard" {
			// Its check ignores what is not a digit: one digit too many.
			bad = `"` + Secret + `0"`
		}
		rs = append(rs, Refusal{"format " + f, fmt.Sprintf(`{"type":"string","format":%q}`, f), bad, "data.v", "must be of type " + f})
	}
	return rs
}()

// Leak is the part of Secret that text shows, "" when none: any six of its
// characters in a row, whatever the quoting around them.
func Leak(text string) string {
	const run = 6
	for i := 0; i+run <= len(Secret); i++ {
		if strings.Contains(text, Secret[i:i+run]) {
			return Secret[i : i+run]
		}
	}
	return ""
}

// TypeName is the name of the WebhookEventType Contracts answers.
const TypeName = "refusals"

// Contracts holds every event type to r's schema, as the manager's wiring
// holds a type to its WebhookEventType's (controllers.EventTypeContracts).
func Contracts(t testing.TB, r Refusal) publish.Contracts {
	t.Helper()
	s, err := catalog.Compile([]byte(r.Schema()))
	if err != nil {
		t.Fatalf("%s: %v", r.Name, err)
	}
	return contracts{&publish.Contract{Name: TypeName, Generation: 1, Validate: func(data []byte) (string, string) {
		if v := s.Validate(data); v != nil {
			return v.Field, v.Message
		}
		return "", ""
	}}}
}

type contracts struct{ c *publish.Contract }

func (c contracts) Contract(_, _ string) (*publish.Contract, bool, error) { return c.c, false, nil }
