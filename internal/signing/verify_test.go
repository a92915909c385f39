package signing_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

func TestVerifySpecVector(t *testing.T) {
	now := time.Unix(specTimestamp, 0)
	for _, secret := range []string{specSecret, strings.TrimPrefix(specSecret, "whsec_")} {
		err := signing.Verify([]sensitive.Bytes{sensitive.Bytes(secret)}, specMsgID, strconv.Itoa(specTimestamp), specSignature, []byte(specPayload), now, 0)
		if err != nil {
			t.Errorf("Verify with %q: %v", secret, err)
		}
	}
}

// TestVerify follows the cases of the reference libraries' suites, with a
// pinned clock.
func TestVerify(t *testing.T) {
	old, current, unrelated := mustGenerate(t), mustGenerate(t), mustGenerate(t)
	const id = "evt_01hq3k8d5r6s7t8v9w0x1y2z3a"
	body := []byte(`{"id":"evt_01hq3k8d5r6s7t8v9w0x1y2z3a","type":"user.created","data":{"n":1}}`)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	ts := now.Add(-10 * time.Second)
	tsHeader := strconv.FormatInt(ts.Unix(), 10)
	both, err := signing.SignatureHeader([]sensitive.Bytes{old, current}, id, ts, body)
	if err != nil {
		t.Fatal(err)
	}
	onlyCurrent, _ := signing.Sign(current, id, ts, body)
	sign := func(at time.Time) string {
		s, err := signing.Sign(current, id, at, body)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const tol = 5 * time.Minute
	type tc struct {
		name      string
		secrets   []sensitive.Bytes
		id, ts    string
		signature string
		body      []byte
		tolerance time.Duration
		want      error // nil: valid
		wantAny   bool  // some error
	}
	tests := []tc{
		{name: "valid", secrets: []sensitive.Bytes{current}, id: id, ts: tsHeader, signature: onlyCurrent, body: body},
		{name: "rotation: receiver knows the new secret", secrets: []sensitive.Bytes{current}, id: id, ts: tsHeader, signature: both, body: body},
		{name: "rotation: receiver knows the old secret", secrets: []sensitive.Bytes{old}, id: id, ts: tsHeader, signature: both, body: body},
		{name: "receiver knows both secrets", secrets: []sensitive.Bytes{unrelated, old}, id: id, ts: tsHeader, signature: onlyCurrent + " " + both, body: body},
		{name: "unrelated secret", secrets: []sensitive.Bytes{unrelated}, id: id, ts: tsHeader, signature: both, body: body, want: signing.ErrNoMatchingSignature},
		{name: "tampered body", secrets: []sensitive.Bytes{current}, id: id, ts: tsHeader, signature: onlyCurrent, body: append([]byte(nil), body[:len(body)-1]...), want: signing.ErrNoMatchingSignature},
		{name: "tampered id", secrets: []sensitive.Bytes{current}, id: id + "x", ts: tsHeader, signature: onlyCurrent, body: body, want: signing.ErrNoMatchingSignature},
		{name: "tampered timestamp", secrets: []sensitive.Bytes{current}, id: id, ts: strconv.FormatInt(ts.Unix()+1, 10), signature: onlyCurrent, body: body, want: signing.ErrNoMatchingSignature},
		{name: "multi signature with other versions", secrets: []sensitive.Bytes{current}, id: id, ts: tsHeader, body: body,
			signature: "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= " + onlyCurrent + " v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="},
		{name: "right signature under another version", secrets: []sensitive.Bytes{current}, id: id, ts: tsHeader, signature: "v1a," + strings.TrimPrefix(onlyCurrent, "v1,"), body: body, want: signing.ErrNoMatchingSignature},
		{name: "partial signature", secrets: []sensitive.Bytes{current}, id: id, ts: tsHeader, signature: onlyCurrent[:8], body: body, want: signing.ErrNoMatchingSignature},
		{name: "empty v1 signature", secrets: []sensitive.Bytes{current}, id: id, ts: tsHeader, signature: "v1,", body: body, want: signing.ErrNoMatchingSignature},
		{name: "extra spaces", secrets: []sensitive.Bytes{current}, id: id, ts: tsHeader, signature: "  " + onlyCurrent + "  ", body: body},
		{name: "missing id", secrets: []sensitive.Bytes{current}, ts: tsHeader, signature: onlyCurrent, body: body, want: signing.ErrMissingHeader},
		{name: "missing timestamp", secrets: []sensitive.Bytes{current}, id: id, signature: onlyCurrent, body: body, want: signing.ErrMissingHeader},
		{name: "missing signature", secrets: []sensitive.Bytes{current}, id: id, ts: tsHeader, body: body, want: signing.ErrMissingHeader},
		{name: "no secret", id: id, ts: tsHeader, signature: onlyCurrent, body: body, wantAny: true},
		{name: "id with a dot", secrets: []sensitive.Bytes{current}, id: "a.b", ts: tsHeader, signature: onlyCurrent, body: body, want: signing.ErrInvalidID},
		{name: "non-numeric timestamp", secrets: []sensitive.Bytes{current}, id: id, ts: "hello", signature: onlyCurrent, body: body, want: signing.ErrInvalidTimestamp},
		{name: "signed timestamp", secrets: []sensitive.Bytes{current}, id: id, ts: "+" + tsHeader, signature: onlyCurrent, body: body, want: signing.ErrInvalidTimestamp},
		{name: "overlong timestamp", secrets: []sensitive.Bytes{current}, id: id, ts: strings.Repeat("9", 19), signature: onlyCurrent, body: body, want: signing.ErrInvalidTimestamp},
		{name: "expired timestamp", secrets: []sensitive.Bytes{current}, id: id, ts: unixStr(now.Add(-tol - time.Second)), signature: sign(now.Add(-tol - time.Second)), body: body, tolerance: tol, want: signing.ErrTimestampTooOld},
		{name: "future timestamp", secrets: []sensitive.Bytes{current}, id: id, ts: unixStr(now.Add(tol + time.Second)), signature: sign(now.Add(tol + time.Second)), body: body, tolerance: tol, want: signing.ErrTimestampTooNew},
		{name: "timestamp at the tolerance", secrets: []sensitive.Bytes{current}, id: id, ts: unixStr(now.Add(-tol)), signature: sign(now.Add(-tol)), body: body, tolerance: tol},
		{name: "default tolerance is five minutes", secrets: []sensitive.Bytes{current}, id: id, ts: unixStr(now.Add(-6 * time.Minute)), signature: sign(now.Add(-6 * time.Minute)), body: body, want: signing.ErrTimestampTooOld},
		{name: "a wider tolerance", secrets: []sensitive.Bytes{current}, id: id, ts: unixStr(now.Add(-6 * time.Minute)), signature: sign(now.Add(-6 * time.Minute)), body: body, tolerance: 10 * time.Minute},
		{name: "invalid secret", secrets: []sensitive.Bytes{sensitive.Bytes("whsec_short")}, id: id, ts: tsHeader, signature: onlyCurrent, body: body, want: signing.ErrInvalidSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := signing.Verify(tt.secrets, tt.id, tt.ts, tt.signature, tt.body, now, tt.tolerance)
			switch {
			case tt.want == nil && !tt.wantAny && err != nil:
				t.Fatalf("Verify: %v", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			case tt.wantAny && err == nil:
				t.Fatal("Verify accepted")
			}
			if err != nil {
				assertNoSecret(t, err, tt.secrets...)
			}
		})
	}
}

// assertNoSecret fails when an error quotes any part of a secret.
func assertNoSecret(t *testing.T, err error, secrets ...sensitive.Bytes) {
	t.Helper()
	msg := fmt.Sprintf("%v %+v %#v", err, err, err)
	for _, s := range secrets {
		body := strings.TrimPrefix(string(s.Reveal()), signing.SecretPrefix)
		for i := 0; i+8 <= len(body); i += 4 {
			if strings.Contains(msg, body[i:i+8]) {
				t.Fatalf("error %q contains secret material", msg)
			}
		}
	}
}

func unixStr(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// FuzzVerify checks that Verify never panics and never accepts a header
// that was not produced with the secret.
func FuzzVerify(f *testing.F) {
	f.Add(specMsgID, strconv.Itoa(specTimestamp), specSignature, []byte(specPayload))
	f.Add("a", "1", "v1,", []byte{})
	f.Add("msg", "1614265330", "v1,,, v1 ,v1,x", []byte("{}"))
	secrets := []sensitive.Bytes{sensitive.Bytes(specSecret)}
	now := time.Unix(specTimestamp, 0)
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		err := signing.Verify(secrets, id, ts, sig, body, now, time.Hour)
		if err != nil {
			return
		}
		want, serr := signing.Sign(secrets[0], id, time.Unix(mustUnix(t, ts), 0), body)
		if serr != nil || !strings.Contains(" "+sig+" ", " "+want+" ") {
			t.Fatalf("Verify accepted %q for id %q ts %q", sig, id, ts)
		}
	})
}

func mustUnix(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("accepted timestamp %q: %v", s, err)
	}
	return n
}
