package receiver

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// ackServer plays hookkeeper's POST /v1/acks/{deliveryID} as
// docs/http-api.md describes it: the body signed with one of the
// endpoint's secrets within 5 minutes, parsed strictly once verified, the
// delivery repeated in the body; 200, or 409 for a delivery not awaiting
// an acknowledgement.
type ackServer struct {
	srv     *httptest.Server
	secrets []sensitive.Bytes
	now     time.Time

	mu       sync.Mutex
	awaiting map[string]bool
	down     bool // answers 500
	acks     []ackSeen
}

type ackSeen struct {
	Delivery, Outcome, Reason string
}

func newAckServer(t *testing.T, secrets ...string) *ackServer {
	s := &ackServer{now: t0, awaiting: map[string]bool{}}
	for _, sec := range secrets {
		s.secrets = append(s.secrets, sensitive.Bytes(sec))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/acks/{deliveryID}", s.serve)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *ackServer) await(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.awaiting[id] = true
	}
}

func (s *ackServer) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

func (s *ackServer) seen() []ackSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ackSeen(nil), s.acks...)
}

func (s *ackServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fail := func(status int, code string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"error":{"code":"`+code+`","message":"refused by the test's ack server"}}`)
	}
	if s.down {
		fail(http.StatusInternalServerError, "Internal")
		return
	}
	if r.Header.Get("Content-Type") != "application/json" {
		fail(http.StatusUnsupportedMediaType, "UnsupportedMediaType")
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<10))
	if err := signing.Verify(s.secrets, r.Header.Get(signing.HeaderID), r.Header.Get(signing.HeaderTimestamp),
		r.Header.Get(signing.HeaderSignature), body, s.now, signing.DefaultTolerance); err != nil {
		fail(http.StatusUnauthorized, "InvalidSignature")
		return
	}
	var ack struct {
		DeliveryID string  `json:"deliveryID"`
		Outcome    string  `json:"outcome"`
		Reason     *string `json:"reason"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	id := r.PathValue("deliveryID")
	if err := dec.Decode(&ack); err != nil || dec.More() || ack.DeliveryID != id ||
		(ack.Outcome != "processed" && ack.Outcome != "rejected") || (ack.Reason != nil && len(*ack.Reason) > 256) {
		fail(http.StatusBadRequest, "InvalidField")
		return
	}
	if !s.awaiting[id] {
		fail(http.StatusConflict, "NotAwaitingAck")
		return
	}
	s.awaiting[id] = false
	seen := ackSeen{Delivery: id, Outcome: ack.Outcome}
	if ack.Reason != nil {
		seen.Reason = *ack.Reason
	}
	s.acks = append(s.acks, seen)
	_ = json.NewEncoder(w).Encode(map[string]string{"deliveryID": id, "state": "delivered"})
}

// TestAcknowledge holds the Acknowledger against the ack route.
func TestAcknowledge(t *testing.T) {
	t.Parallel()
	hk := newAckServer(t, previous, current) // a rotation on hookkeeper's side
	hk.await("dlv_1", "dlv_2", "dlv_3")
	a := &Acknowledger{APIURL: hk.srv.URL + "/", Secret: current, Now: func() time.Time { return t0 }}
	ctx := t.Context()

	if err := a.Acknowledge(ctx, "dlv_1", Processed, ""); err != nil {
		t.Errorf("processed: %v", err)
	}
	long := strings.Repeat("é", 200) // 400 bytes
	if err := a.Acknowledge(ctx, "dlv_2", Rejected, long); err != nil {
		t.Errorf("rejected: %v", err)
	}
	if err := a.Acknowledge(ctx, "dlv_1", Processed, ""); !errors.Is(err, ErrNotAwaitingAck) {
		t.Errorf("again: %v, want ErrNotAwaitingAck", err)
	}
	wrong := &Acknowledger{APIURL: hk.srv.URL, Secret: stranger, Now: func() time.Time { return t0 }}
	if err := wrong.Acknowledge(ctx, "dlv_3", Processed, ""); err == nil || !strings.Contains(err.Error(), "401 InvalidSignature") ||
		strings.Contains(err.Error(), stranger) {
		t.Errorf("another secret: %v, want hookkeeper's 401 without the secret", err)
	}
	stale := &Acknowledger{APIURL: hk.srv.URL, Secret: current, Now: func() time.Time { return t0.Add(-time.Hour) }}
	if err := stale.Acknowledge(ctx, "dlv_3", Processed, ""); err == nil {
		t.Error("an ack signed an hour ago was accepted")
	}
	if err := a.Acknowledge(ctx, "dlv_3", "done", ""); err == nil {
		t.Error("an unknown outcome was sent")
	}
	if err := (&Acknowledger{APIURL: "ftp://x", Secret: current}).Acknowledge(ctx, "dlv_3", Processed, ""); err == nil {
		t.Error("an ftp URL was accepted")
	}

	want := []ackSeen{{"dlv_1", "processed", ""}, {"dlv_2", "rejected", strings.Repeat("é", 128)}}
	if got := hk.seen(); !equalAcks(got, want) {
		t.Errorf("acks %+v, want %+v", got, want)
	}
}

