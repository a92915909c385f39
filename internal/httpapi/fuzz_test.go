package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// lastPublisher accepts everything and keeps only the last params.
type lastPublisher struct {
	mu   sync.Mutex
	last *ledger.EventInsertParams
}

func (p *lastPublisher) Publish(_ context.Context, params *ledger.EventInsertParams) (ledger.EventInsertResult, error) {
	p.mu.Lock()
	p.last = params
	p.mu.Unlock()
	return ledger.EventInsertResult{Event: ledger.Event{ID: params.ID, Namespace: params.Namespace, Type: params.Type,
		SecretNames: params.SecretNames, ReissueOf: params.ReissueOf, CreatedAt: params.Now}}, nil
}

// FuzzPublishBody throws arbitrary bodies at the publish handler: it must
// never answer 5xx or panic, must answer every refusal with a coded JSON
// error, and must store only canonical JSON whose re-parse hashes the same.
func FuzzPublishBody(f *testing.F) {
	for _, seed := range []string{
		validBody,
		`{"type":"fan.confirm","data":{"a":[1,2.5e3,-0,null,true,"x"]},"secrets":{"code":"1"},"reissueOf":"evt_01hzzzzzzzzzzzzzzzzzzzzzzz"}`,
		`{"type":"a","data":{"n":123456789012345678901234567890}}`,
		`{"type":"a","data":{"k":1,"k":2}}`,
		`{"type":"a","data":{"token":1},"secrets":{"token":2}}`,
		`{"type":"a","data":{}}{}`,
		`{"type":"a","data":{},"secrets":null,"reissueOf":null}`,
		`{"type":"hookkeeper.test","data":{},"endpoint":"billing"}`,
		`{"type":"a","data":{"\u0000":"\ud800"}}`,
		"{\"type\":\"a\",\"data\":{\"x\":\"\xff\"}}",
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`,
		`{"type":"a","data":{"x":{"y":{"z":[[[]]]}}}}`,
		``, ` `, `null`, `"s"`, `{`, `}`, `{"type":`, `{"":""}`,
	} {
		f.Add([]byte(seed))
	}
	pub := &lastPublisher{}
	h, err := New(Config{
		Publisher:    pub,
		Reader:       &fakeReader{},
		Auth:         StaticTokens{goodToken: {Username: "fuzz"}},
		Now:          func() time.Time { return testNow },
		MaxBodyBytes: 64 << 10,
		MaxSecrets:   4,
	})
	if err != nil {
		f.Fatal(err)
	}
	// The publish core alone, to re-parse what the handler stored.
	reparsed := &lastPublisher{}
	core, err := publish.New(publish.Config{Committer: reparsed, Now: func() time.Time { return testNow }, MaxSecrets: 4})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/namespaces/shop/events", bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+goodToken)
		r.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)

		if rec.Code >= 500 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		if rec.Code != http.StatusCreated {
			var e ErrorBody
			dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("status %d without a coded JSON error: %s (%v)", rec.Code, rec.Body, err)
			}
			return
		}

		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		pub.mu.Lock()
		p := pub.last
		pub.mu.Unlock()
		var data map[string]json.RawMessage
		if err := json.Unmarshal(p.Data, &data); err != nil {
			t.Fatalf("stored data %s is not an object: %v", p.Data, err)
		}
		if !slices.IsSorted(p.SecretNames) {
			t.Fatalf("secret names %v not sorted", p.SecretNames)
		}
		for _, n := range p.SecretNames {
			if _, clash := data[n]; clash {
				t.Fatalf("secret %q collides with data", n)
			}
		}
		// The canonical form is a fixed point: re-parsing it hashes the same.
		re := map[string]any{"type": p.Type, "data": p.Data}
		if p.Secrets != nil {
			re["secrets"] = json.RawMessage(p.Secrets.Reveal())
		}
		if p.ReissueOf != "" {
			re["reissueOf"] = p.ReissueOf
		}
		if name, ok := strings.CutPrefix(p.Endpoint, p.Namespace+"/"); ok {
			re["endpoint"] = name
		}
		reBody, err := json.Marshal(re)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := core.PublishJSON(t.Context(), p.Namespace, "", reBody); err != nil {
			t.Fatalf("canonical body %s refused: %v", reBody, err)
		}
		again := reparsed.last
		if !bytes.Equal(again.BodyHash, p.BodyHash) || !bytes.Equal(again.Data, p.Data) {
			t.Fatalf("canonical form is not stable: %s -> %s", p.Data, again.Data)
		}
	})
}
