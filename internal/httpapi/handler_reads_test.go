package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// Fixture: event evt_a (shop, with unscrubbed secrets), evt_s (shop,
// scrubbed), evt_o (other); deliveries of each.
const (
	evtA = "evt_01aaaaaaaaaaaaaaaaaaaaaaaa"
	evtS = "evt_01ssssssssssssssssssssssss"
	evtO = "evt_01oooooooooooooooooooooooo"
	dlv1 = "dlv_01aaaaaaaaaaaaaaaaaaaaaa01"
	dlv2 = "dlv_01aaaaaaaaaaaaaaaaaaaaaa02"
	dlv3 = "dlv_01aaaaaaaaaaaaaaaaaaaaaa03"
	dlvO = "dlv_01oooooooooooooooooooooo01"
)

func readEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	scrubAt := testNow.Add(time.Hour)
	e.reader.events = map[string]ledger.Event{
		evtA: {ID: evtA, Namespace: ns, Type: "fan.confirm", Data: json.RawMessage(`{"email":"a@example.com"}`),
			Secrets: sensitive.Bytes(`{"code":"TOPSECRET"}`), SecretNames: []string{"code"}, IdempotencyKey: "k1", CreatedAt: testNow},
		evtS: {ID: evtS, Namespace: ns, Type: "fan.confirm", Data: json.RawMessage(`{}`), SecretNames: []string{"code"},
			SecretsScrubAt: &scrubAt, CreatedAt: testNow},
		evtO: {ID: evtO, Namespace: "other", Type: "x", Data: json.RawMessage(`{"theirs":true}`), CreatedAt: testNow},
	}
	e.reader.deliveries = []ledger.Delivery{
		{ID: dlv1, EventID: evtA, EndpointID: "shop/billing", State: ledger.StateDelivered, Attempts: 1, DueAt: testNow, CreatedAt: testNow},
		{ID: dlv2, EventID: evtA, EndpointID: "shop/audit", State: ledger.StateExhausted, Attempts: 3,
			ExhaustReason: ledger.ExhaustMaxAttempts, Resolution: ledger.ResolutionUnresolved, LastStatus: 503, DueAt: testNow, CreatedAt: testNow},
		{ID: dlv3, EventID: evtS, EndpointID: "shop/billing", State: ledger.StateScheduled, DueAt: testNow, CreatedAt: testNow},
		{ID: dlvO, EventID: evtO, EndpointID: "other/spy", State: ledger.StateScheduled, DueAt: testNow, CreatedAt: testNow},
	}
	e.reader.attempts = map[string][]ledger.Attempt{
		dlv2: {
			{DeliveryID: dlv2, Number: 1, StartedAt: testNow, Duration: 1500 * time.Millisecond, StatusCode: 503, ResponseExcerpt: []byte("busy")},
			{DeliveryID: dlv2, Number: 2, StartedAt: testNow.Add(time.Minute), Duration: 30 * time.Second, Error: "timeout"},
		},
		dlvO: {{DeliveryID: dlvO, Number: 1, StartedAt: testNow, StatusCode: 200}},
	}
	e.reader.owners = map[string]string{"shop/audit": "team-payments", "other/spy": "spies"}
	return e
}

func get(t *testing.T, e *env, path string) *httptest.ResponseRecorder {
	t.Helper()
	return e.do(t, req{method: http.MethodGet, path: path})
}

func TestGetEvent(t *testing.T) {
	e := readEnv(t)
	rec := get(t, e, "/v1/namespaces/shop/events/"+evtA)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	v := decode[EventView](t, rec)
	if v.ID != evtA || v.Namespace != ns || v.Type != "fan.confirm" || string(v.Data) != `{"email":"a@example.com"}` ||
		!slices.Equal(v.SecretNames, []string{"code"}) || v.SecretsScrubbed || v.SecretsScrubAt != nil || v.IdempotencyKey != "k1" || v.DataHidden {
		t.Errorf("view = %+v", v)
	}
	if strings.Contains(rec.Body.String(), "TOPSECRET") {
		t.Errorf("answer contains the secret: %s", rec.Body)
	}

	v = decode[EventView](t, get(t, e, "/v1/namespaces/shop/events/"+evtS))
	if !v.SecretsScrubbed || v.SecretsScrubAt == nil {
		t.Errorf("scrubbed event shows secretsScrubbed=false: %+v", v)
	}
	// The route needs get on webhookevents, the data get on
	// webhookevents/data, as in the aggregated API.
	data := Access{Verb: VerbGet, APIGroup: HistoryGroup, Resource: ResourceWebhookEvents, Subresource: SubresourceData, Namespace: ns}
	want := []Access{
		{Verb: VerbGet, APIGroup: HistoryGroup, Resource: ResourceWebhookEvents, Namespace: ns, Name: evtA}, data,
		{Verb: VerbGet, APIGroup: HistoryGroup, Resource: ResourceWebhookEvents, Namespace: ns, Name: evtS}, data,
	}
	if !slices.Equal(e.auth.accesses, want) {
		t.Errorf("accesses %+v, want %+v", e.auth.accesses, want)
	}
}

