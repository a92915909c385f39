package receiver

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// FuzzVerify feeds the verify path hostile headers and bodies, raw or
// correctly signed and then changed. It must never panic, never accept a
// request that no entry of its signature header signs with one of the
// secrets (checked with an HMAC computed here, not by the package),
// answer only 400 or 401 for what it refuses, quote no secret, and keep
// what it accepts at least until the signature expires.
func FuzzVerify(f *testing.F) {
	good := envelope("msg_seed")
	f.Add("msg_seed", "1772618400", "v1,AAAA", good, replayUntil, false, uint16(0))
	f.Add("msg_seed", "", "", good, "", true, uint16(0))
	f.Add("msg_seed", "", "", good, replayUntil, true, uint16(350)) // accepted
	f.Add("msg_seed", "0", "v1,", []byte{}, "9999-12-31T23:59:59Z", true, uint16(3))
	f.Add("msg.seed", "1772618400", "v1,x v1,y v2,z", []byte("{}"), "bad", false, uint16(1))
	f.Add("", "-1", " ", []byte("null"), "2026-03-04T10:00:00+14:00", true, uint16(7))
	f.Add("msg_\x00", "01772618400", "v1,"+strings.Repeat("A", 44), []byte(`{"data":[]}`), "", true, uint16(9))
	f.Add(strings.Repeat("i", 300), "999999999999999999", "v1", []byte(`"`), "", false, uint16(2))

	secrets := []sensitive.Bytes{sensitive.Bytes(current), sensitive.Bytes(previous)}
	var keys [][]byte
	for _, s := range secrets {
		k, err := signing.ParseSecret(s)
		if err != nil {
			f.Fatal(err)
		}
		keys = append(keys, k)
	}
	r := &Receiver{secrets: secrets, opts: Options{Tolerance: DefaultTolerance, DefaultRetention: DefaultRetention, MaxBodyBytes: DefaultMaxBodyBytes}}

	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte, replay string, sign bool, pos uint16) {
		h := http.Header{}
		for name, v := range map[string]string{signing.HeaderID: id, signing.HeaderTimestamp: ts, ReplayUntilHeader: replay} {
			if v != "" {
				h[http.CanonicalHeaderKey(name)] = []string{v}
			}
		}
		if sign {
			// A real signature (with the previous secret), then one byte
			// of the fuzzer's choice changed when pos says so.
			unix, err := strconv.ParseInt(ts, 10, 64)
			if err != nil || unix < 0 {
				unix = t0.Unix() + int64(pos%700) - 350
				ts = strconv.FormatInt(unix, 10)
				h.Set(signing.HeaderTimestamp, ts)
			}
			s, err := signing.Sign(secrets[1], id, time.Unix(unix, 0), body)
			if err != nil {
				return // an id that cannot be signed: the raw case covers it
			}
			sig = s
			if pos%3 == 0 && len(body) > 0 {
				body = bytes.Clone(body)
				body[int(pos)%len(body)] ^= 0x20
			}
		}
		if sig != "" {
			h[http.CanonicalHeaderKey(signing.HeaderSignature)] = []string{sig}
		}

		ev, err := r.verify(h, body, t0)
		if err != nil {
			if ev != nil {
				t.Fatal("an event with an error")
			}
			if s := statusOf(err); s != http.StatusBadRequest && s != http.StatusUnauthorized {
				t.Fatalf("refused with %d: %v", s, err)
			}
			for _, secret := range []string{current, previous} {
				if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secret[len("whsec_"):]) {
					t.Fatalf("the error quotes a secret: %v", err)
				}
			}
			return
		}

		// Accepted: some v1 entry must be the HMAC of id.ts.body under
		// one of the keys, the timestamp within tolerance, the body JSON.
		unix, perr := strconv.ParseInt(ts, 10, 64)
		if perr != nil || unix < 0 {
			t.Fatalf("accepted webhook-timestamp %q", ts)
		}
		if d := t0.Sub(time.Unix(unix, 0)); d > DefaultTolerance || d < -DefaultTolerance {
			t.Fatalf("accepted a timestamp %s from now", d)
		}
		if !signedBy(keys, id, unix, body, sig) {
			t.Fatalf("accepted a signature no secret made: id %q ts %q sig %q", id, ts, sig)
		}
		if !json.Valid(body) {
			t.Fatalf("accepted a body that is not JSON: %q", body)
		}
		if ev.ID != id || !bytes.Equal(ev.Body, body) {
			t.Fatal("the event is not the request")
		}
		if floor := time.Unix(unix, 0).Add(DefaultTolerance); ev.ReplayUntil.Before(floor) {
			t.Fatalf("kept until %v, before the signature expires at %v", ev.ReplayUntil, floor)
		}
		if ev.ReplayUntil.Location() != time.UTC || ev.ReplayUntil.Nanosecond()%int(time.Millisecond) != 0 {
			t.Fatalf("replay-until %v is not UTC milliseconds", ev.ReplayUntil)
		}
	})
}

// signedBy reports whether a v1 entry of sig is the signature of the
// message under one of keys.
func signedBy(keys [][]byte, id string, unix int64, body []byte, sig string) bool {
	for _, key := range keys {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id + "." + strconv.FormatInt(unix, 10) + "."))
		m.Write(body)
		want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
		for _, entry := range strings.Split(sig, " ") {
			if entry == want {
				return true
			}
		}
	}
	return false
}

// TestFuzzOracle checks FuzzVerify's oracle on a request the package
// accepts, so that the fuzz target cannot pass by never accepting.
func TestFuzzOracle(t *testing.T) {
	req := delivery{id: "msg_oracle", at: t0, secrets: []string{previous}}.request(t)
	r := &Receiver{secrets: []sensitive.Bytes{sensitive.Bytes(current), sensitive.Bytes(previous)}, opts: Options{Tolerance: DefaultTolerance, DefaultRetention: DefaultRetention}}
	body := envelope("msg_oracle")
	if _, err := r.verify(req.Header, body, t0); err != nil {
		t.Fatal(err)
	}
	k, _ := signing.ParseSecret(sensitive.Bytes(previous))
	if !signedBy([][]byte{k}, "msg_oracle", t0.Unix(), body, req.Header.Get(signing.HeaderSignature)) {
		t.Fatal("the oracle does not recognise a real signature")
	}
	if signedBy([][]byte{k}, "msg_oracle", t0.Unix(), append(body, ' '), req.Header.Get(signing.HeaderSignature)) {
		t.Fatal("the oracle recognises a signature of another body")
	}
	if !errors.Is(func() error { _, err := r.verify(req.Header, append(bytes.Clone(body), ' '), t0); return err }(), ErrSignature) {
		t.Fatal("a changed body verified")
	}
}
