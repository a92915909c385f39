package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/catalog/catalogtest"
)

// TestSchemaRefusals: a publish refused by its type's schema is 422
// SchemaViolation naming the path and the rule, and neither the answer nor
// the log shows any part of the value, for every kind of rule.
func TestSchemaRefusals(t *testing.T) {
	for _, r := range catalogtest.Refusals {
		t.Run(r.Name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.Contracts = catalogtest.Contracts(t, r) })
			rec := e.do(t, req{body: `{"type":"order.created","data":` + r.Data() + `}`})
			got := wantError(t, rec, http.StatusUnprocessableEntity, "SchemaViolation", r.Field)
			if !strings.Contains(got.Message, r.Rule) || !strings.HasSuffix(got.Message, " (the schema of WebhookEventType "+catalogtest.TypeName+")") {
				t.Errorf("message %q, want …%s… (the schema of WebhookEventType %s)", got.Message, r.Rule, catalogtest.TypeName)
			}
			if leak := catalogtest.Leak(rec.Body.String()); leak != "" {
				t.Errorf("the answer shows %q of the value: %s", leak, rec.Body)
			}
			if leak := catalogtest.Leak(e.logs.String()); leak != "" {
				t.Errorf("the log shows %q of the value: %s", leak, e.logs)
			}
			if len(e.pub.published) != 0 {
				t.Error("a refused event reached the ledger")
			}
		})
	}
}

// TestSchemaRefusalWhole: one refusal, the whole answer.
func TestSchemaRefusalWhole(t *testing.T) {
	r := catalogtest.Refusal{Property: `{"type":"string","format":"email"}`, Value: `"` + catalogtest.Secret + `\u00ad@"`}
	e := newEnv(t, func(c *Config) { c.Contracts = catalogtest.Contracts(t, r) })
	rec := e.do(t, req{body: `{"type":"order.created","data":` + r.Data() + `}`})
	const want = `{"error":{"code":"SchemaViolation","message":"Invalid value: must be of type email (the schema of WebhookEventType refusals)","field":"data.v"}}` + "\n"
	if rec.Code != http.StatusUnprocessableEntity || rec.Body.String() != want {
		t.Errorf("%d %s, want 422 %s", rec.Code, rec.Body, want)
	}
}
