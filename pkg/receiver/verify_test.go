package receiver

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/signing"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// TestReceiveVerifies holds the answer of each kind of request: what
// verifies runs the callback once, what does not never reaches it.
func TestReceiveVerifies(t *testing.T) {
	t.Parallel()
	db := openDB(t, "sqlite")
	c := &clock{now: t0}
	r := newReceiver(t, db, c, Options{MaxBodyBytes: 4 << 10})
	if _, err := db.Exec(effectsTable); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		d       delivery
		edit    func(*http.Request)
		status  int
		err     error
		effects int
	}{
		{name: "good", d: delivery{id: "msg_good", at: t0}, status: http.StatusOK, effects: 1},
		{name: "signed with the previous secret", d: delivery{id: "msg_prev", at: t0, secrets: []string{previous}}, status: http.StatusOK, effects: 1},
		{name: "signed with both during a rotation", d: delivery{id: "msg_both", at: t0, secrets: []string{stranger, current}}, status: http.StatusOK, effects: 1},
		{name: "at the edge of the tolerance", d: delivery{id: "msg_edge", at: t0.Add(-DefaultTolerance)}, status: http.StatusOK, effects: 1},
		{name: "tampered body", d: delivery{id: "msg_tampered", at: t0}, edit: func(r *http.Request) {
			r.Body = bodyOf(strings.Replace(string(envelope("msg_tampered")), `"order":7`, `"order":8`, 1))
		}, status: http.StatusUnauthorized, err: ErrSignature},
		{name: "tampered id", d: delivery{id: "msg_a", at: t0}, edit: func(r *http.Request) {
			r.Header.Set(signing.HeaderID, "msg_b")
		}, status: http.StatusUnauthorized, err: ErrSignature},
		{name: "wrong secret", d: delivery{id: "msg_wrong", at: t0, secrets: []string{stranger}}, status: http.StatusUnauthorized, err: ErrSignature},
		{name: "stale timestamp", d: delivery{id: "msg_stale", at: t0.Add(-DefaultTolerance - time.Second)}, status: http.StatusUnauthorized, err: ErrSignature},
		{name: "timestamp from the future", d: delivery{id: "msg_future", at: t0.Add(DefaultTolerance + time.Second)}, status: http.StatusUnauthorized, err: ErrSignature},
		{name: "no webhook-id", d: delivery{id: "msg_noid", at: t0}, edit: del(signing.HeaderID), status: http.StatusBadRequest, err: ErrMalformed},
		{name: "no webhook-timestamp", d: delivery{id: "msg_nots", at: t0}, edit: del(signing.HeaderTimestamp), status: http.StatusBadRequest, err: ErrMalformed},
		{name: "no webhook-signature", d: delivery{id: "msg_nosig", at: t0}, edit: del(signing.HeaderSignature), status: http.StatusBadRequest, err: ErrMalformed},
		{name: "timestamp not unix seconds", d: delivery{id: "msg_rfc", at: t0}, edit: func(r *http.Request) {
			r.Header.Set(signing.HeaderTimestamp, t0.Format(time.RFC3339))
		}, status: http.StatusBadRequest, err: ErrMalformed},
		{name: "signature of another version only", d: delivery{id: "msg_v2", at: t0}, edit: func(r *http.Request) {
			r.Header.Set(signing.HeaderSignature, strings.Replace(r.Header.Get(signing.HeaderSignature), "v1,", "v2,", 1))
		}, status: http.StatusUnauthorized, err: ErrSignature},
		{name: "signed body that is not an envelope", d: delivery{id: "msg_notjson", at: t0, body: []byte("order 7")}, status: http.StatusBadRequest, err: ErrMalformed},
		{name: "body over the limit", d: delivery{id: "msg_big", at: t0, body: []byte(`{"data":"` + strings.Repeat("x", 4<<10) + `"}`)},
			status: http.StatusRequestEntityTooLarge, err: ErrBodyTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.d.request(t)
			if tt.edit != nil {
				tt.edit(req)
			}
			ran := 0
			w := httptest.NewRecorder()
			res := r.Receive(w, req, func(ctx context.Context, tx *sql.Tx, ev *Event) error {
				ran++
				return insertEffect(ctx, tx, ev)
			})
			if res.Status != tt.status || w.Code != tt.status {
				t.Errorf("status %d (answered %d), want %d (%v)", res.Status, w.Code, tt.status, res.Err)
			}
			if tt.err != nil && !errors.Is(res.Err, tt.err) {
				t.Errorf("error %v, want %v", res.Err, tt.err)
			}
			if tt.err == nil && res.Err != nil {
				t.Errorf("error %v", res.Err)
			}
			if ran != tt.effects || countEffects(t, db, tt.d.id) != tt.effects {
				t.Errorf("callback ran %d times, %d effects; want %d", ran, countEffects(t, db, tt.d.id), tt.effects)
			}
			if res.Err != nil {
				for _, secret := range []string{current, previous, stranger} {
					if strings.Contains(res.Err.Error(), secret) || strings.Contains(w.Body.String(), secret) {
						t.Errorf("the error or the answer holds a secret: %v %s", res.Err, w.Body)
					}
				}
				if strings.Contains(w.Body.String(), tt.d.id) {
					t.Errorf("the answer echoes a header: %s", w.Body)
				}
			}
		})
	}
}

