package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/credential"
	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// BenchmarkSend measures whole attempts, envelope and signature included,
// to a loopback receiver that reads the body and answers 204, from
// parallel goroutines sharing one Sender (the engine's shape). The
// receiver runs on the same cores, so the figure is a lower bound of what
// the sender alone sustains.
func BenchmarkSend(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	req := benchRequest(b, srv.URL)
	s := dispatch.NewSender()
	b.SetParallelism(16) // 16 × GOMAXPROCS concurrent attempts
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if res := s.Send(ctx, req); res.StatusCode != http.StatusNoContent {
				b.Errorf("result %+v", res)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "attempts/s")
}

// BenchmarkSendWithCredentials is BenchmarkSend for an endpoint with a
// credential header and a bearer token, prepared once as the engine does
// at registration: an attempt only applies them.
func BenchmarkSendWithCredentials(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	req := benchRequest(b, srv.URL)
	req.Headers = []wire.Header{{Name: "X-Tenant", Value: "a"}}
	s := dispatch.NewSender()
	req.Credentials = s.Prepare("ns/bench", srv.URL, req.Headers, &credential.Set{
		Bearer:  sensitive.Bytes("bearer-token-for-the-benchmark"),
		Headers: []credential.Header{{Name: "X-Api-Key", Value: sensitive.Bytes("api-key-for-the-benchmark")}},
	})
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if res := s.Send(ctx, req); res.StatusCode != http.StatusNoContent {
				b.Errorf("result %+v", res)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "attempts/s")
}

// BenchmarkEnvelope measures the envelope alone (1 KiB of data), without
// and with one-time secrets to merge.
func BenchmarkEnvelope(b *testing.B) {
	for _, secrets := range []string{"", `{"confirm":"tok-123","recovery":"rec-456"}`} {
		name := "plain"
		if secrets != "" {
			name = "secrets"
		}
		b.Run(name, func(b *testing.B) {
			req := benchRequest(b, "http://127.0.0.1/")
			if secrets != "" {
				req.Secrets = sensitive.Bytes(secrets)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := dispatch.Envelope(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchRequest has 1 KiB of data and one signing secret.
func benchRequest(b *testing.B, url string) dispatch.Request {
	req := signedRequest(b, url, mustSecret(b))
	req.EventTime = time.Now()
	req.Headers = []wire.Header{{Name: "Authorization", Value: "Bearer static"}}
	data := fmt.Sprintf(`{"user":{"id":"u_123","email":"someone@example.com"},"pad":%q}`, strings.Repeat("x", 1024-70))
	req.Data = json.RawMessage(data)
	if n := len(req.Data); n < 1000 || n > 1100 {
		b.Fatalf("data is %d bytes", n)
	}
	return req
}
