package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

const (
	goodToken = "tok-good-0123456789"
	ns        = "shop"
)

var testNow = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// fakePublisher behaves like EventInsertMany for one item: idempotency by
// (namespace, key) and body hash, fan-out to the namespace's endpoints.
type fakePublisher struct {
	mu        sync.Mutex
	byKey     map[string]ledger.EventInsertResult
	published []*ledger.EventInsertParams
	endpoints map[string][]string // namespace -> endpoint names
	err       error               // returned for every publish when set
	itemErr   error               // returned as EventInsertResult.Err when set
	panics    bool
}

func newFakePublisher() *fakePublisher {
	return &fakePublisher{
		byKey:     map[string]ledger.EventInsertResult{},
		endpoints: map[string][]string{ns: {"billing", "audit"}, "other": {"spy"}},
	}
}

func (f *fakePublisher) Publish(ctx context.Context, p *ledger.EventInsertParams) (ledger.EventInsertResult, error) {
	if f.panics {
		panic("publisher bug")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return ledger.EventInsertResult{}, f.err
	}
	if f.itemErr != nil {
		return ledger.EventInsertResult{Err: f.itemErr}, nil
	}
	if p.IdempotencyKey != "" {
		if prev, ok := f.byKey[p.Namespace+"\x00"+p.IdempotencyKey]; ok {
			if !bytes.Equal(prev.Event.BodyHash, p.BodyHash) {
				return ledger.EventInsertResult{Err: fmt.Errorf("key %q: %w", p.IdempotencyKey, ledger.ErrIdempotencyConflict)}, nil
			}
			prev.Duplicate = true
			return prev, nil
		}
	}
	f.published = append(f.published, p)
	res := ledger.EventInsertResult{Event: ledger.Event{
		ID: p.ID, Namespace: p.Namespace, Type: p.Type, Data: p.Data, Secrets: p.Secrets,
		SecretNames: p.SecretNames, ReissueOf: p.ReissueOf, IdempotencyKey: p.IdempotencyKey,
		BodyHash: p.BodyHash, CreatedAt: p.Now,
	}}
	for _, name := range f.endpoints[p.Namespace] {
		res.Deliveries = append(res.Deliveries, ledger.Delivery{
			ID: ledger.NewID("dlv", p.Now), EventID: p.ID, EndpointID: ledger.EndpointID(p.Namespace, name),
			State: ledger.StateScheduled, DueAt: p.Now, CreatedAt: p.Now,
		})
	}
	if p.IdempotencyKey != "" {
		f.byKey[p.Namespace+"\x00"+p.IdempotencyKey] = res
	}
	return res, nil
}

func (f *fakePublisher) last() *ledger.EventInsertParams {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.published) == 0 {
		return nil
	}
	return f.published[len(f.published)-1]
}

// fakeReader is an in-memory Reader.
type fakeReader struct {
	events     map[string]ledger.Event
	deliveries []ledger.Delivery // sorted by ID
	attempts   map[string][]ledger.Attempt
	owners     map[string]string // endpoint ID → owner
	err        error
	lastList   *ledger.DeliveryBrowseParams
}

func (f *fakeReader) EventBrowse(_ context.Context, p *ledger.EventBrowseParams) ([]ledger.Event, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []ledger.Event
	for _, ev := range f.events {
		if (p.ID == "" || ev.ID == p.ID) && (p.Namespace == "" || ev.Namespace == p.Namespace) &&
			(p.Type == "" || ev.Type == p.Type) && ev.ID > p.AfterID {
			ev.Secrets = nil // EventBrowse never reads secrets
			out = append(out, ev)
		}
	}
	slices.SortFunc(out, func(a, b ledger.Event) int { return cmp.Compare(a.ID, b.ID) })
	return out[:min(len(out), ledger.ListLimit(p.Limit))], nil
}

