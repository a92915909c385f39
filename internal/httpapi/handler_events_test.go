package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

const validBody = `{"type":"order.created","data":{"order":42}}`

func TestPublishCreated(t *testing.T) {
	e := newEnv(t)
	rec := e.do(t, req{body: `{"type":"fan.confirmation_requested","data":{"email":"a@example.com","n":12345678901234567890},
		"secrets":{"token":"s3cr3t-tok","code":"123456"},"reissueOf":"evt_01hzzzzzzzzzzzzzzzzzzzzzzz"}`,
		headers: map[string]string{"Idempotency-Key": "order-42"}})
	if rec.Code != http.StatusCreated {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	a := decode[PublishAnswer](t, rec)
	p := e.pub.last()
	want := PublishAnswer{
		ID: p.ID, Namespace: ns, Type: "fan.confirmation_requested", Timestamp: testNow,
		ReissueOf: "evt_01hzzzzzzzzzzzzzzzzzzzzzzz", SecretNames: []string{"code", "token"},
	}
	if a.ID != want.ID || a.Namespace != want.Namespace || a.Type != want.Type || !a.Timestamp.Equal(want.Timestamp) ||
		a.ReissueOf != want.ReissueOf || !slices.Equal(a.SecretNames, want.SecretNames) {
		t.Errorf("answer = %+v, want %+v", a, want)
	}
	if len(a.Deliveries) != 2 || a.Deliveries[0].Endpoint != "billing" || a.Deliveries[1].Endpoint != "audit" ||
		a.Deliveries[0].State != ledger.StateScheduled || !strings.HasPrefix(a.Deliveries[0].ID, "dlv_") {
		t.Errorf("deliveries = %+v, want billing and audit by name, scheduled", a.Deliveries)
	}
	if loc := rec.Header().Get("Location"); loc != "/v1/namespaces/shop/events/"+p.ID {
		t.Errorf("Location = %q", loc)
	}
	if rec.Header().Get(ReplayedHeader) != "" {
		t.Error("a first publish is not a replay")
	}
	for _, s := range []string{"s3cr3t-tok", "123456", "a@example.com"} {
		if strings.Contains(rec.Body.String(), s) {
			t.Errorf("answer contains %q: neither data nor secrets are echoed", s)
		}
	}

	// What reached the publisher.
	if !publish.ValidID("evt", p.ID) || p.Namespace != ns || !p.Now.Equal(testNow) || p.IdempotencyKey != "order-42" {
		t.Errorf("params = %+v", p)
	}
	if got := string(p.Data); got != `{"email":"a@example.com","n":12345678901234567890}` {
		t.Errorf("Data = %s, want canonical with the big number intact", got)
	}
	if got := string(p.Secrets.Reveal()); got != `{"code":"123456","token":"s3cr3t-tok"}` {
		t.Errorf("Secrets = %s, want the canonical object", got)
	}
	if !slices.Equal(p.SecretNames, []string{"code", "token"}) || len(p.BodyHash) != 32 {
		t.Errorf("SecretNames %v, BodyHash %x", p.SecretNames, p.BodyHash)
	}
}

func TestPublishWithoutSecretsOrDeliveries(t *testing.T) {
	e := newEnv(t)
	rec := e.do(t, req{path: "/v1/namespaces/quiet/events", body: validBody})
	if rec.Code != http.StatusCreated {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	// Empty lists are [] (never null), and no reissueOf key at all.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	if string(raw["secretNames"]) != "[]" || string(raw["deliveries"]) != "[]" {
		t.Errorf("secretNames %s, deliveries %s; want []", raw["secretNames"], raw["deliveries"])
	}
	if _, ok := raw["reissueOf"]; ok {
		t.Error("reissueOf present without a reissue")
	}
	if p := e.pub.last(); p.Secrets != nil || p.SecretNames != nil || p.IdempotencyKey != "" {
		t.Errorf("params = %+v", p)
	}
}

func TestPublishRefusals(t *testing.T) {
	deep := strings.Repeat(`{"a":`, publish.MaxJSONDepth) + "1" + strings.Repeat("}", publish.MaxJSONDepth)
	tooMany := `{"type":"a","data":{},"secrets":{"a":1,"b":2,"c":3}}`
	tests := []struct {
		name   string
		r      req
		cfg    func(*Config)
		status int
		code   Code
		field  string
	}{
		// Authentication, namespace, authorization.
		{"no token", req{body: validBody, headers: map[string]string{"Authorization": ""}}, nil, 401, CodeUnauthenticated, ""},
		{"unknown token", req{body: validBody, headers: map[string]string{"Authorization": "Bearer nope"}}, nil, 401, CodeUnauthenticated, ""},
		{"basic auth", req{body: validBody, headers: map[string]string{"Authorization": "Basic " + goodToken}}, nil, 401, CodeUnauthenticated, ""},
		{"bad namespace", req{path: "/v1/namespaces/Shop_1/events", body: validBody}, nil, 400, CodeInvalidField, "namespace"},
		{"namespace too long", req{path: "/v1/namespaces/" + strings.Repeat("a", 64) + "/events", body: validBody}, nil, 400, CodeInvalidField, "namespace"},
		// Media type, size.
		{"no content type", req{body: validBody, headers: map[string]string{"Content-Type": ""}}, nil, 415, CodeUnsupportedMediaType, "Content-Type"},
		{"text/plain", req{body: validBody, headers: map[string]string{"Content-Type": "text/plain"}}, nil, 415, CodeUnsupportedMediaType, "Content-Type"},
		{"latin1", req{body: validBody, headers: map[string]string{"Content-Type": "application/json; charset=iso-8859-1"}}, nil, 415, CodeUnsupportedMediaType, "Content-Type"},
		{"too large", req{body: `{"type":"a","data":{"x":"` + strings.Repeat("x", 300) + `"}}`}, func(c *Config) { c.MaxBodyBytes = 256 }, 413, CodeBodyTooLarge, ""},
		// JSON structure.
		{"empty body", req{body: ""}, nil, 400, CodeInvalidJSON, ""},
		{"whitespace body", req{body: " \n "}, nil, 400, CodeInvalidJSON, ""},
		{"malformed", req{body: `{"type":`}, nil, 400, CodeInvalidJSON, ""},
		{"trailing comma", req{body: `{"type":"a","data":{},}`}, nil, 400, CodeInvalidJSON, ""},
		{"array", req{body: `[` + validBody + `]`}, nil, 400, CodeInvalidJSON, ""},
		{"string", req{body: `"hello"`}, nil, 400, CodeInvalidJSON, ""},
		{"trailing object", req{body: validBody + `{}`}, nil, 400, CodeInvalidJSON, ""},
		{"trailing garbage", req{body: validBody + ` x`}, nil, 400, CodeInvalidJSON, ""},
		{"duplicate key", req{body: `{"type":"a","type":"b","data":{}}`}, nil, 400, CodeInvalidJSON, "type"},
		{"nested duplicate key", req{body: `{"type":"a","data":{"x":[{"k":1,"k":2}]}}`}, nil, 400, CodeInvalidJSON, "data.x[0].k"},
		{"invalid UTF-8", req{body: "{\"type\":\"a\",\"data\":{\"x\":\"\xff\"}}"}, nil, 400, CodeInvalidJSON, ""},
		{"too deep", req{body: `{"type":"a","data":` + deep + `}`}, nil, 400, CodeInvalidJSON, "data" + strings.Repeat(".a", publish.MaxJSONDepth-1)},
		// Fields.
		{"unknown field", req{body: `{"type":"a","data":{},"extra":1}`}, nil, 400, CodeUnknownField, "extra"},
		{"field names are case-sensitive", req{body: `{"Type":"a","data":{}}`}, nil, 400, CodeUnknownField, "Type"},
		{"type missing", req{body: `{"data":{}}`}, nil, 400, CodeInvalidField, "type"},
		{"type not a string", req{body: `{"type":7,"data":{}}`}, nil, 400, CodeInvalidField, "type"},
		{"type invalid", req{body: `{"type":"order created","data":{}}`}, nil, 400, CodeInvalidField, "type"},
		{"data missing", req{body: `{"type":"a"}`}, nil, 400, CodeInvalidField, "data"},
		{"data null", req{body: `{"type":"a","data":null}`}, nil, 400, CodeInvalidField, "data"},
		{"data array", req{body: `{"type":"a","data":[]}`}, nil, 400, CodeInvalidField, "data"},
		{"secrets array", req{body: `{"type":"a","data":{},"secrets":["x"]}`}, nil, 400, CodeInvalidField, "secrets"},
		{"too many secrets", req{body: tooMany}, func(c *Config) { c.MaxSecrets = 2 }, 400, CodeInvalidField, "secrets"},
		{"empty secret name", req{body: `{"type":"a","data":{},"secrets":{"":"x"}}`}, nil, 400, CodeInvalidField, "secrets"},
		{"secret collision", req{body: `{"type":"a","data":{"token":"public"},"secrets":{"token":"x"}}`}, nil, 400, CodeSecretCollision, "secrets.token"},
		{"reissueOf not an ID", req{body: `{"type":"a","data":{},"reissueOf":"dlv_01hzzzzzzzzzzzzzzzzzzzzzzz"}`}, nil, 400, CodeInvalidField, "reissueOf"},
		{"reissueOf not a string", req{body: `{"type":"a","data":{},"reissueOf":1}`}, nil, 400, CodeInvalidField, "reissueOf"},
		{"endpoint not a name", req{body: `{"type":"a","data":{},"endpoint":"Billing_1"}`}, nil, 400, CodeInvalidField, "endpoint"},
		{"endpoint not a string", req{body: `{"type":"a","data":{},"endpoint":["billing"]}`}, nil, 400, CodeInvalidField, "endpoint"},
		// Idempotency-Key.
		{"key too long", req{body: validBody, headers: map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}}, nil, 400, CodeInvalidField, "Idempotency-Key"},
		{"key not ASCII", req{body: validBody, headers: map[string]string{"Idempotency-Key": "clé"}}, nil, 400, CodeInvalidField, "Idempotency-Key"},
		{"key with control", req{body: validBody, headers: map[string]string{"Idempotency-Key": "a\x01b"}}, nil, 400, CodeInvalidField, "Idempotency-Key"},
		// Routing.
		{"GET on the events collection", req{method: "GET", body: validBody}, nil, 405, CodeMethodNotAllowed, ""},
		{"unknown path", req{path: "/v1/namespaces/shop/event", body: validBody}, nil, 404, CodeNotFound, ""},
		{"root", req{path: "/", body: validBody}, nil, 404, CodeNotFound, ""},
		{"trailing slash", req{path: "/v1/namespaces/shop/events/", body: validBody}, nil, 404, CodeNotFound, ""},
		{"unclean path (no HTML redirect)", req{path: "//v1/namespaces/shop/events", body: validBody}, nil, 404, CodeNotFound, ""},
		{"dot segments", req{path: "/v1/namespaces/x/../shop/events", body: validBody}, nil, 404, CodeNotFound, ""},
		{"acks are not served here yet", req{path: "/v1/acks/dlv_x", body: validBody}, nil, 404, CodeNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfgs []func(*Config)
			if tt.cfg != nil {
				cfgs = append(cfgs, tt.cfg)
			}
			e := newEnv(t, cfgs...)
			rec := e.do(t, tt.r)
			wantError(t, rec, tt.status, tt.code, tt.field)
			if p := e.pub.last(); p != nil {
				t.Errorf("refused request reached the publisher: %+v", p)
			}
		})
	}
}