// TestKeepUntil holds how long a record is kept, as a pure function of the
// header, the signed timestamp and now.
func TestKeepUntil(t *testing.T) {
	r := &Receiver{opts: Options{Tolerance: DefaultTolerance, DefaultRetention: 24 * time.Hour}}
	capped := &Receiver{opts: Options{Tolerance: DefaultTolerance, DefaultRetention: 24 * time.Hour, MaxRetention: 48 * time.Hour}}
	tests := []struct {
		name   string
		r      *Receiver
		header string
		signed time.Time
		want   time.Time
	}{
		{"the header", r, "2026-03-11T10:00:00Z", t0, time.Date(2026, 3, 11, 10, 0, 0, 0, time.UTC)},
		{"another zone, the same instant", r, "2026-03-11T11:00:00+01:00", t0, time.Date(2026, 3, 11, 10, 0, 0, 0, time.UTC)},
		{"sub-millisecond rounded up", r, "2026-03-11T10:00:00.0000001Z", t0, time.Date(2026, 3, 11, 10, 0, 0, int(time.Millisecond), time.UTC)},
		{"no header: the default retention", r, "", t0, t0.Add(24 * time.Hour)},
		{"unreadable header: the default retention", r, "next tuesday", t0, t0.Add(24 * time.Hour)},
		{"in the past: until the signature expires", r, "2026-03-01T00:00:00Z", t0, t0.Add(DefaultTolerance)},
		{"signed a minute ago: the tolerance from the signature", r, "2026-03-01T00:00:00Z", t0.Add(-time.Minute), t0.Add(DefaultTolerance - time.Minute)},
		{"over the cap", capped, "2027-01-01T00:00:00Z", t0, t0.Add(48 * time.Hour)},
		{"under the cap", capped, "2026-03-05T00:00:00Z", t0, time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.keepUntil(tt.header, tt.signed, t0); !got.Equal(tt.want) || got.Location() != time.UTC {
				t.Errorf("keepUntil(%q) = %v, want %v", tt.header, got, tt.want)
			}
		})
	}
}

// TestNewRefuses holds New's checks; its errors never quote a secret.
func TestNewRefuses(t *testing.T) {
	t.Parallel()
	db := openDB(t, "sqlite")
	for name, opts := range map[string]Options{
		"no secret":                     {},
		"a secret that is not one":      {Secrets: []string{"whsec_short"}},
		"a bad previous secret":         {Secrets: []string{current, "whsec_!!!"}},
		"a table name with SQL":         {Secrets: []string{current}, Table: "t; DROP TABLE x"},
		"a table name too long":         {Secrets: []string{current}, Table: strings.Repeat("t", maxTableName+1)},
		"a digit first":                 {Secrets: []string{current}, Table: "1t"},
		"an acknowledger without a URL": {Secrets: []string{current}, Acknowledger: &Acknowledger{}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(t.Context(), db, opts)
			if err == nil {
				t.Fatal("New accepted it")
			}
			if strings.Contains(err.Error(), current) {
				t.Errorf("the error quotes the secret: %v", err)
			}
		})
	}
}

// TestHeadersMatchTheSender keeps the package's header names equal to
// those hookkeeper sends.
func TestHeadersMatchTheSender(t *testing.T) {
	if DeliveryIDHeader != dispatch.DeliveryIDHeader {
		t.Errorf("DeliveryIDHeader = %q, the sender sends %q", DeliveryIDHeader, dispatch.DeliveryIDHeader)
	}
	if ReissueRequestedEventType != ledger.ReissueRequestedEventType {
		t.Errorf("ReissueRequestedEventType = %q, the ledger sends %q", ReissueRequestedEventType, ledger.ReissueRequestedEventType)
	}
	if ReplayUntilHeader != wire.ReplayUntilHeader {
		t.Errorf("ReplayUntilHeader = %q, the sender sends %q", ReplayUntilHeader, wire.ReplayUntilHeader)
	}
}