func (f *fakeReader) DeliveryBrowse(_ context.Context, p *ledger.DeliveryBrowseParams) ([]ledger.DeliveryView, error) {
	f.lastList = p
	if f.err != nil {
		return nil, f.err
	}
	var out []ledger.DeliveryView
	for _, d := range f.deliveries {
		namespace, _, _ := strings.Cut(d.EndpointID, "/")
		if (p.ID == "" || d.ID == p.ID) && (p.Namespace == "" || namespace == p.Namespace) &&
			(p.EndpointID == "" || d.EndpointID == p.EndpointID) && (p.EventID == "" || d.EventID == p.EventID) &&
			(len(p.States) == 0 || slices.Contains(p.States, d.State)) &&
			(p.Resolution == "" || d.Resolution == p.Resolution) && d.ID > p.AfterID && len(out) < ledger.ListLimit(p.Limit) {
			out = append(out, ledger.DeliveryView{Delivery: d, Namespace: namespace, EndpointOwner: f.owners[d.EndpointID]})
		}
	}
	return out, nil
}

func (f *fakeReader) AttemptList(_ context.Context, id string) ([]ledger.Attempt, error) {
	if f.err != nil {
		return nil, f.err
	}
	return f.attempts[id], nil
}

// recordingAuth wraps StaticTokens, records every Access and can refuse or
// fail.
type recordingAuth struct {
	StaticTokens
	mu       sync.Mutex
	accesses []Access
	deny     bool
	denyData bool // deny get on webhookevents/data only
	authnErr error
	authzErr error
}

func (a *recordingAuth) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	if a.authnErr != nil {
		return nil, false, a.authnErr
	}
	return a.StaticTokens.AuthenticateRequest(r)
}

func (a *recordingAuth) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	a.mu.Lock()
	a.accesses = append(a.accesses, Access{Verb: attrs.GetVerb(), APIGroup: attrs.GetAPIGroup(), Resource: attrs.GetResource(),
		Subresource: attrs.GetSubresource(), Namespace: attrs.GetNamespace(), Name: attrs.GetName()})
	a.mu.Unlock()
	switch {
	case a.authzErr != nil:
		return authorizer.DecisionNoOpinion, "", a.authzErr
	case a.deny, a.denyData && attrs.GetSubresource() == SubresourceData:
		return authorizer.DecisionDeny, "policy says no", nil
	}
	return a.StaticTokens.Authorize(ctx, attrs)
}

// env is a handler over fakes, with a log that tests can search.
type env struct {
	pub    *fakePublisher
	reader *fakeReader
	auth   *recordingAuth
	h      *Handler
	logs   *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) write(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(prefix + " " + args + "\n")
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newEnv(t testing.TB, mutate ...func(*Config)) *env {
	t.Helper()
	e := &env{
		pub:    newFakePublisher(),
		reader: &fakeReader{events: map[string]ledger.Event{}, attempts: map[string][]ledger.Attempt{}},
		auth:   &recordingAuth{StaticTokens: StaticTokens{goodToken: {Username: "alice"}}},
		logs:   &lockedBuffer{},
	}
	cfg := Config{
		Publisher: e.pub,
		Reader:    e.reader,
		Auth:      e.auth,
		Log:       funcr.New(e.logs.write, funcr.Options{Verbosity: 10}),
		Now:       func() time.Time { return testNow },
	}
	for _, m := range mutate {
		m(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	return e
}

// req describes a request; zero fields take the defaults of a good publish.
type req struct {
	method  string
	path    string
	body    string
	headers map[string]string // "" value deletes the default
}

func (e *env) do(t testing.TB, r req) *httptest.ResponseRecorder {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.path == "" {
		r.path = "/v1/namespaces/" + ns + "/events"
	}
	hr := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
	hr.Header.Set("Authorization", "Bearer "+goodToken)
	hr.Header.Set("Content-Type", "application/json")
	for k, v := range r.headers {
		if v == "" {
			hr.Header.Del(k)
		} else {
			hr.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, hr)
	return rec
}

// wantError checks an error answer: status, JSON content type, and the
// exact shape {"error":{"code","message","field"?}}.
func wantError(t testing.TB, rec *httptest.ResponseRecorder, status int, code Code, field string) ErrorDetail {
	t.Helper()
	if rec.Code != status {
		t.Errorf("status = %d, want %d; body %s", rec.Code, status, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var body ErrorBody
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("error body %q: %v", rec.Body, err)
	}
	if body.Error.Code != code || body.Error.Field != field || body.Error.Message == "" {
		t.Errorf("error = %+v, want code %s, field %q and a message", body.Error, code, field)
	}
	return body.Error
}

func decode[T any](t testing.TB, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %T from %s: %v", v, rec.Body, err)
	}
	return v
}

var errBackend = errors.New("backend exploded at 10.0.0.7:5432")
