package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// Fixed secrets keep every crasher reproducible from its corpus file.
var (
	fuzzAckSecret   = sensitive.Bytes(signing.SecretPrefix + base64.StdEncoding.EncodeToString([]byte("hookkeeper-fuzz-ack-secret-32byt")))
	fuzzWrongSecret = sensitive.Bytes(signing.SecretPrefix + base64.StdEncoding.EncodeToString([]byte("hookkeeper-fuzz-other-secret-32b")))
)

// Signing modes of FuzzAckRequest.
const (
	ackRawHeaders  = 0 // the fuzzer's own header values
	ackSignRight   = 1 // the harness signs the body with the endpoint's secret
	ackSignWrong   = 2 // the harness signs it with another secret
	ackSignModes   = 3
	ackFuzzBaseID  = "ack_fuzz"
	ackFuzzDefault = "application/json"
)

// fuzzAckDeliveries are the deliveries the fake knows, in selector order;
// the last one is unknown.
var fuzzAckDeliveries = []string{"dlv_a", "dlv_b", "dlv_done", "dlv_nope"}

// FuzzAckRequest throws arbitrary bodies and webhook-* header values at
// POST /v1/acks/{deliveryID}. The handler must never panic or answer 5xx,
// must answer every refusal with a coded JSON error, and must reach the
// Acknowledger only with a body signed by the endpoint's secret within the
// tolerance, which decodes strictly into an ack of the delivery of the path.
// mode lets the harness sign the fuzzed body itself (with the right or a
// wrong secret), so that the JSON paths behind the signature check are
// explored too.
func FuzzAckRequest(f *testing.F) {
	now := testNow
	ts := strconv.FormatInt(now.Unix(), 10)
	sign := func(body string) string {
		s, err := signing.Sign(fuzzAckSecret, "ack_1", now, []byte(body))
		if err != nil {
			f.Fatal(err)
		}
		return s
	}
	ack := func(id, outcome string) string {
		return fmt.Sprintf(`{"deliveryID":%q,"outcome":%q,"reason":"customer unknown"}`, id, outcome)
	}
	// Valid signed acks with the raw-header mode, as a receiver sends them.
	for sel, outcome := range []string{"processed", "rejected", "processed", "processed"} {
		b := ack(fuzzAckDeliveries[sel], outcome)
		f.Add(uint8(sel), uint8(ackRawHeaders), ackFuzzDefault, "ack_1", ts, sign(b), int16(0), []byte(b))
	}
	// A rotation header (two entries), extra spaces, a charset parameter.
	b := ack("dlv_a", "processed")
	f.Add(uint8(0), uint8(ackRawHeaders), "application/json; charset=utf-8", "ack_1", ts,
		"v1,AAAA "+sign(b)+"  v2,x", int16(0), []byte(b))
	// Harness-signed bodies, valid and hostile.
	for _, body := range []string{
		ack("dlv_a", "processed"),
		`{"deliveryID":"dlv_a","outcome":"processed"}`,
		`{"deliveryID":"dlv_a","outcome":"maybe"}`,
		`{"deliveryID":"dlv_b","outcome":"processed","x":1}`,
		`{"deliveryID":"dlv_a","outcome":"processed","reason":"` + strings.Repeat("r", ledger.MaxAckReason+1) + `"}`,
		`{"deliveryID":"dlv_a","outcome":"processed"}{}`,
		`{"deliveryID":"dlv_a","deliveryID":"dlv_b","outcome":"processed"}`,
		`{"DeliveryID":"dlv_a","Outcome":"processed"}`,
		`{"deliveryID":"dlv_a\u0000","outcome":"processed"}`,
		"{\"deliveryID\":\"dlv_a\",\"outcome\":\"\xff\"}",
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`, ``, `null`, `{`, `"s"`, `1e999`,
		// What encoding/json accepts and the strict parser refuses.
		`{"deliveryID":"dlv_a","outcome":"processed"} x`,
		`{"deliveryID":"dlv_a","outcome":"processed","outcome":"processed"}`,
		`{"deliveryId":"dlv_a","outcome":"processed"}`,
		`{"deliveryID":"dlv_a","outcome":"processed","Reason":"r"}`,
		"{\"deliveryID\":\"dlv_a\",\"outcome\":\"processed\",\"reason\":\"\xff\"}",
		// Non-objects, wrong types, and what stays valid.
		`[{"deliveryID":"dlv_a","outcome":"processed"}]`, `[]`,
		`{"deliveryID":1,"outcome":"processed"}`,
		`{"deliveryID":"dlv_a","outcome":"processed","reason":{}}`,
		`{"deliveryID":"dlv_a","outcome":"processed","reason":null}`,
		`{"deliveryI\u0044":"dlv_a","outcome":"rejected"}`,
	} {
		f.Add(uint8(0), uint8(ackSignRight), ackFuzzDefault, "ack_1", "", "", int16(0), []byte(body))
	}
	f.Add(uint8(0), uint8(ackSignRight), ackFuzzDefault, "ack_1", "", "", int16(300), []byte(b))
	f.Add(uint8(0), uint8(ackSignRight), ackFuzzDefault, "ack_1", "", "", int16(-301), []byte(b))
	f.Add(uint8(0), uint8(ackSignWrong), ackFuzzDefault, "ack_1", "", "", int16(0), []byte(b))
	// Hostile raw headers.
	for _, h := range [][3]string{
		{"", "", ""},
		{"ack.1", ts, sign(b)},
		{"ack_1", "+" + ts, sign(b)},
		{"ack_1", "0" + ts, sign(b)},
		{"ack_1", strings.Repeat("9", 40), sign(b)},
		{"ack_1", ts, "v1," + strings.TrimPrefix(sign(b), "v1,")[:20]},
		{"ack_1", ts, "v1a," + strings.TrimPrefix(sign(b), "v1,")},
		{"ack_1", ts, strings.Repeat("v1, ", 200)},
		{strings.Repeat("a", signing.MaxIDLength+1), ts, sign(b)},
		{"ack 1", ts, sign(b)},
		{"ack_1\n", ts, "v1,\x00"},
	} {
		f.Add(uint8(0), uint8(ackRawHeaders), ackFuzzDefault, h[0], h[1], h[2], int16(0), []byte(b))
	}
	f.Add(uint8(0), uint8(ackRawHeaders), "text/plain", "ack_1", ts, sign(b), int16(0), []byte(b))
	f.Add(uint8(0), uint8(ackRawHeaders), "application/json; charset", "ack_1", ts, sign(b), int16(0), []byte(b))
	f.Add(uint8(0), uint8(ackSignRight), ackFuzzDefault, "ack_1", "", "", int16(0), bytes.Repeat([]byte(" "), maxAckBody+1))

	fake := &recordingAcknowledger{fakeAcknowledger: &fakeAcknowledger{
		// dlv_a and dlv_b are deliveries to the same endpoint.
		secrets: map[string][]sensitive.Bytes{"dlv_a": {fuzzAckSecret}, "dlv_b": {fuzzAckSecret}, "dlv_done": {fuzzAckSecret}},
		states:  map[string]ledger.DeliveryState{"dlv_a": ledger.StateAwaitingAck, "dlv_b": ledger.StateAwaitingAck, "dlv_done": ledger.StateDelivered},
	}}
	h, err := New(Config{Publisher: &fakePublisher{}, Reader: &fakeReader{}, Auth: StaticTokens{}, Acknowledger: fake,
		Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, sel, mode uint8, contentType, hid, hts, hsig string, tsOff int16, body []byte) {
		id := fuzzAckDeliveries[int(sel)%len(fuzzAckDeliveries)]
		switch mode % ackSignModes {
		case ackSignRight, ackSignWrong:
			secret := fuzzAckSecret
			if mode%ackSignModes == ackSignWrong {
				secret = fuzzWrongSecret
			}
			at := now.Add(time.Duration(tsOff) * time.Second)
			sig, err := signing.Sign(secret, hid, at, body)
			if err != nil { // hid is not a valid webhook id
				hid = ackFuzzBaseID
				if sig, err = signing.Sign(secret, hid, at, body); err != nil {
					t.Fatal(err)
				}
			}
			hts, hsig = strconv.FormatInt(at.Unix(), 10), sig
		}

		r := httptest.NewRequest(http.MethodPost, "/v1/acks/"+id, bytes.NewReader(body))
		r.Header.Set("Content-Type", contentType)
		r.Header.Set(signing.HeaderID, hid)
		r.Header.Set(signing.HeaderTimestamp, hts)
		r.Header.Set(signing.HeaderSignature, hsig)
		fake.got, fake.calls = nil, nil
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)

		if rec.Code >= 500 {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if len(fake.calls) > 1 {
			t.Fatalf("one request reached the acknowledger %d times", len(fake.calls))
		}
		if len(fake.calls) == 1 {
			checkAckReached(t, &fake.calls[0], id, hid, hts, hsig, body, now)
		}
		// Strictness must not refuse a well-formed ack, correctly signed.
		if off := time.Duration(tsOff) * time.Second; mode%ackSignModes == ackSignRight && contentType == ackFuzzDefault &&
			len(body) <= maxAckBody && off <= signing.DefaultTolerance && off >= -signing.DefaultTolerance &&
			(id == "dlv_a" || id == "dlv_b") {
			if req, ok := strictAck(body); ok && req.DeliveryID == id && len(req.Reason) <= ledger.MaxAckReason &&
				(req.Outcome == ledger.AckProcessed || req.Outcome == ledger.AckRejected) && rec.Code != http.StatusOK {
				t.Fatalf("a valid signed ack was refused with %d: %s", rec.Code, rec.Body)
			}
		}
		if rec.Code/100 == 2 {
			var ans AckAnswer
			dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
			dec.DisallowUnknownFields()
			if rec.Code != http.StatusOK || len(fake.got) != 1 || dec.Decode(&ans) != nil || ans.DeliveryID != id || ans.State == "" {
				t.Fatalf("status %d with %d acknowledgements: %s", rec.Code, len(fake.got), rec.Body)
			}
			return
		}
		var e ErrorBody
		dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Fatalf("status %d without a coded JSON error: %s (%v)", rec.Code, rec.Body, err)
		}
		if len(fake.got) != 0 || (len(fake.calls) != 0 && e.Error.Code != CodeNotAwaitingAck) {
			t.Fatalf("refused with %d (%s) after reaching the acknowledger", rec.Code, e.Error.Code)
		}
	})
}

// recordingAcknowledger records every Acknowledge call, including those
// the fake refuses (a delivery that is not awaiting an ack).
type recordingAcknowledger struct {
	*fakeAcknowledger
	calls []ledger.AckRecordParams
}

func (r *recordingAcknowledger) Acknowledge(ctx context.Context, p *ledger.AckRecordParams) (ledger.Delivery, error) {
	r.calls = append(r.calls, *p)
	return r.fakeAcknowledger.Acknowledge(ctx, p)
}

// checkAckReached asserts, without calling signing.Verify, that an ack
// which reached the Acknowledger was signed by the endpoint's secret over
// exactly this body, within the tolerance, and is a strict ack of delivery
// id.
func checkAckReached(t *testing.T, got *ledger.AckRecordParams, id, hid, hts, hsig string, body []byte, now time.Time) {
	t.Helper()
	unix, err := strconv.ParseInt(hts, 10, 64)
	if err != nil || hts == "" || hts[0] < '0' || hts[0] > '9' {
		t.Fatalf("acknowledged with webhook-timestamp %q", hts)
	}
	at := time.Unix(unix, 0)
	if d := now.Sub(at); d > signing.DefaultTolerance || d < -signing.DefaultTolerance {
		t.Fatalf("acknowledged with a timestamp %s away from now", d)
	}
	want, err := signing.Sign(fuzzAckSecret, hid, at, body)
	if err != nil {
		t.Fatalf("acknowledged with webhook-id %q: %v", hid, err)
	}
	if !strings.Contains(" "+hsig+" ", " "+want+" ") {
		t.Fatalf("acknowledged a body not signed with the endpoint's secret: signature %q", hsig)
	}
	req, ok := strictAck(body)
	if !ok {
		t.Fatalf("acknowledged a body that is not a strict ack: %q", body)
	}
	switch {
	case req.DeliveryID != id || got.DeliveryID != id:
		t.Fatalf("ack for %q (body %q) reached the acknowledger as %q", id, req.DeliveryID, got.DeliveryID)
	case got.Outcome != ledger.AckProcessed && got.Outcome != ledger.AckRejected, got.Outcome != req.Outcome:
		t.Fatalf("outcome %q reached the acknowledger (body %q)", got.Outcome, req.Outcome)
	case got.Reason != req.Reason || len(got.Reason) > ledger.MaxAckReason:
		t.Fatalf("reason of %d bytes reached the acknowledger", len(got.Reason))
	case !got.Now.Equal(now):
		t.Fatalf("acknowledged at %s, want %s", got.Now, now)
	}
}

// strictAck is the fuzz oracle's own reading of a strict ack, independent
// of parseStrictObject: one UTF-8 object with no duplicate keys and
// nothing after it, whose keys are exactly deliveryID, outcome and reason,
// with string values (reason may be null).
func strictAck(body []byte) (AckRequest, bool) {
	var req AckRequest
	if !utf8.Valid(body) { // encoding/json would replace bad bytes silently
		return req, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return req, false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		key, isKey := tok.(string)
		if err != nil || !isKey || seen[key] {
			return req, false
		}
		seen[key] = true
		if tok, err = dec.Token(); err != nil {
			return req, false
		}
		s, isStr := tok.(string)
		switch {
		case key == "deliveryID" && isStr:
			req.DeliveryID = s
		case key == "outcome" && isStr:
			req.Outcome = ledger.AckOutcome(s)
		case key == "reason" && (isStr || tok == nil):
			req.Reason = s
		default:
			return req, false
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return req, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return req, false
	}
	return req, true
}
