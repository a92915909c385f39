package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// fakeAcknowledger holds deliveries by ID with their endpoint's secrets.
type fakeAcknowledger struct {
	secrets map[string][]sensitive.Bytes
	states  map[string]ledger.DeliveryState
	got     []ledger.AckRecordParams
}

func (f *fakeAcknowledger) AckSecrets(_ context.Context, id string) ([]sensitive.Bytes, error) {
	s, ok := f.secrets[id]
	if !ok {
		return nil, fmt.Errorf("delivery %s: %w", id, ledger.ErrNotFound)
	}
	return s, nil
}

func (f *fakeAcknowledger) Acknowledge(_ context.Context, p *ledger.AckRecordParams) (ledger.Delivery, error) {
	st := f.states[p.DeliveryID]
	if st != ledger.StateAwaitingAck {
		return ledger.Delivery{ID: p.DeliveryID, State: st}, fmt.Errorf("ack: %w", ledger.ErrNotAwaitingAck)
	}
	f.got = append(f.got, *p)
	if p.Outcome == ledger.AckRejected {
		return ledger.Delivery{ID: p.DeliveryID, State: ledger.StateExhausted, ExhaustReason: ledger.ExhaustAckRejected}, nil
	}
	return ledger.Delivery{ID: p.DeliveryID, State: ledger.StateDelivered}, nil
}

