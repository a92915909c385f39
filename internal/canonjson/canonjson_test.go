package canonjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// internal/httpapi's differential tests compare Parse with the
// implementation it replaced on many bodies; these pin the package's own
// contract.

func TestParseMembersSortedAndCanonical(t *testing.T) {
	p := NewParser(64)
	obj, err := p.Parse([]byte(" {\"b\" : [1, {\"y\":2,\"x\":1}], \"a\":\"\\u00e9\\/<\" ,\"\\u0063\":null}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(obj.Canonical), `{"a":"é/<","b":[1,{"x":1,"y":2}],"c":null}`; got != want {
		t.Errorf("canonical = %s, want %s", got, want)
	}
	var keys []string
	for _, m := range obj.Members {
		keys = append(keys, string(m.Key))
	}
	if got := strings.Join(keys, ","); got != "a,b,c" {
		t.Errorf("members = %s, want a,b,c", got)
	}
	for key, want := range map[string]string{"a": `"é/<"`, "b": `[1,{"x":1,"y":2}]`, "c": "null"} {
		if v, ok := obj.Get(key); !ok || string(v) != want {
			t.Errorf("Get(%q) = %s, %v; want %s", key, v, ok, want)
		}
	}
	if _, ok := obj.Get("d"); ok {
		t.Error("Get of an absent key found it")
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		body string
		want Error
	}{
		{"{\"a\":\"\xff\"}", Error{Kind: InvalidUTF8}},
		{" \n", Error{Kind: Empty}},
		{"[]", Error{Kind: NotObject}},
		{`"s"`, Error{Kind: NotObject}},
		{`{"a":1,}`, Error{Kind: Syntax, Offset: 7}},
		{`{"a":1`, Error{Kind: Syntax, Offset: 6}},             // just past the last token
		{`{"a": 01}`, Error{Kind: Syntax, Offset: 7}},          // "0" then a stray "1"
		{`{"a": "\x"}`, Error{Kind: Syntax, Offset: 6}},        // at the start of the bad string
		{`{"a":[[[1]]]}`, Error{Kind: Depth, Path: "a[0][0]"}}, // the fourth level
		{`{"a":{"b":1,"\u0062":2}}`, Error{Kind: DuplicateKey, Path: "a.b", Key: "b"}},
		{`{} {`, Error{Kind: TrailingData, Offset: 4}}, // past the token after the object
		{`{} x`, Error{Kind: TrailingData, Offset: 3}},
	} {
		_, err := NewParser(3).Parse([]byte(tc.body))
		var e *Error
		if !errors.As(err, &e) || *e != tc.want {
			t.Errorf("%q: error %#v, want %#v", tc.body, err, tc.want)
		}
	}
}

var stringSamples = []string{
	"", "plain", "<b>&amp;</b>", "\"\\/", "\x00\x01\x1f\x7f", "\b\f\n\r\t", "é日本😀", "\u2028\u2029", "\u2027\u202a",
	"\ufffd", "\xff", "a\xc0\x80b", "\xed\xa0\x80", "\xe2\x80", "trailing\xe2",
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range stringSamples {
		if got, want := AppendString(nil, s), encodingJSON(t, s); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
}

func FuzzCanonicalAppendString(f *testing.F) {
	for _, s := range stringSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := AppendString(nil, s), encodingJSON(t, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}

func encodingJSON(t testing.TB, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// TestStringDecodes: String gives back what encoding/json decodes, for the
// canonical form of every sample and for escapes the canonical form keeps.
func TestStringDecodes(t *testing.T) {
	values := []string{`"\u0000"`, `"\u2028"`, `"\"\\"`, `"\b\f\n\r\t"`, `"\u001f"`}
	for _, s := range stringSamples {
		values = append(values, string(AppendString(nil, s)))
	}
	for _, v := range values {
		var want string
		if err := json.Unmarshal([]byte(v), &want); err != nil {
			t.Fatal(err)
		}
		if got, ok := String([]byte(v)); !ok || got != want {
			t.Errorf("String(%s) = %q, %v; want %q", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "1", "null", "{}", `"`} {
		if _, ok := String([]byte(v)); ok {
			t.Errorf("String(%q) reported a string", v)
		}
	}
}

// TestPrintable8 checks the eight-byte test against the byte table for
// every byte value at every position, among neighbours near the borders.
func TestPrintable8(t *testing.T) {
	for _, fill := range []byte{'a', 0x20, 0x21, '"' + 1, '\\' + 1, 0x7f, 0x1f, 0x80, 0} {
		for pos := range 8 {
			for b := range 256 {
				w := bytes.Repeat([]byte{fill}, 8)
				w[pos] = byte(b)
				want := true
				for _, c := range w {
					want = want && c < 0x80 && plain[c]
				}
				if got := printable8(binary.LittleEndian.Uint64(w)); got != want {
					t.Fatalf("printable8(%q) = %v, want %v", w, got, want)
				}
			}
		}
	}
}

// BenchmarkCanonicalParse measures Parse alone on the load generator's
// body shape (test/bench/load.go).
func BenchmarkCanonicalParse(b *testing.B) {
	body := []byte(`{"type":"order.created","data":{"n":12345,"pad":"` + strings.Repeat("x", 1000) + `"}}`)
	p := NewParser(64)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Parse(body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestForgetKeepsNoByteOfTheBody: a parser kept for reuse holds nothing of
// the last body it parsed (a publish body carries one-time secrets) in any
// of its buffers, up to their capacity.
func TestForgetKeepsNoByteOfTheBody(t *testing.T) {
	const secret = "s3cr3t-value-0123456789"
	p := NewParser(8)
	body := []byte(`{"z":{"b":"` + secret + `","a\u0041":["` + secret + `",{"k":"` + secret + `"}]},"secrets":{"` + secret + `":"` + secret + `"}}`)
	many := `,"many":{`
	for i := range 20 { // past seenAfter: the duplicate check keeps a set
		if i > 0 {
			many += ","
		}
		many += `"` + secret + strings.Repeat("x", i) + `":1`
	}
	body = append(body[:len(body)-1], many+`}}`...)
	if _, err := p.Parse(body); err != nil {
		t.Fatal(err)
	}
	if len(p.seen) == 0 {
		t.Fatal("the body did not exercise the duplicate-check set")
	}
	p.Forget()
	for name, buf := range map[string][]byte{"out": p.out, "keys": p.keys, "scratch": p.scratch} {
		if bytes.Contains(buf[:cap(buf)], []byte("s3cr3t")) {
			t.Errorf("%s still holds the body's secret after Forget", name)
		}
	}
	if p.in != nil {
		t.Error("Forget kept a reference to the input")
	}
	for _, m := range p.members[:cap(p.members)] {
		if m.key != nil {
			t.Error("Forget kept a member's key")
		}
	}
	for _, s := range p.seen {
		if len(s) != 0 {
			t.Error("Forget kept keys in a duplicate-check set")
		}
	}
	// Still usable.
	obj, err := p.Parse([]byte(`{"b":1,"a":2}`))
	if err != nil || string(obj.Canonical) != `{"a":2,"b":1}` {
		t.Fatalf("after Forget: %q, %v", obj.Canonical, err)
	}
}
