package publish

import (
	"bytes"
	"encoding/hex"
	"testing"
)

func mustParse(t *testing.T, body string, key []byte) *canonicalBody {
	t.Helper()
	b, err := parseBody([]byte(body), DefaultMaxSecrets, key)
	if err != nil {
		t.Fatalf("parse %s: %v", body, err)
	}
	return b
}

func TestBodyHashIgnoresFormatting(t *testing.T) {
	base := `{"type":"order.created","data":{"id":7,"lines":[{"sku":"a","qty":1}],"note":"<b>&"},"secrets":{"t":"x","c":"y"},"reissueOf":"evt_01hzzzzzzzzzzzzzzzzzzzzzzz"}`
	same := []string{
		"{\n\t\"reissueOf\": \"evt_01hzzzzzzzzzzzzzzzzzzzzzzz\",\n\t\"secrets\": {\"c\": \"y\", \"t\": \"x\"},\n\t\"data\": {\"note\": \"<b>&\", \"lines\": [ {\"qty\": 1, \"sku\": \"a\"} ], \"id\": 7},\n\t\"type\": \"order.created\"\n}",
		`{"type":"order.created","data":{"id":7,"lines":[{"sku":"\u0061","qty":1}],"note":"\u003cb\u003e\u0026"},"secrets":{"t":"x","c":"y"},"reissueOf":"evt_01hzzzzzzzzzzzzzzzzzzzzzzz"}`,
	}
	want := mustParse(t, base, nil)
	for _, s := range same {
		got := mustParse(t, s, nil)
		if !bytes.Equal(got.Hash, want.Hash) || !bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Secrets, want.Secrets) {
			t.Errorf("%s\nhashes %x, want %x (data %s vs %s)", s, got.Hash, want.Hash, got.Data, want.Data)
		}
	}
	if got := string(want.Data); got != `{"id":7,"lines":[{"qty":1,"sku":"a"}],"note":"<b>&"}` {
		t.Errorf("canonical data = %s", got)
	}
}

func TestBodyHashAbsentEqualsEmpty(t *testing.T) {
	want := mustParse(t, `{"type":"a","data":{}}`, nil).Hash
	for _, s := range []string{
		`{"type":"a","data":{},"secrets":null}`,
		`{"type":"a","data":{},"secrets":{}}`,
		`{"type":"a","data":{},"reissueOf":null}`,
		`{"type":"a","data":{},"reissueOf":""}`,
		`{"type":"a","data":{},"endpoint":null}`,
		`{"type":"a","data":{},"endpoint":""}`,
	} {
		if got := mustParse(t, s, nil).Hash; !bytes.Equal(got, want) {
			t.Errorf("%s hashes differently from the body without the field", s)
		}
	}
}

func TestBodyHashDistinguishes(t *testing.T) {
	bodies := []string{
		`{"type":"a","data":{"n":1}}`,
		`{"type":"a","data":{"n":1.0}}`, // numbers keep their literal form
		`{"type":"a","data":{"n":"1"}}`,
		`{"type":"b","data":{"n":1}}`,
		`{"type":"a","data":{"n":[1,2]}}`,
		`{"type":"a","data":{"n":[2,1]}}`,
		`{"type":"a","data":{"n":1},"secrets":{"s":"x"}}`,
		`{"type":"a","data":{"n":1},"secrets":{"u":"x"}}`,
		`{"type":"a","data":{"n":1},"reissueOf":"evt_01hzzzzzzzzzzzzzzzzzzzzzzz"}`,
		`{"type":"a","data":{"n":1,"m":null}}`,
		`{"type":"a","data":{"n":1},"endpoint":"billing"}`,
		`{"type":"a","data":{"n":1},"endpoint":"audit"}`,
		`{"type":"a","data":{"endpoint":"billing","n":1}}`,
		`{"type":"a","data":{"secretNames":["s"],"n":1}}`, // data cannot impersonate another field
	}
	seen := map[string]string{}
	for _, b := range bodies {
		h := hex.EncodeToString(mustParse(t, b, nil).Hash)
		if prev, ok := seen[h]; ok {
			t.Errorf("%s and %s hash the same", b, prev)
		}
		seen[h] = b
	}
}

func TestBodyHashSecretValues(t *testing.T) {
	key := []byte("k")
	a, b := `{"type":"a","data":{},"secrets":{"s":"1"}}`, `{"type":"a","data":{},"secrets":{"s":"2"}}`
	if !bytes.Equal(mustParse(t, a, nil).Hash, mustParse(t, b, nil).Hash) {
		t.Error("without a key, secret values must not enter the hash (they would be brute-forceable)")
	}
	if bytes.Equal(mustParse(t, a, key).Hash, mustParse(t, b, key).Hash) {
		t.Error("with a key, different secret values must hash differently")
	}
	if bytes.Equal(mustParse(t, a, key).Hash, mustParse(t, a, []byte("other")).Hash) {
		t.Error("the key must matter")
	}
}

// TestBodyHashGolden pins the canonical form: hashes are stored as
// idempotency evidence, so changing them silently would turn replays of
// events published before an upgrade into 409s.
func TestBodyHashGolden(t *testing.T) {
	b := mustParse(t, `{"type":"order.created","data":{"b":2,"a":[1,"x"]},"secrets":{"s":"v"},"reissueOf":"evt_01hzzzzzzzzzzzzzzzzzzzzzzz"}`, nil)
	// SHA-256 of "hookkeeper.dev/ingest/v1\n" followed by
	// {"data":{"a":[1,"x"],"b":2},"reissueOf":"evt_01hzzzzzzzzzzzzzzzzzzzzzzz","secretNames":["s"],"type":"order.created"}
	const want = "fd6485510c5a8d76ddd15cb78ceda45f2b3567c99b595ce7861e80ca5d4d554f"
	if got := hex.EncodeToString(b.Hash); got != want {
		t.Errorf("hash = %s, want %s: if the canonical form changed on purpose, change bodyHashPrefix too", got, want)
	}
}
