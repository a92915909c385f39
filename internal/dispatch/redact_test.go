package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

func TestRedactSecrets(t *testing.T) {
	secrets := sensitive.Bytes(`{"token":"tok_8f3a9c","code":"123456","short":"ab","nested":{"k":"v-very-secret"},"quoted":"a\"b-secret"}`)
	tests := []struct{ name, in, want string }{
		{"an echoed token", `{"received":{"token":"tok_8f3a9c"}}`, `{"received":{"token":"[redacted]"}}`},
		{"a code inside text", `code 123456 is invalid`, `code [redacted] is invalid`},
		{"a non-string secret value", `{"k":"v-very-secret"}`, `[redacted]`},
		{"a value with an escaped quote", `saw a\"b-secret`, `saw [redacted]`},
		{"short values are left alone", `ab ab`, `ab ab`},
		{"no secret, no change", `ok`, `ok`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(redactSecrets([]byte(tt.in), secrets)); got != tt.want {
				t.Errorf("redactSecrets(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	if got := redactSecrets([]byte("tok_8f3a9c"), nil); string(got) != "tok_8f3a9c" {
		t.Errorf("without secrets the excerpt changed: %q", got)
	}
	if got := redactSecrets([]byte("x"), sensitive.Bytes("not json")); string(got) != "x" {
		t.Errorf("unparseable secrets changed the excerpt: %q", got)
	}
}

func TestSendRedactsSecretsAnEchoingReceiverReturns(t *testing.T) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.Copy(w, r.Body)
	}))
	defer echo.Close()
	secret, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	res := NewSender().Send(context.Background(), Request{
		URL: echo.URL, EventID: "evt_1", EventType: "fan.confirmation_requested", EventTime: time.Now(),
		Data: json.RawMessage(`{"fan":7}`), Secrets: sensitive.Bytes(`{"confirmToken":"ct_2f9d1e77"}`),
		SigningSecrets: []sensitive.Bytes{secret},
	})
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, err %v", res.StatusCode, res.Err)
	}
	if bytes.Contains(res.Excerpt, []byte("ct_2f9d1e77")) || !bytes.Contains(res.Excerpt, []byte(`"confirmToken":"[redacted]"`)) {
		t.Fatalf("excerpt %s", res.Excerpt)
	}
}