func equalAcks(a, b []ackSeen) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReceiveAcknowledges holds Callback mode: the outcome posted for the
// first delivery, again for a duplicate under another delivery, a
// rejection acknowledged as such, an ack that cannot be posted answered
// 503 with the effect kept, and posted by the retry.
func TestReceiveAcknowledges(t *testing.T) {
	t.Parallel()
	db := openDB(t, "sqlite")
	hk := newAckServer(t, current)
	c := &clock{now: t0}
	r := setup(t, db, c, Options{Acknowledger: &Acknowledger{APIURL: hk.srv.URL}}) // Secret: the receiver's first
	rejecting := func(context.Context, *sql.Tx, *Event) error { return Reject("out of stock") }

	steps := []struct {
		name      string
		d         delivery
		process   ProcessFunc
		await     string
		down      bool
		status    int
		duplicate bool
		ack       *ackSeen
	}{
		{name: "first", d: delivery{id: "msg_1", deliveryID: "dlv_a", at: t0}, await: "dlv_a", status: 200, ack: &ackSeen{"dlv_a", "processed", ""}},
		{name: "the same delivery again, acknowledged already", d: delivery{id: "msg_1", deliveryID: "dlv_a", at: t0}, status: 200, duplicate: true},
		{name: "a replay: a new delivery of the same event", d: delivery{id: "msg_1", deliveryID: "dlv_b", at: t0}, await: "dlv_b", status: 200, duplicate: true,
			ack: &ackSeen{"dlv_b", "processed", ""}},
		{name: "rejected", d: delivery{id: "msg_2", deliveryID: "dlv_c", at: t0}, process: rejecting, await: "dlv_c", status: 200,
			ack: &ackSeen{"dlv_c", "rejected", "out of stock"}},
		{name: "its retry, rejected the same", d: delivery{id: "msg_2", deliveryID: "dlv_d", at: t0}, await: "dlv_d", status: 200, duplicate: true,
			ack: &ackSeen{"dlv_d", "rejected", "out of stock"}},
		{name: "hookkeeper unreachable", d: delivery{id: "msg_3", deliveryID: "dlv_e", at: t0}, await: "dlv_e", down: true, status: 503},
		{name: "the attempt's retry", d: delivery{id: "msg_3", deliveryID: "dlv_e", at: t0}, status: 200, duplicate: true, ack: &ackSeen{"dlv_e", "processed", ""}},
		{name: "no delivery id: nothing to acknowledge", d: delivery{id: "msg_4", at: t0}, status: 200},
	}
	for _, s := range steps {
		before := len(hk.seen())
		if s.await != "" {
			hk.await(s.await)
		}
		hk.setDown(s.down)
		process := s.process
		if process == nil {
			process = insertEffect
		}
		res, w := receive(t, r, s.d, process)
		if res.Status != s.status || res.Duplicate != s.duplicate {
			t.Errorf("%s: %d duplicate=%t (%v, %s), want %d duplicate=%t", s.name, res.Status, res.Duplicate, res.Err, w.Body, s.status, s.duplicate)
		}
		if s.status == 503 && !errors.Is(res.Err, ErrAcknowledge) {
			t.Errorf("%s: %v, want ErrAcknowledge", s.name, res.Err)
		}
		got := hk.seen()[before:]
		switch {
		case s.ack == nil && len(got) != 0:
			t.Errorf("%s: acknowledged %+v, want nothing", s.name, got)
		case s.ack != nil && (len(got) != 1 || got[0] != *s.ack):
			t.Errorf("%s: acknowledged %+v, want %+v", s.name, got, *s.ack)
		}
	}
	if n := countEffects(t, db, "msg_3"); n != 1 {
		t.Errorf("the effect whose ack failed: %d, want 1", n)
	}
}
