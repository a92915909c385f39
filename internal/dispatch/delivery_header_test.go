package dispatch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

func TestSendNamesTheDelivery(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get(DeliveryIDHeader)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	secret, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	res := NewSender().Send(context.Background(), Request{URL: srv.URL, EventID: "evt_1", DeliveryID: "dlv_7", EventType: "a.b",
		EventTime: time.Now(), SigningSecrets: []sensitive.Bytes{secret}})
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d: %v", res.StatusCode, res.Err)
	}
	if id := <-got; id != "dlv_7" {
		t.Fatalf("%s = %q, want dlv_7", DeliveryIDHeader, id)
	}
}
