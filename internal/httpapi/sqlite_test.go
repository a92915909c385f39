package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/groupcommit"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
	"github.com/hookkeeper/hookkeeper/internal/publish"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// TestPublishThroughSQLite runs the API over a real HTTP server and the
// embedded ledger: concurrent publishes group-committed into SQLite,
// idempotent replay and conflict decided by the store on the handler's
// hash, and the read API on what was committed.
func TestPublishThroughSQLite(t *testing.T) {
	api := newSQLiteAPI(t, []sqliteEndpoint{{"shop", "billing", "order.*"}, {"shop", "audit", "*"}, {"other", "spy", "*"}},
		Config{Now: func() time.Time { return testNow }})
	call, pub := api.call, api.pub
	billing, err := api.store.EndpointGet(t.Context(), "shop/billing")
	if err != nil {
		t.Fatal(err)
	}
	billing.Owner = "team-billing"
	if _, err := api.store.EndpointUpsert(t.Context(), &ledger.EndpointUpsertParams{Endpoint: billing, Now: testNow}); err != nil {
		t.Fatal(err)
	}

	// Concurrent publishes, each committed before its 201.
	const n = 24
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"type":"order.created","data":{"order":%d},"secrets":{"claim":"CLAIM-%d"}}`, i, i)
			status, _, answer := call("POST", "/v1/namespaces/shop/events", body, fmt.Sprint("order-", i))
			if status != http.StatusCreated {
				t.Errorf("publish %d: %d %s", i, status, answer)
				return
			}
			var a PublishAnswer
			if err := json.Unmarshal([]byte(answer), &a); err != nil || len(a.Deliveries) != 2 {
				t.Errorf("publish %d: %s (%v): want deliveries to billing and audit", i, answer, err)
				return
			}
			ids[i] = a.ID
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Replay, reformatted: the original. Another body: 409.
	status, hdr, answer := call("POST", "/v1/namespaces/shop/events", "{ \"secrets\": {\"claim\": \"CLAIM-3\"}, \"data\": {\"order\": 3}, \"type\": \"order.created\" }", "order-3")
	if status != http.StatusOK || hdr.Get(ReplayedHeader) != "true" || !strings.Contains(answer, ids[3]) {
		t.Errorf("replay: %d %v %s, want 200 with %s", status, hdr.Get(ReplayedHeader), answer, ids[3])
	}
	if status, _, answer := call("POST", "/v1/namespaces/shop/events", `{"type":"order.created","data":{"order":4}}`, "order-3"); status != http.StatusConflict {
		t.Errorf("conflict: %d %s", status, answer)
	}
	// The same key in another namespace is another event.
	if status, _, answer := call("POST", "/v1/namespaces/other/events", `{"type":"order.created","data":{"order":3}}`, "order-3"); status != http.StatusCreated {
		t.Errorf("other namespace: %d %s", status, answer)
	}

	// Reads.
	status, _, answer = call("GET", "/v1/namespaces/shop/events/"+ids[5], "", "")
	var ev EventView
	if err := json.Unmarshal([]byte(answer), &ev); status != http.StatusOK || err != nil {
		t.Fatalf("GET event: %d %s", status, answer)
	}
	if string(ev.Data) != `{"order":5}` || !slices.Equal(ev.SecretNames, []string{"claim"}) || ev.SecretsScrubbed || strings.Contains(answer, "CLAIM-5") {
		t.Errorf("event = %s", answer)
	}
	if status, _, _ := call("GET", "/v1/namespaces/other/events/"+ids[5], "", ""); status != http.StatusNotFound {
		t.Errorf("event from another namespace: %d, want 404", status)
	}
	status, _, answer = call("GET", "/v1/namespaces/shop/deliveries?event="+ids[5], "", "")
	var l DeliveryList
	if err := json.Unmarshal([]byte(answer), &l); status != http.StatusOK || err != nil || len(l.Items) != 2 {
		t.Fatalf("deliveries of the event: %d %s", status, answer)
	}
	for _, d := range l.Items {
		if want := map[string]string{"billing": "team-billing"}[d.Endpoint]; d.Owner != want {
			t.Errorf("delivery to %s: owner %q, want %q", d.Endpoint, d.Owner, want)
		}
	}
	d := l.Items[0]
	if status, _, answer := call("GET", "/v1/namespaces/shop/deliveries/"+d.ID+"/attempts", "", ""); status != http.StatusOK || answer != "{\"items\":[]}\n" {
		t.Errorf("attempts: %d %s", status, answer)
	}
	if status, _, _ := call("GET", "/v1/namespaces/other/deliveries/"+d.ID, "", ""); status != http.StatusNotFound {
		t.Errorf("delivery from another namespace: %d, want 404", status)
	}
	seen := 0
	for after := ""; ; {
		status, _, answer := call("GET", "/v1/namespaces/shop/deliveries?endpoint=billing&limit=10&after="+after, "", "")
		var page DeliveryList
		if err := json.Unmarshal([]byte(answer), &page); status != http.StatusOK || err != nil {
			t.Fatalf("page: %d %s", status, answer)
		}
		seen += len(page.Items)
		if page.NextAfter == "" {
			break
		}
		after = page.NextAfter
	}
	if seen != n {
		t.Errorf("paged through %d billing deliveries, want %d", seen, n)
	}

	// Shutdown: queued work was committed; new publishes are told to retry.
	pub.Close()
	if status, _, answer := call("POST", "/v1/namespaces/shop/events", validBody, ""); status != http.StatusServiceUnavailable || !strings.Contains(answer, string(CodeUnavailable)) {
		t.Errorf("after Close: %d %s", status, answer)
	}
}

// TestFanOutLimitThroughSQLite: an event type matching more endpoints than
// MaxFanOut is answered 422 and leaves nothing in the embedded ledger; a
// type within the limit in the same namespace is accepted.
func TestFanOutLimitThroughSQLite(t *testing.T) {
	api := newSQLiteAPI(t, []sqliteEndpoint{{"shop", "ep-0", "order.*"}, {"shop", "ep-1", "order.*"}, {"shop", "ep-2", "order.*"},
		{"shop", "ep-3", "invoice.paid"}}, Config{MaxFanOut: 2})
	post := func(typ string) (int, string) {
		t.Helper()
		status, _, answer := api.call(http.MethodPost, "/v1/namespaces/shop/events", `{"type":"`+typ+`","data":{}}`, "")
		return status, answer
	}

	status, answer := post("order.created")
	var refusal ErrorBody
	if err := json.Unmarshal([]byte(answer), &refusal); err != nil || status != http.StatusUnprocessableEntity ||
		refusal.Error.Code != CodeFanOutLimit || refusal.Error.Field != "type" {
		t.Fatalf("publish matching 3 endpoints with a limit of 2: %d %s", status, answer)
	}
	if ds, err := api.store.DeliveryBrowse(t.Context(), &ledger.DeliveryBrowseParams{Limit: 10}); err != nil || len(ds) != 0 {
		t.Fatalf("after the refusal the ledger holds %d deliveries (%v), want none", len(ds), err)
	}
	if status, answer := post("invoice.paid"); status != http.StatusCreated {
		t.Errorf("publish matching 1 endpoint: %d %s", status, answer)
	}
}

// TestAddressedPublishThroughSQLite: a publish with endpoint goes to that
// endpoint only (even one not subscribed to its type), its answer names
// that one delivery, the key covers the endpoint (same key, another
// endpoint: 409), and an endpoint absent from the namespace is 422
// UnknownEndpoint on the field endpoint with nothing recorded.
func TestAddressedPublishThroughSQLite(t *testing.T) {
	api := newSQLiteAPI(t, []sqliteEndpoint{{"shop", "billing", "order.*"}, {"shop", "audit", "*"}, {"other", "orders", "*"}}, Config{})
	post := func(body, key string) (int, string) {
		t.Helper()
		status, _, answer := api.call(http.MethodPost, "/v1/namespaces/shop/events", body, key)
		return status, answer
	}
	const test = `{"type":"hookkeeper.test","data":{"sentBy":"it"},"endpoint":"billing"}`
	status, answer := post(test, "test-1")
	var a PublishAnswer
	if err := json.Unmarshal([]byte(answer), &a); status != http.StatusCreated || err != nil {
		t.Fatalf("addressed publish: %d %s", status, answer)
	}
	if len(a.Deliveries) != 1 || a.Deliveries[0].Endpoint != "billing" {
		t.Fatalf("deliveries %+v, want one, to billing (audit subscribes to *, billing not to hookkeeper.test)", a.Deliveries)
	}
	if ds, err := api.store.DeliveryBrowse(t.Context(), &ledger.DeliveryBrowseParams{EventID: a.ID, Limit: 10}); err != nil || len(ds) != 1 || ds[0].EndpointID != "shop/billing" {
		t.Fatalf("the ledger holds %+v (%v), want one delivery to shop/billing", ds, err)
	}
	if status, answer := post(test, "test-1"); status != http.StatusOK || !strings.Contains(answer, a.ID) {
		t.Errorf("replay: %d %s, want 200 with %s", status, answer, a.ID)
	}
	if status, answer := post(strings.Replace(test, "billing", "audit", 1), "test-1"); status != http.StatusConflict {
		t.Errorf("same key, another endpoint: %d %s, want 409", status, answer)
	}
	for _, name := range []string{"nobody", "orders"} {
		status, answer := post(`{"type":"hookkeeper.test","data":{},"endpoint":"`+name+`"}`, "")
		var refusal ErrorBody
		if err := json.Unmarshal([]byte(answer), &refusal); err != nil || status != http.StatusUnprocessableEntity ||
			refusal.Error.Code != CodeUnknownEndpoint || refusal.Error.Field != "endpoint" || !strings.Contains(refusal.Error.Message, `"`+name+`"`) {
			t.Errorf("addressed to %s: %d %s, want 422 UnknownEndpoint on endpoint", name, status, answer)
		}
	}
	if ds, err := api.store.DeliveryBrowse(t.Context(), &ledger.DeliveryBrowseParams{Limit: 10}); err != nil || len(ds) != 1 {
		t.Errorf("after the refusals the ledger holds %d deliveries (%v), want 1", len(ds), err)
	}
}

// sqliteEndpoint is a WebhookEndpoint registered in the ledger of a test.
type sqliteEndpoint struct{ ns, name, types string }

// sqliteAPI is the API served over a real HTTP server by the embedded
// ledger, with endpoints registered in it.
type sqliteAPI struct {
	t     *testing.T
	store *sqlite.Store
	pub   *storePublisher
	srv   *httptest.Server
}

func newSQLiteAPI(t *testing.T, endpoints []sqliteEndpoint, cfg Config) *sqliteAPI {
	t.Helper()
	ctx := t.Context()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	for _, ep := range endpoints {
		_, err := store.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{Now: testNow, Endpoint: ledger.Endpoint{
			ID: ledger.EndpointID(ep.ns, ep.name), Namespace: ep.ns, Name: ep.name, URL: "https://receiver.example/" + ep.name,
			EventTypes: []string{ep.types}, Secrets: []ledger.SigningSecret{{Value: sensitive.Bytes("whsec_x")}}, AckMode: ledger.AckResponse,
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	pub := &storePublisher{groupcommit.New(store.EventInsertMany, groupcommit.Options{})}
	t.Cleanup(pub.Close)
	cfg.Publisher, cfg.Reader, cfg.Auth = pub, store, StaticTokens{goodToken: {Username: "it"}}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &sqliteAPI{t: t, store: store, pub: pub, srv: srv}
}

// call sends one authenticated request and returns the answer.
func (a *sqliteAPI) call(method, path, body, key string) (int, http.Header, string) {
	a.t.Helper()
	r, err := http.NewRequestWithContext(a.t.Context(), method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+goodToken)
	r.Header.Set("Content-Type", "application/json")
	if key != "" {
		r.Header.Set(IdempotencyKeyHeader, key)
	}
	resp, err := a.srv.Client().Do(r)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// storePublisher publishes straight into the ledger, group-committed as the
// engine does (a closed batcher is publish.ErrStopping), so that the API is
// tested over a real store without an engine.
type storePublisher struct {
	batcher *groupcommit.Batcher[*ledger.EventInsertParams, ledger.EventInsertResult]
}

func (p *storePublisher) Publish(ctx context.Context, params *ledger.EventInsertParams) (ledger.EventInsertResult, error) {
	res, err := p.batcher.Do(ctx, params)
	if errors.Is(err, groupcommit.ErrClosed) {
		err = fmt.Errorf("%w: %w", publish.ErrStopping, err)
	}
	return res, err
}

func (p *storePublisher) Close() { p.batcher.Close() }