// TestEventDataNeedsTheDataPermission: without get on webhookevents/data
// the event answers without its data, and says so; a failure to decide is
// not an answer without data but the Auth's error.
func TestEventDataNeedsTheDataPermission(t *testing.T) {
	e := readEnv(t)
	e.auth.denyData = true
	rec := get(t, e, "/v1/namespaces/shop/events/"+evtA)
	v := decode[EventView](t, rec)
	if rec.Code != http.StatusOK || (v.Data != nil && string(v.Data) != "null") || !v.DataHidden || strings.Contains(rec.Body.String(), "a@example.com") {
		t.Errorf("without the data permission: %d %s", rec.Code, rec.Body)
	}
	e = readEnv(t)
	e.auth.authzErr = &UnavailableError{RetryAfter: time.Second, Reason: "the Kubernetes API is unreachable"}
	wantError(t, get(t, e, "/v1/namespaces/shop/events/"+evtA), http.StatusServiceUnavailable, CodeUnavailable, "")
}

func TestGetDeliveryAndAttempts(t *testing.T) {
	e := readEnv(t)
	d := decode[DeliveryView](t, get(t, e, "/v1/namespaces/shop/deliveries/"+dlv2))
	if d.ID != dlv2 || d.Event != evtA || d.Endpoint != "audit" || d.State != ledger.StateExhausted ||
		d.ExhaustReason != ledger.ExhaustMaxAttempts || d.Resolution != ledger.ResolutionUnresolved || d.LastStatus != 503 || d.Attempts != 3 ||
		d.Owner != "team-payments" {
		t.Errorf("delivery = %+v", d)
	}
	// An endpoint without an owner: the field is left out.
	if rec := get(t, e, "/v1/namespaces/shop/deliveries/"+dlv1); strings.Contains(rec.Body.String(), `"owner"`) {
		t.Errorf("delivery of an endpoint without an owner: %s", rec.Body)
	}
	a := decode[AttemptList](t, get(t, e, "/v1/namespaces/shop/deliveries/"+dlv2+"/attempts"))
	want := []AttemptView{
		{Number: 1, StartedAt: testNow, Duration: "1.5s", StatusCode: 503, ResponseExcerpt: "busy"},
		{Number: 2, StartedAt: testNow.Add(time.Minute), Duration: "30s", Error: "timeout"},
	}
	if !slices.EqualFunc(a.Items, want, func(x, y AttemptView) bool {
		return x.StartedAt.Equal(y.StartedAt) && x.Duration == y.Duration && x.Number == y.Number && x.Error == y.Error && x.StatusCode == y.StatusCode && x.ResponseExcerpt == y.ResponseExcerpt
	}) {
		t.Errorf("attempts = %+v, want %+v", a.Items, want)
	}
	if a := decode[AttemptList](t, get(t, e, "/v1/namespaces/shop/deliveries/"+dlv1+"/attempts")); a.Items == nil || len(a.Items) != 0 {
		t.Errorf("no attempts: %+v, want an empty list", a)
	}
	if got := e.auth.accesses[0]; got != (Access{Verb: VerbGet, APIGroup: HistoryGroup, Resource: ResourceDeliveries, Namespace: ns, Name: dlv2}) {
		t.Errorf("access = %+v", got)
	}
}

