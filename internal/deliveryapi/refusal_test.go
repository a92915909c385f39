package deliveryapi

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/publish"
	"github.com/hookkeeper/hookkeeper/test/fixtures/refusals"
)

// twice is a field error's type said twice ("Invalid value: Invalid
// value: …").
var twice = regexp.MustCompile(`(Invalid value|Required value|Unsupported value|Too long|Too many): (Invalid value|Required value|Unsupported value|Too long|Too many)`)

// TestSchemaRefusals: a create refused by its type's schema is 422 Invalid
// at the field under spec, worded once (kubectl prints the status's
// message), with the rule and no part of the value, for every kind of rule.
func TestSchemaRefusals(t *testing.T) {
	for _, r := range refusals.Refusals {
		t.Run(r.Name, func(t *testing.T) {
			core, err := publish.New(publish.Config{Committer: fixedOutcome{}, Contracts: refusals.Contracts(t, r)})
			if err != nil {
				t.Fatal(err)
			}
			spec := v1alpha1.WebhookEventSpec{Type: "order.created", Data: &runtime.RawExtension{Raw: []byte(r.Data())}}
			st := refusedStatus(t, core, "shop", &spec)
			wire, _ := json.Marshal(st)
			if leak := refusals.Leak(string(wire)); leak != "" {
				t.Errorf("the status shows %q of the value: %s", leak, wire)
			}
			if st.Code != http.StatusUnprocessableEntity || st.Details == nil || len(st.Details.Causes) != 1 {
				t.Fatalf("status %d, details %+v: want 422 and one cause", st.Code, st.Details)
			}
			cause := st.Details.Causes[0]
			field := "spec." + r.Field
			if cause.Field != field || !strings.Contains(cause.Message, r.Rule) ||
				!strings.HasSuffix(cause.Message, " (the schema of WebhookEventType "+refusals.TypeName+") (SchemaViolation)") {
				t.Errorf("cause %s: %q, want %s: …%s… (the schema of …) (SchemaViolation)", cause.Field, cause.Message, field, r.Rule)
			}
			if want := `WebhookEvent.delivery.hookkeeper.dev "" is invalid: ` + field + ": " + cause.Message; st.Message != want {
				t.Errorf("message %q, want %q", st.Message, want)
			}
			if twice.MatchString(st.Message) {
				t.Errorf("message %q says its type twice", st.Message)
			}
		})
	}
}

// TestSchemaRefusalAsKubectlPrintsIt: one refusal, whole, as the status
// kubectl create prints ("Error from server (Invalid): " + the message).
func TestSchemaRefusalAsKubectlPrintsIt(t *testing.T) {
	r := refusals.Refusal{Property: `{"type":"string","format":"email"}`, Value: `"` + refusals.Secret + `\u00ad@"`}
	core, err := publish.New(publish.Config{Committer: fixedOutcome{}, Contracts: refusals.Contracts(t, r)})
	if err != nil {
		t.Fatal(err)
	}
	spec := v1alpha1.WebhookEventSpec{Type: "order.created", Data: &runtime.RawExtension{Raw: []byte(r.Data())}}
	_, err = core.Publish(t.Context(), publishRequest("shop", &spec))
	const want = `WebhookEvent.delivery.hookkeeper.dev "" is invalid: spec.data.v: Invalid value: must be of type email (the schema of WebhookEventType refusals) (SchemaViolation)`
	if got := publishError(err).Error(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestSchemaFieldError: a refusal as a field error says its type once.
func TestSchemaFieldError(t *testing.T) {
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
		e := schemaFieldError(path, c.message)
		if e.Type != c.typ || e.Error() != c.want {
			t.Errorf("%q: %s %q, want %s %q", c.message, e.Type, e.Error(), c.typ, c.want)
		}
	}
}