func TestPublishAccepts(t *testing.T) {
	tests := []struct {
		name string
		r    req
	}{
		{"charset utf-8", req{body: validBody, headers: map[string]string{"Content-Type": "application/json; charset=UTF-8"}}},
		{"key of 255 printable characters", req{body: validBody, headers: map[string]string{"Idempotency-Key": strings.Repeat("~ ", 127) + "!"}}},
		{"null secrets and reissueOf", req{body: `{"type":"a","data":{},"secrets":null,"reissueOf":null}`}},
		{"null and empty endpoint", req{body: `{"type":"a","data":{},"endpoint":null}`}},
		{"empty secrets", req{body: `{"type":"a","data":{},"secrets":{}}`}},
		{"bearer scheme in lower case", req{body: validBody, headers: map[string]string{"Authorization": "bearer " + goodToken}}},
		{"nested secret name equal to a nested data key", req{body: `{"type":"a","data":{"x":{"token":1}},"secrets":{"token":"s"}}`}},
		// The body, data and 62 arrays: MaxJSONDepth levels of nesting.
		{"depth at the limit", req{body: `{"type":"a","data":{"x":` + strings.Repeat(`[`, publish.MaxJSONDepth-2) + strings.Repeat(`]`, publish.MaxJSONDepth-2) + `}}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if rec := e.do(t, tt.r); rec.Code != http.StatusCreated {
				t.Errorf("status %d: %s", rec.Code, rec.Body)
			}
		})
	}
}

func TestPublishBodyLimitWithoutContentLength(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBodyBytes = 64 })
	r := httptest.NewRequest(http.MethodPost, "/v1/namespaces/shop/events",
		struct{ *strings.Reader }{strings.NewReader(`{"type":"a","data":{"x":"` + strings.Repeat("y", 100) + `"}}`)})
	r.ContentLength = -1 // chunked: only MaxBytesReader can catch it
	r.Header.Set("Authorization", "Bearer "+goodToken)
	r.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, r)
	wantError(t, rec, http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "")
}

func TestPublishKeySentTwice(t *testing.T) {
	e := newEnv(t)
	r := httptest.NewRequest(http.MethodPost, "/v1/namespaces/shop/events", strings.NewReader(validBody))
	r.Header.Set("Authorization", "Bearer "+goodToken)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Add("Idempotency-Key", "a")
	r.Header.Add("Idempotency-Key", "b")
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, r)
	wantError(t, rec, http.StatusBadRequest, CodeInvalidField, "Idempotency-Key")
}

func TestPublishFailures(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(*env)
		status int
		code   Code
	}{
		{"commit fails", func(e *env) { e.pub.err = errBackend }, 500, CodeInternal},
		{"item fails", func(e *env) { e.pub.itemErr = errBackend }, 500, CodeInternal},
		{"shutting down", func(e *env) { e.pub.err = fmt.Errorf("publishing: %w", publish.ErrStopping) }, 503, CodeUnavailable},
		{"commit too slow", func(e *env) { e.pub.err = fmt.Errorf("publishing: %w", context.DeadlineExceeded) }, 503, CodeUnavailable},
		{"ledger unreachable", func(e *env) { e.pub.err = fmt.Errorf("publishing: %w", ledger.ErrUnavailable) }, 503, CodeUnavailable},
		{"publisher panics", func(e *env) { e.pub.panics = true }, 500, CodeInternal},
		{"authenticator down", func(e *env) { e.auth.authnErr = errBackend }, 500, CodeInternal},
		{"authorizer down", func(e *env) { e.auth.authzErr = errBackend }, 500, CodeInternal},
		{"forbidden", func(e *env) { e.auth.deny = true }, 403, CodeForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			tt.setup(e)
			rec := e.do(t, req{body: validBody})
			d := wantError(t, rec, tt.status, tt.code, "")
			if strings.Contains(rec.Body.String(), "10.0.0.7") || strings.Contains(rec.Body.String(), "panic") {
				t.Errorf("answer leaks an internal error: %s", d.Message)
			}
			if tt.status >= 500 && !strings.Contains(e.logs.String(), "Request failed") && !strings.Contains(e.logs.String(), "panicked") {
				t.Errorf("server error not logged; log:\n%s", e.logs)
			}
		})
	}
}

func TestUnauthenticatedAnswerAsksForBearer(t *testing.T) {
	e := newEnv(t)
	rec := e.do(t, req{body: validBody, headers: map[string]string{"Authorization": ""}})
	if got := rec.Header().Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
		t.Errorf("WWW-Authenticate = %q, want Bearer", got)
	}
	if len(e.auth.accesses) != 0 {
		t.Error("an unauthenticated request was authorized")
	}
}

func TestPublishChecksCreateEvents(t *testing.T) {
	e := newEnv(t)
	e.do(t, req{body: validBody})
	want := []Access{{Verb: VerbCreate, APIGroup: PublishGroup, Resource: ResourceEvents, Namespace: ns}}
	if !slices.Equal(e.auth.accesses, want) {
		t.Errorf("accesses = %+v, want %+v", e.auth.accesses, want)
	}
}

func TestIdempotentReplayAndConflict(t *testing.T) {
	e := newEnv(t)
	key := map[string]string{"Idempotency-Key": "order-42"}
	first := e.do(t, req{body: `{"type":"order.created","data":{"b":[1,2],"a":{"y":true,"x":null}},"secrets":{"t":"1","s":"2"}}`, headers: key})
	if first.Code != http.StatusCreated {
		t.Fatalf("first: %d %s", first.Code, first.Body)
	}
	orig := decode[PublishAnswer](t, first)

	// Same logical body: other whitespace, other key order at every level.
	replay := e.do(t, req{body: "{\n  \"secrets\": {\"s\": \"2\", \"t\": \"1\"},\n  \"data\": {\"a\": {\"x\": null, \"y\": true}, \"b\": [1, 2]},\n  \"type\": \"order.created\"\n}\n", headers: key})
	if replay.Code != http.StatusOK || replay.Header().Get(ReplayedHeader) != "true" {
		t.Fatalf("replay: %d %s, %s=%q; want 200 and true", replay.Code, replay.Body, ReplayedHeader, replay.Header().Get(ReplayedHeader))
	}
	if got := decode[PublishAnswer](t, replay); got.ID != orig.ID || len(got.Deliveries) != len(orig.Deliveries) || got.Deliveries[0].ID != orig.Deliveries[0].ID {
		t.Errorf("replay answered %+v, want the original %+v", got, orig)
	}

	for name, body := range map[string]string{
		"other data":         `{"type":"order.created","data":{"b":[2,1],"a":{"y":true,"x":null}},"secrets":{"t":"1","s":"2"}}`,
		"other type":         `{"type":"order.updated","data":{"b":[1,2],"a":{"y":true,"x":null}},"secrets":{"t":"1","s":"2"}}`,
		"other secret names": `{"type":"order.created","data":{"b":[1,2],"a":{"y":true,"x":null}},"secrets":{"t":"1","u":"2"}}`,
		"reissue":            `{"type":"order.created","data":{"b":[1,2],"a":{"y":true,"x":null}},"secrets":{"t":"1","s":"2"},"reissueOf":"evt_01hzzzzzzzzzzzzzzzzzzzzzzz"}`,
	} {
		rec := e.do(t, req{body: body, headers: key})
		if rec.Code != http.StatusConflict {
			t.Errorf("%s: status %d, want 409", name, rec.Code)
			continue
		}
		wantError(t, rec, http.StatusConflict, CodeIdempotencyConflict, "Idempotency-Key")
	}

	// Without a SecretsHashKey, secret values are not part of the hash.
	rec := e.do(t, req{body: `{"type":"order.created","data":{"b":[1,2],"a":{"y":true,"x":null}},"secrets":{"t":"9","s":"9"}}`, headers: key})
	if rec.Code != http.StatusOK {
		t.Errorf("other secret values without a key: %d, want 200 (values are not hashed)", rec.Code)
	}
}

func TestSecretsHashKeyMakesSecretValuesCount(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SecretsHashKey = []byte("0123456789abcdef0123456789abcdef") })
	key := map[string]string{"Idempotency-Key": "k"}
	if rec := e.do(t, req{body: `{"type":"a","data":{},"secrets":{"code":"111111"}}`, headers: key}); rec.Code != http.StatusCreated {
		t.Fatalf("first: %d", rec.Code)
	}
	if rec := e.do(t, req{body: `{"type":"a","data":{}, "secrets":{"code":"111111"}}`, headers: key}); rec.Code != http.StatusOK {
		t.Errorf("same secret: %d, want 200", rec.Code)
	}
	rec := e.do(t, req{body: `{"type":"a","data":{},"secrets":{"code":"222222"}}`, headers: key})
	wantError(t, rec, http.StatusConflict, CodeIdempotencyConflict, "Idempotency-Key")
}

func TestMethodNotAllowedNamesAllowed(t *testing.T) {
	e := newEnv(t)
	tests := []struct{ method, path, allow string }{
		{"GET", "/v1/namespaces/shop/events", "POST"},
		{"PUT", "/v1/namespaces/shop/events", "POST"},
		{"POST", "/v1/namespaces/shop/events/evt_1", "GET, HEAD"},
		{"DELETE", "/v1/namespaces/shop/deliveries", "GET, HEAD"},
		{"PATCH", "/v1/namespaces/shop/deliveries/dlv_1", "GET, HEAD"},
		{"POST", "/v1/namespaces/shop/deliveries/dlv_1/attempts", "GET, HEAD"},
	}
	for _, tt := range tests {
		rec := e.do(t, req{method: tt.method, path: tt.path, body: validBody})
		wantError(t, rec, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "")
		if got := rec.Header().Get("Allow"); got != tt.allow {
			t.Errorf("%s %s: Allow = %q, want %q", tt.method, tt.path, got, tt.allow)
		}
	}
}

func TestAnswersAreNotCached(t *testing.T) {
	e := newEnv(t)
	for _, rec := range []*httptest.ResponseRecorder{e.do(t, req{body: validBody}), e.do(t, req{path: "/nowhere"})} {
		if rec.Header().Get("Cache-Control") != "no-store" || rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("headers %v", rec.Header())
		}
	}
}

func TestNewRequiresDependencies(t *testing.T) {
	if _, err := New(Config{Publisher: newFakePublisher(), Reader: &fakeReader{}}); err == nil {
		t.Error("New without Auth succeeded")
	}
}

// TestNoSecretOrTokenLeaks drives every kind of answer with a secret-bearing
// body and checks that no answer, header or log line contains a secret
// value or the bearer token.
func TestNoSecretOrTokenLeaks(t *testing.T) {
	const secret = "SECRET-9f8e7d"
	e := newEnv(t)
	key := map[string]string{"Idempotency-Key": "leak"}
	bodies := []struct {
		body    string
		headers map[string]string
	}{
		{`{"type":"a","data":{"x":1},"secrets":{"code":"` + secret + `"}}`, key},                    // 201
		{`{"type":"a","data":{"x":1},"secrets":{"code":"` + secret + `"}}`, key},                    // 200 replay
		{`{"type":"a","data":{"x":2},"secrets":{"code":"` + secret + `"}}`, key},                    // 409
		{`{"type":"a","data":{"code":1},"secrets":{"code":"` + secret + `"}}`, nil},                 // collision
		{`{"type":"a","data":{},"secrets":{"code":"` + secret + `","code":"` + secret + `"}}`, nil}, // duplicate
		{`{"type":"a","data":{},"secrets":{"code":"` + secret + `\q"}}`, nil},                       // bad escape
		{`{"type":"a","data":{},"secrets":{"code":` + secret + `}}`, nil},                           // bare word
		{`{"type":"a","data":{},"secrets":{"code":"` + secret + `"},"bogus":1}`, nil},               // unknown field
		{`{"type":"` + "bad type" + `","data":{},"secrets":{"code":"` + secret + `"}}`, nil},        // bad type
	}
	var answers bytes.Buffer
	for _, b := range bodies {
		rec := e.do(t, req{body: b.body, headers: b.headers})
		fmt.Fprintf(&answers, "%d %v %s\n", rec.Code, rec.Header(), rec.Body)
	}
	// Reads of the stored event.
	p := e.pub.last()
	e.reader.events[p.ID] = ledger.Event{ID: p.ID, Namespace: ns, Type: p.Type, Data: p.Data, Secrets: p.Secrets, SecretNames: p.SecretNames}
	rec := e.do(t, req{method: "GET", path: "/v1/namespaces/shop/events/" + p.ID})
	if rec.Code != http.StatusOK {
		t.Fatalf("GET event: %d", rec.Code)
	}
	fmt.Fprintf(&answers, "%s\n", rec.Body)

	for where, text := range map[string]string{"answers": answers.String(), "logs": e.logs.String()} {
		if strings.Contains(text, secret) {
			t.Errorf("%s contain the secret:\n%s", where, text)
		}
		if strings.Contains(text, goodToken) {
			t.Errorf("%s contain the token:\n%s", where, text)
		}
	}
	if !strings.Contains(answers.String(), "409") || !strings.Contains(answers.String(), "SecretCollision") {
		t.Errorf("the scenario did not produce the answers it meant to:\n%s", answers.String())
	}
}

func TestPublishPassesFanOutLimit(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  func(*Config)
		want int
	}{
		{"default", func(*Config) {}, DefaultMaxFanOut},
		{"configured", func(c *Config) { c.MaxFanOut = 7 }, 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.cfg)
			if rec := e.do(t, req{body: validBody}); rec.Code != http.StatusCreated {
				t.Fatalf("publish: %d %s", rec.Code, rec.Body)
			}
			if got := e.pub.last().MaxFanOut; got != tt.want {
				t.Errorf("EventInsertParams.MaxFanOut = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestPublishFanOutRefusal(t *testing.T) {
	e := newEnv(t)
	e.pub.itemErr = &ledger.FanOutError{Namespace: ns, Type: "order.created", Matches: 120, Max: 100}
	d := wantError(t, e.do(t, req{body: validBody}), http.StatusUnprocessableEntity, CodeFanOutLimit, "type")
	for _, want := range []string{`"order.created"`, "120", "100", "nothing was recorded", "--max-fan-out"} {
		if !strings.Contains(d.Message, want) {
			t.Errorf("message %q does not say %q", d.Message, want)
		}
	}
}

// An Auth that cannot decide now, at either step, is 503 with Retry-After
// (whole seconds, rounded up, at least 1), never 401, 403 or 500; a shed
// request (no cause) is not logged as a failure, a failed review is.
func TestAuthUnavailableIs503WithRetryAfter(t *testing.T) {
	shed := &UnavailableError{RetryAfter: 1500 * time.Millisecond, Reason: "too many new tokens"}
	failed := &UnavailableError{RetryAfter: 0, Reason: "the review API is unreachable", Err: errBackend}
	for _, tt := range []struct {
		name       string
		setup      func(*env)
		retryAfter string
		logged     bool
	}{
		{"authentication shed", func(e *env) { e.auth.authnErr = shed }, "2", false},
		{"authentication failed", func(e *env) { e.auth.authnErr = fmt.Errorf("reviewing: %w", failed) }, "1", true},
		{"authorization shed", func(e *env) { e.auth.authzErr = shed }, "2", false},
		{"authorization failed", func(e *env) { e.auth.authzErr = failed }, "1", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			tt.setup(e)
			rec := e.do(t, req{body: validBody})
			d := wantError(t, rec, http.StatusServiceUnavailable, CodeUnavailable, "")
			if got := rec.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tt.retryAfter)
			}
			if strings.Contains(d.Message, "10.0.0.7") {
				t.Errorf("answer leaks the cause: %s", d.Message)
			}
			if logged := strings.Contains(e.logs.String(), "Request failed"); logged != tt.logged {
				t.Errorf("logged as a failure: %v, want %v; log:\n%s", logged, tt.logged, e.logs)
			}
		})
	}
}