// TestNamespaceIsolation: another namespace's objects answer exactly as
// missing ones.
func TestNamespaceIsolation(t *testing.T) {
	e := readEnv(t)
	for _, tt := range []struct{ foreign, missing string }{
		{"/v1/namespaces/shop/events/" + evtO, "/v1/namespaces/shop/events/evt_01zzzzzzzzzzzzzzzzzzzzzzzz"},
		{"/v1/namespaces/shop/deliveries/" + dlvO, "/v1/namespaces/shop/deliveries/dlv_01zzzzzzzzzzzzzzzzzzzzzz01"},
		{"/v1/namespaces/shop/deliveries/" + dlvO + "/attempts", "/v1/namespaces/shop/deliveries/dlv_01zzzzzzzzzzzzzzzzzzzzzz01/attempts"},
	} {
		foreign := get(t, e, tt.foreign)
		missing := get(t, e, tt.missing)
		df := wantError(t, foreign, http.StatusNotFound, CodeNotFound, "")
		dm := wantError(t, missing, http.StatusNotFound, CodeNotFound, "")
		lastSeg := func(p string) string {
			return strings.TrimSuffix(p[strings.LastIndex(strings.TrimSuffix(p, "/attempts"), "/")+1:], "/attempts")
		}
		if strings.ReplaceAll(df.Message, lastSeg(tt.foreign), "ID") != strings.ReplaceAll(dm.Message, lastSeg(tt.missing), "ID") {
			t.Errorf("foreign %q and missing %q answers differ", df.Message, dm.Message)
		}
		if strings.Contains(foreign.Body.String(), "other") || strings.Contains(foreign.Body.String(), "spy") {
			t.Errorf("answer reveals the other namespace: %s", foreign.Body)
		}
	}
	// Listing by a foreign event is an empty list, like an unknown event.
	l := decode[DeliveryList](t, get(t, e, "/v1/namespaces/shop/deliveries?event="+evtO))
	if len(l.Items) != 0 {
		t.Errorf("listing a foreign event's deliveries = %+v", l.Items)
	}
	// And the same names in the other namespace are that namespace's.
	l = decode[DeliveryList](t, get(t, e, "/v1/namespaces/other/deliveries?endpoint=billing"))
	if len(l.Items) != 0 {
		t.Errorf("other/billing = %+v, want nothing", l.Items)
	}
}

func TestListDeliveries(t *testing.T) {
	tests := []struct {
		name       string
		query      string
		want       []string
		wantParams ledger.DeliveryBrowseParams
		nextAfter  string
	}{
		{"by endpoint", "endpoint=billing", []string{dlv1, dlv3},
			ledger.DeliveryBrowseParams{EndpointID: "shop/billing", Limit: DefaultListLimit}, ""},
		{"by event", "event=" + evtA, []string{dlv1, dlv2},
			ledger.DeliveryBrowseParams{EventID: evtA, Limit: DefaultListLimit}, ""},
		{"states, repeated and comma-separated", "endpoint=billing&state=scheduled,delivered&state=exhausted&state=scheduled", []string{dlv1, dlv3},
			ledger.DeliveryBrowseParams{EndpointID: "shop/billing", States: []ledger.DeliveryState{"scheduled", "delivered", "exhausted"}, Limit: DefaultListLimit}, ""},
		{"resolution", "event=" + evtA + "&resolution=unresolved", []string{dlv2},
			ledger.DeliveryBrowseParams{EventID: evtA, Resolution: ledger.ResolutionUnresolved, Limit: DefaultListLimit}, ""},
		{"first page", "endpoint=billing&limit=1", []string{dlv1},
			ledger.DeliveryBrowseParams{EndpointID: "shop/billing", Limit: 1}, dlv1},
		{"next page", "endpoint=billing&limit=1&after=" + dlv1, []string{dlv3},
			ledger.DeliveryBrowseParams{EndpointID: "shop/billing", AfterID: dlv1, Limit: 1}, dlv3},
		{"past the end", "endpoint=billing&limit=1&after=" + dlv3, []string{},
			ledger.DeliveryBrowseParams{EndpointID: "shop/billing", AfterID: dlv3, Limit: 1}, ""},
		{"unknown event", "event=evt_01zzzzzzzzzzzzzzzzzzzzzzzz", []string{}, ledger.DeliveryBrowseParams{}, ""},
		{"the whole namespace", "", []string{dlv1, dlv2, dlv3},
			ledger.DeliveryBrowseParams{Namespace: ns, Limit: DefaultListLimit}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := readEnv(t)
			rec := get(t, e, "/v1/namespaces/shop/deliveries?"+tt.query)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			l := decode[DeliveryList](t, rec)
			var ids []string
			for _, d := range l.Items {
				ids = append(ids, d.ID)
				if strings.Contains(d.Endpoint, "/") {
					t.Errorf("endpoint %q: the API speaks names", d.Endpoint)
				}
				if want := e.reader.owners["shop/"+d.Endpoint]; d.Owner != want {
					t.Errorf("delivery %s owner = %q, want its endpoint's %q", d.ID, d.Owner, want)
				}
			}
			if !slices.Equal(ids, tt.want) {
				t.Errorf("ids = %v, want %v", ids, tt.want)
			}
			if l.Items == nil {
				t.Error("items is null, want []")
			}
			if l.NextAfter != tt.nextAfter {
				t.Errorf("nextAfter = %q, want %q", l.NextAfter, tt.nextAfter)
			}
			if tt.wantParams.Limit != 0 {
				p := e.reader.lastList
				if p == nil || p.Namespace != ns || p.EndpointID != tt.wantParams.EndpointID || p.EventID != tt.wantParams.EventID || !slices.Equal(p.States, tt.wantParams.States) ||
					p.Resolution != tt.wantParams.Resolution || p.AfterID != tt.wantParams.AfterID || p.Limit != tt.wantParams.Limit {
					t.Errorf("params = %+v, want %+v", p, tt.wantParams)
				}
			}
		})
	}
}

