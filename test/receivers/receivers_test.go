package receivers_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
	"github.com/hookkeeper/hookkeeper/test/receivers"
)

// send posts a delivery of id signed with secret (unsigned when secret is
// empty) and returns the answer's status.
func send(t *testing.T, ctx context.Context, url, secret, id string) int {
	t.Helper()
	body := []byte(`{"type":"order.paid","timestamp":"2026-12-07T10:00:00Z","data":{"order":42}}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/hooks", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	if secret != "" {
		sig, err := signing.SignatureHeader([]sensitive.Bytes{sensitive.Bytes(secret)}, id, now, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("webhook-signature", sig)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestVerifiesAndDeduplicatesThroughPkgReceiver: without the secret a
// verifying receiver refuses everything; with it, a request answered
// without a 2xx is not processed (its retry asks the test again), and a
// copy of a processed event is a duplicate pkg/receiver answers 200
// without asking the test.
func TestVerifiesAndDeduplicatesThroughPkgReceiver(t *testing.T) {
	secret, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int64
	r := receivers.New(receivers.Options{Verify: true, Respond: func(_ *http.Request, rc *receivers.Request) int {
		asked.Add(1)
		if !rc.Verified || rc.N < 4 { // the first verified request, the third
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	}})
	t.Cleanup(r.Close)
	ctx := t.Context()

	if got := send(t, ctx, r.URL(), string(secret.Reveal()), "msg_1"); got != http.StatusUnauthorized {
		t.Fatalf("before UseSecrets: %d, want 401", got)
	}
	if err := r.UseSecrets(string(secret.Reveal())); err != nil {
		t.Fatal(err)
	}
	other, _ := signing.GenerateSecret()
	for i, c := range []struct {
		secret string
		want   int
	}{
		{string(other.Reveal()), http.StatusUnauthorized}, // signed with another secret
		{string(secret.Reveal()), http.StatusServiceUnavailable},
		{string(secret.Reveal()), http.StatusNoContent},
		{string(secret.Reveal()), http.StatusOK}, // the duplicate
	} {
		if got := send(t, ctx, r.URL(), c.secret, "msg_1"); got != c.want {
			t.Fatalf("request %d: %d, want %d\n%s", i+2, got, c.want, r)
		}
	}
	if n := asked.Load(); n != 2 {
		t.Errorf("Respond asked %d times, want 2 (not for refused requests nor the duplicate)", n)
	}
	got := r.Of("msg_1")
	if len(got) != 5 || got[1].Verified || !got[2].Verified || !got[4].Duplicate || got[3].Duplicate || got[4].N != 5 {
		t.Fatalf("recorded:\n%s", r)
	}
	if first := r.FirstAnswered2xx()["msg_1"]; !first.Equal(got[3].At) {
		t.Errorf("first 2xx at %v, want the fourth request's arrival %v", first, got[3].At)
	}
}

// TestSlowReceiverRecordsCutsAndOverlaps: a sender that hangs up during
// the delay is recorded as cut, and two copies of one event held at once
// count as an overlap.
func TestSlowReceiverRecordsCutsAndOverlaps(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{}, 2)
	r := receivers.New(receivers.Options{Respond: func(req *http.Request, rc *receivers.Request) int {
		if rc.WebhookID == "msg_held" {
			held <- struct{}{}
			<-release
		}
		return http.StatusNoContent
	}, Delay: time.Millisecond})
	t.Cleanup(r.Close)

	done := make(chan int, 2)
	for range 2 {
		go func() { done <- send(t, context.Background(), r.URL(), "", "msg_held") }()
	}
	<-held
	<-held
	if n := r.InFlight(); n != 2 {
		t.Errorf("in flight %d, want 2", n)
	}
	close(release)
	for range 2 {
		if got := <-done; got != http.StatusNoContent {
			t.Errorf("held request answered %d, want 204", got)
		}
	}
	if n := r.Overlaps(); n != 1 {
		t.Errorf("overlaps %d, want 1", n)
	}
	if got := r.Repeated(); len(got) != 1 || got[0] != "msg_held x2" {
		t.Errorf("repeated %q, want msg_held x2", got)
	}

	slow := receivers.New(receivers.Options{Delay: time.Hour})
	t.Cleanup(slow.Close)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- send(t, ctx, slow.URL(), "", "msg_cut") }()
	for slow.InFlight() == 0 {
		time.Sleep(time.Millisecond) // polling for the arrival, not for an outcome
	}
	cancel()
	<-done
	for slow.InFlight() != 0 {
		time.Sleep(time.Millisecond) // polling for the handler to see the hang-up
	}
	if got := slow.Of("msg_cut"); len(got) != 1 || !got[0].Cut || got[0].Status != 0 {
		t.Fatalf("recorded:\n%s", slow)
	}
	byID, total := slow.Counts()
	if byID["msg_cut"] != 1 || total != 1 {
		t.Errorf("counts %v %d, want msg_cut once", byID, total)
	}
}
