package httpapi

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/catalog"
	"github.com/hookkeeper/hookkeeper/internal/publish"
	"github.com/hookkeeper/hookkeeper/test/fixtures/refusals"
)

// TestSchemaRefusals: a publish refused by its type's schema is 422
// SchemaViolation naming the path and the rule, and neither the answer nor
// the log shows any part of the value, for every kind of rule.
func TestSchemaRefusals(t *testing.T) {
	for _, r := range refusals.Refusals {
		t.Run(r.Name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.Contracts = refusals.Contracts(t, r) })
			rec := e.do(t, req{body: `{"type":"order.created","data":` + r.Data() + `}`})
			got := wantError(t, rec, http.StatusUnprocessableEntity, "SchemaViolation", r.Field)
			if !strings.Contains(got.Message, r.Rule) || !strings.HasSuffix(got.Message, " (the schema of WebhookEventType "+refusals.TypeName+")") {
				t.Errorf("message %q, want …%s… (the schema of WebhookEventType %s)", got.Message, r.Rule, refusals.TypeName)
			}
			if leak := refusals.Leak(rec.Body.String()); leak != "" {
				t.Errorf("the answer shows %q of the value: %s", leak, rec.Body)
			}
			if leak := refusals.Leak(e.logs.String()); leak != "" {
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
	r := refusals.Refusal{Property: `{"type":"string","format":"email"}`, Value: `"` + refusals.Secret + `\u00ad@"`}
	e := newEnv(t, func(c *Config) { c.Contracts = refusals.Contracts(t, r) })
	rec := e.do(t, req{body: `{"type":"order.created","data":` + r.Data() + `}`})
	const want = `{"error":{"code":"SchemaViolation","message":"Invalid value: must be of type email (the schema of WebhookEventType refusals)","field":"data.v"}}` + "\n"
	if rec.Code != http.StatusUnprocessableEntity || rec.Body.String() != want {
		t.Errorf("%d %s, want 422 %s", rec.Code, rec.Body, want)
	}
}

// documentedContracts are the contracts of TestContractRefusalsAsDocumented:
// order.created with a schema, a required secret and validFor 1h;
// order.legacy not Ready; the namespace strict refuses other types.
type documentedContracts struct{ created, legacy *publish.Contract }

func (d documentedContracts) Contract(namespace, typ string) (*publish.Contract, bool, error) {
	switch typ {
	case "order.created":
		return d.created, namespace == "strict", nil
	case "order.legacy":
		return d.legacy, namespace == "strict", nil
	}
	return nil, namespace == "strict", nil
}

// TestContractRefusalsAsDocumented: each of the five contract codes, the
// whole answer, as docs/http-api.md shows it.
func TestContractRefusalsAsDocumented(t *testing.T) {
	schema, err := catalog.Compile([]byte(`{"type":"object","required":["orderID","amount"],"properties":{"orderID":{"type":"string"},"amount":{"type":"number","minimum":0}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, broken := catalog.Compile([]byte(`{"type":"object","properties":{"amount":{}}}`))
	contracts := documentedContracts{
		created: &publish.Contract{Name: "order-created", RequiredSecrets: []string{"confirmToken"}, ValidFor: time.Hour,
			Validate: func(data []byte) (string, string) {
				if v := schema.Validate(data); v != nil {
					return v.Field, v.Message
				}
				return "", ""
			}},
		// As the manager's wiring words a schema that does not compile.
		legacy: &publish.Contract{Name: "order-legacy", NotReady: "SchemaInvalid: " + broken.Error()},
	}
	e := newEnv(t, func(c *Config) { c.Contracts = contracts })
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "http-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ ns, body, answer string }{
		{ns, `{"type":"order.created","data":{"orderID":"o-1","amount":-5},"secrets":{"confirmToken":"t"}}`,
			`{"error":{"code":"SchemaViolation","message":"Invalid value: should be greater than or equal to 0 (the schema of WebhookEventType order-created)","field":"data.amount"}}`},
		{ns, `{"type":"order.created","data":{"orderID":"o-1"},"secrets":{"confirmToken":"t"}}`,
			`{"error":{"code":"SchemaViolation","message":"Required value (the schema of WebhookEventType order-created)","field":"data.amount"}}`},
		{ns, `{"type":"order.created","data":{"orderID":"o-1","amount":5}}`,
			`{"error":{"code":"MissingSecret","message":"event type \"order.created\" requires the secret \"confirmToken\" (WebhookEventType order-created)","field":"secrets.confirmToken"}}`},
		{"strict", `{"type":"order.shipped","data":{"orderID":"o-1"}}`,
			`{"error":{"code":"UnknownEventType","message":"namespace strict accepts only event types that have a WebhookEventType, and none is for \"order.shipped\"","field":"type"}}`},
		{ns, `{"type":"order.legacy","data":{"orderID":"o-1"}}`,
			`{"error":{"code":"EventTypeNotReady","message":"WebhookEventType order-legacy of \"order.legacy\" is not Ready: SchemaInvalid: spec.schema.properties[amount].type: Required value: must not be empty for specified object fields","field":"type"}}`},
		{ns, `{"type":"order.created","data":{"orderID":"o-1","amount":5},"secrets":{"confirmToken":"t"},"validUntil":"2026-11-29T12:00:00Z"}`,
			`{"error":{"code":"ValidUntilTooLate","message":"validUntil may shorten the validFor of event type \"order.created\" (1h0m0s), never lengthen it","field":"validUntil"}}`},
		{ns, `{"type":"order.shipped","data":{"orderID":"o-1"},"validUntil":"2026-11-29T09:59:59Z"}`,
			`{"error":{"code":"ValidUntilTooLate","message":"validUntil has passed: nothing could be delivered","field":"validUntil"}}`},
	} {
		rec := e.do(t, req{path: "/v1/namespaces/" + c.ns + "/events", body: c.body})
		if got := strings.TrimSuffix(rec.Body.String(), "\n"); rec.Code != http.StatusUnprocessableEntity || got != c.answer {
			t.Errorf("%s:\n got %d %s\nwant 422 %s", c.body, rec.Code, got, c.answer)
		}
		if !strings.Contains(string(doc), c.answer) {
			t.Errorf("docs/http-api.md does not show the answer %s", c.answer)
		}
	}
	// A validUntil within validFor is kept.
	if rec := e.do(t, req{body: `{"type":"order.created","data":{"orderID":"o-1","amount":5},"secrets":{"confirmToken":"t"},"validUntil":"2026-11-29T10:30:00Z"}`}); rec.Code != http.StatusCreated {
		t.Errorf("validUntil within validFor: %d %s", rec.Code, rec.Body)
	}
	if p := e.pub.last(); p.ValidUntil == nil || !p.ValidUntil.Equal(testNow.Add(30*time.Minute)) {
		t.Errorf("ValidUntil %v, want 10:30", p.ValidUntil)
	}
}