func TestAcknowledgements(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	secretA, _ := signing.GenerateSecret()
	secretB, _ := signing.GenerateSecret()
	signed := func(secret sensitive.Bytes, body string, at time.Time) http.Header {
		h := http.Header{}
		sig, err := signing.Sign(secret, "ack_1", at, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		h.Set("Content-Type", "application/json")
		h.Set(signing.HeaderID, "ack_1")
		h.Set(signing.HeaderTimestamp, fmt.Sprint(at.Unix()))
		h.Set(signing.HeaderSignature, sig)
		return h
	}
	body := func(id, outcome string) string {
		return fmt.Sprintf(`{"deliveryID":%q,"outcome":%q,"reason":"customer unknown"}`, id, outcome)
	}

	tests := []struct {
		name       string
		method     string
		delivery   string
		body       string
		header     http.Header
		wantStatus int
		wantCode   Code
		wantState  string
	}{
		{name: "a signed processed ack completes the delivery", delivery: "dlv_a", body: body("dlv_a", "processed"),
			header: signed(secretA, body("dlv_a", "processed"), now), wantStatus: 200, wantState: "delivered"},
		{name: "a signed rejection exhausts it", delivery: "dlv_a", body: body("dlv_a", "rejected"),
			header: signed(secretA, body("dlv_a", "rejected"), now), wantStatus: 200, wantState: "exhausted"},
		{name: "another endpoint's secret is refused", delivery: "dlv_a", body: body("dlv_a", "processed"),
			header: signed(secretB, body("dlv_a", "processed"), now), wantStatus: 401, wantCode: CodeInvalidSignature},
		{name: "a tampered body is refused", delivery: "dlv_a", body: body("dlv_a", "rejected"),
			header: signed(secretA, body("dlv_a", "processed"), now), wantStatus: 401, wantCode: CodeInvalidSignature},
		{name: "a stale timestamp is refused", delivery: "dlv_a", body: body("dlv_a", "processed"),
			header: signed(secretA, body("dlv_a", "processed"), now.Add(-time.Hour)), wantStatus: 401, wantCode: CodeInvalidSignature},
		{name: "no signature at all is refused", delivery: "dlv_a", body: body("dlv_a", "processed"),
			header: http.Header{"Content-Type": {"application/json"}}, wantStatus: 401, wantCode: CodeInvalidSignature},
		{name: "an ack signed for another delivery cannot be replayed here", delivery: "dlv_b", body: body("dlv_a", "processed"),
			header: signed(secretA, body("dlv_a", "processed"), now), wantStatus: 400, wantCode: CodeInvalidField},
		{name: "an unknown outcome", delivery: "dlv_a", body: body("dlv_a", "maybe"),
			header: signed(secretA, body("dlv_a", "maybe"), now), wantStatus: 400, wantCode: CodeInvalidField},
		{name: "an unknown field", delivery: "dlv_a", body: `{"deliveryID":"dlv_a","outcome":"processed","x":1}`,
			header: signed(secretA, `{"deliveryID":"dlv_a","outcome":"processed","x":1}`, now), wantStatus: 400, wantCode: CodeUnknownField},
		{name: "an unknown delivery", delivery: "dlv_nope", body: body("dlv_nope", "processed"),
			header: signed(secretA, body("dlv_nope", "processed"), now), wantStatus: 404, wantCode: CodeNotFound},
		{name: "a delivery that is not awaiting an ack", delivery: "dlv_done", body: body("dlv_done", "processed"),
			header: signed(secretA, body("dlv_done", "processed"), now), wantStatus: 409, wantCode: CodeNotAwaitingAck},
		{name: "a body over the limit", delivery: "dlv_a", body: strings.Repeat(" ", maxAckBody+1),
			header: http.Header{"Content-Type": {"application/json"}}, wantStatus: 413, wantCode: CodeBodyTooLarge},
		{name: "not JSON", delivery: "dlv_a", body: "x", header: http.Header{"Content-Type": {"text/plain"}},
			wantStatus: 415, wantCode: CodeUnsupportedMediaType},
		{name: "GET is not allowed", method: http.MethodGet, delivery: "dlv_a", header: http.Header{},
			wantStatus: 405, wantCode: CodeMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ack := &fakeAcknowledger{
				// dlv_a and dlv_b are deliveries to the same endpoint.
				secrets: map[string][]sensitive.Bytes{"dlv_a": {secretA}, "dlv_b": {secretA}, "dlv_done": {secretA}},
				states:  map[string]ledger.DeliveryState{"dlv_a": ledger.StateAwaitingAck, "dlv_b": ledger.StateAwaitingAck, "dlv_done": ledger.StateDelivered},
			}
			h, err := New(Config{Publisher: &fakePublisher{}, Reader: &fakeReader{}, Auth: StaticTokens{}, Acknowledger: ack,
				Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			req := httptest.NewRequest(method, "/v1/acks/"+tt.delivery, strings.NewReader(tt.body))
			req.Header = tt.header
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if tt.wantCode != "" {
				var eb ErrorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code != tt.wantCode {
					t.Fatalf("error body %s, want code %s", rec.Body, tt.wantCode)
				}
				if len(ack.got) != 0 {
					t.Fatalf("a refused ack changed the delivery: %+v", ack.got)
				}
				return
			}
			var ans AckAnswer
			if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil || ans.State != tt.wantState {
				t.Fatalf("answer %s, want state %s", rec.Body, tt.wantState)
			}
			if len(ack.got) != 1 || ack.got[0].Reason != "customer unknown" || !ack.got[0].Now.Equal(now) {
				t.Fatalf("acknowledger got %+v", ack.got)
			}
		})
	}
}

// TestAckBodyIsStrict: a signed acknowledgement body is held to the rules
// of a publish body (one UTF-8 object, no duplicate keys, no trailing data,
// exact field names), with the same codes and fields; and an unsigned body
// is refused for its signature whatever it contains.
func TestAckBodyIsStrict(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	secret, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		body       string
		unsigned   bool
		wantStatus int
		wantCode   Code
		wantField  string
		wantReason string // of an accepted ack
	}{
		{name: "trailing object", body: `{"deliveryID":"dlv_a","outcome":"processed"}{}`,
			wantStatus: 400, wantCode: CodeInvalidJSON},
		{name: "trailing garbage", body: `{"deliveryID":"dlv_a","outcome":"processed"} x`,
			wantStatus: 400, wantCode: CodeInvalidJSON},
		{name: "duplicate deliveryID", body: `{"deliveryID":"dlv_a","deliveryID":"dlv_b","outcome":"processed"}`,
			wantStatus: 400, wantCode: CodeInvalidJSON, wantField: "deliveryID"},
		{name: "duplicate outcome with the same value", body: `{"deliveryID":"dlv_a","outcome":"processed","outcome":"processed"}`,
			wantStatus: 400, wantCode: CodeInvalidJSON, wantField: "outcome"},
		{name: "DeliveryID", body: `{"DeliveryID":"dlv_a","outcome":"processed"}`,
			wantStatus: 400, wantCode: CodeUnknownField, wantField: "DeliveryID"},
		{name: "deliveryId", body: `{"deliveryId":"dlv_a","outcome":"processed"}`,
			wantStatus: 400, wantCode: CodeUnknownField, wantField: "deliveryId"},
		{name: "Outcome", body: `{"deliveryID":"dlv_a","Outcome":"processed"}`,
			wantStatus: 400, wantCode: CodeUnknownField, wantField: "Outcome"},
		{name: "REASON", body: `{"deliveryID":"dlv_a","outcome":"processed","REASON":"r"}`,
			wantStatus: 400, wantCode: CodeUnknownField, wantField: "REASON"},
		{name: "unknown field", body: `{"deliveryID":"dlv_a","outcome":"processed","x":{"y":1}}`,
			wantStatus: 400, wantCode: CodeUnknownField, wantField: "x"},
		{name: "array", body: `[{"deliveryID":"dlv_a","outcome":"processed"}]`,
			wantStatus: 400, wantCode: CodeInvalidJSON},
		{name: "string", body: `"dlv_a"`, wantStatus: 400, wantCode: CodeInvalidJSON},
		{name: "null", body: `null`, wantStatus: 400, wantCode: CodeInvalidJSON},
		{name: "empty", body: ``, wantStatus: 400, wantCode: CodeInvalidJSON},
		{name: "invalid UTF-8", body: "{\"deliveryID\":\"dlv_a\",\"outcome\":\"processed\",\"reason\":\"\xff\"}",
			wantStatus: 400, wantCode: CodeInvalidJSON},
		{name: "deliveryID not a string", body: `{"deliveryID":1,"outcome":"processed"}`,
			wantStatus: 400, wantCode: CodeInvalidField, wantField: "deliveryID"},
		{name: "deliveryID missing", body: `{"outcome":"processed"}`,
			wantStatus: 400, wantCode: CodeInvalidField, wantField: "deliveryID"},
		{name: "outcome not a string", body: `{"deliveryID":"dlv_a","outcome":["processed"]}`,
			wantStatus: 400, wantCode: CodeInvalidField, wantField: "outcome"},
		{name: "reason not a string", body: `{"deliveryID":"dlv_a","outcome":"processed","reason":{}}`,
			wantStatus: 400, wantCode: CodeInvalidField, wantField: "reason"},
		{name: "unsigned and malformed: the signature is all it learns", body: `{"DeliveryID":"dlv_a","x":1}{}`, unsigned: true,
			wantStatus: 401, wantCode: CodeInvalidSignature},
		{name: "null reason is no reason", body: `{"deliveryID":"dlv_a","outcome":"processed","reason":null}`,
			wantStatus: 200},
		{name: "formatting is free", body: "\n{ \"reason\" : \"r\u00e9\",\t\"outcome\":\"rejected\", \"deliveryID\":\"dlv_a\" }\n",
			wantStatus: 200, wantReason: "ré"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ack := &fakeAcknowledger{
				secrets: map[string][]sensitive.Bytes{"dlv_a": {secret}},
				states:  map[string]ledger.DeliveryState{"dlv_a": ledger.StateAwaitingAck},
			}
			h, err := New(Config{Publisher: &fakePublisher{}, Reader: &fakeReader{}, Auth: StaticTokens{}, Acknowledger: ack,
				Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodPost, "/v1/acks/dlv_a", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			if !tt.unsigned {
				sig, err := signing.Sign(secret, "ack_1", now, []byte(tt.body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set(signing.HeaderID, "ack_1")
				req.Header.Set(signing.HeaderTimestamp, fmt.Sprint(now.Unix()))
				req.Header.Set(signing.HeaderSignature, sig)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if tt.wantStatus == http.StatusOK {
				if len(ack.got) != 1 || ack.got[0].Reason != tt.wantReason {
					t.Fatalf("acknowledger got %+v, want reason %q", ack.got, tt.wantReason)
				}
				return
			}
			var eb ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil {
				t.Fatalf("error body %s: %v", rec.Body, err)
			}
			if eb.Error.Code != tt.wantCode || eb.Error.Field != tt.wantField {
				t.Fatalf("error %+v, want code %s field %q", eb.Error, tt.wantCode, tt.wantField)
			}
			if len(ack.got) != 0 {
				t.Fatalf("a refused ack changed the delivery: %+v", ack.got)
			}
		})
	}
}