func TestListDeliveriesRefusals(t *testing.T) {
	tests := []struct {
		query string
		code  Code
		field string
	}{
		{"endpoint=billing&endpont=x", CodeUnknownField, "endpont"},
		{"endpoint=billing&endpoint=audit", CodeInvalidField, "endpoint"},
		{"endpoint=Billing", CodeInvalidField, "endpoint"},
		{"endpoint=shop/billing", CodeInvalidField, "endpoint"},
		{"endpoint=billing&state=lost", CodeInvalidField, "state"},
		{"endpoint=billing&resolution=forgotten", CodeInvalidField, "resolution"},
		{"endpoint=billing&limit=0", CodeInvalidField, "limit"},
		{"endpoint=billing&limit=1001", CodeInvalidField, "limit"},
		{"endpoint=billing&limit=ten", CodeInvalidField, "limit"},
		{"endpoint=billing&after=" + strings.Repeat("x", 200), CodeInvalidField, "after"},
		{"endpoint=billing&%zz", CodeInvalidField, ""},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			e := readEnv(t)
			wantError(t, get(t, e, "/v1/namespaces/shop/deliveries?"+tt.query), http.StatusBadRequest, tt.code, tt.field)
		})
	}
}

func TestReadFailures(t *testing.T) {
	paths := []string{
		"/v1/namespaces/shop/events/" + evtA,
		"/v1/namespaces/shop/deliveries/" + dlv1,
		"/v1/namespaces/shop/deliveries/" + dlv1 + "/attempts",
		"/v1/namespaces/shop/deliveries?endpoint=billing",
		"/v1/namespaces/shop/deliveries?event=" + evtA,
	}
	for _, p := range paths {
		e := readEnv(t)
		e.reader.err = errBackend
		rec := get(t, e, p)
		wantError(t, rec, http.StatusInternalServerError, CodeInternal, "")
		if strings.Contains(rec.Body.String(), "10.0.0.7") {
			t.Errorf("%s: answer leaks the internal error", p)
		}
	}
	e := readEnv(t)
	e.auth.deny = true
	wantError(t, get(t, e, "/v1/namespaces/shop/deliveries/"+dlv1), http.StatusForbidden, CodeForbidden, "")
	e = readEnv(t)
	wantError(t, get(t, e, "/v1/namespaces/shop/events/"+strings.Repeat("x", 200)), http.StatusNotFound, CodeNotFound, "")
	wantError(t, get(t, e, "/v1/namespaces/-shop/events/"+evtA), http.StatusBadRequest, CodeInvalidField, "namespace")
}

func TestHeadIsServed(t *testing.T) {
	e := readEnv(t)
	if rec := e.do(t, req{method: http.MethodHead, path: "/v1/namespaces/shop/events/" + evtA}); rec.Code != http.StatusOK {
		t.Errorf("HEAD: %d", rec.Code)
	}
}
