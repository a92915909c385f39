package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// benchBody is the load generator's publish body (test/bench/load.go: one
// number and a 1,000-byte string).
var benchBody = `{"type":"order.created","data":{"n":12345,"pad":"` + strings.Repeat("x", 1000) + `"}}`

// BenchmarkPublishHandler measures the whole HTTP publish path short of the
// ledger: routing, authentication, body read, parse and the answer.
func BenchmarkPublishHandler(b *testing.B) {
	h, err := New(Config{
		Publisher:    &lastPublisher{},
		Reader:       &fakeReader{},
		Auth:         StaticTokens{goodToken: {Username: "bench"}},
		Now:          func() time.Time { return testNow },
		MaxBodyBytes: 64 << 10,
	})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(benchBody)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/v1/namespaces/shop/events", bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+goodToken)
		r.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != http.StatusCreated {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}
