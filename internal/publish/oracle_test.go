package publish

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/hookkeeper/hookkeeper/internal/canonjson"
)

// The differential tests hold the single-pass parser (canonjson) to the
// implementation it replaced (oracle_test.go): for every body, the same
// canonical bytes and hash, or the same refusal (status, code, field and
// message, byte offsets included). Stored body hashes depend on the first,
// clients on the second.

const oracleDeliveryID = "dlv_01hzzzzzzzzzzzzzzzzzzzzzzz"

var oracleSecretsKey = []byte("differential-key")

// trickyValues are JSON values, most of them well formed, that exercise
// escaping, numbers and literals.
var trickyValues = []string{
	// strings: escapes, controls, HTML, JSONP separators, unicode
	`""`, `"plain"`, `"\u0000"`, `"\u001f"`, `"\u0001\u0002\u0010"`, `"\b\f\n\r\t"`, `"\"\\\/"`, `"\/"`,
	`"\u003c\u003e\u0026"`, `"<b>&amp;</b>"`, `"\u2028\u2029"`, "\"\u2028x\u2029\"", "\"a\u2028\"",
	"\"\xe2\x80\xa7\xe2\x80\xaa\"", `"\u2027\u202a"`, `"\u007f"`, "\"\x7f\"", `"\u0080"`, `"é"`, `"\u00e9"`, `"\u00E9"`,
	`"日本語"`, `"\u65e5"`, `"😀"`, `"\ud83d\ude00"`, `"\uD83D\uDE00"`, `"\ufffd"`, "\"\xef\xbf\xbd\"", `"\ufeff"`,
	`"\ud800"`, `"\udc00"`, `"\udfff"`, `"\ud800\u0041"`, `"\ud800\ud800"`, `"\ud800\udbff"`, `"\udbff\udfff"`,
	`"\ud800\udc00"`, `"\udc00\ud800"`, `"\ud800\n"`, `"\ud800x"`, `"\ud800\\u"`, `"\ud800\u"`, `"\ud800\udc0"`,
	`"a\u0061a"`, `"\\u0061"`, `"\u0022"`, `"\u005c"`, `"\u005C\u0022"`,
	// malformed strings
	`"\x"`, `"\'"`, `"\u12g4"`, `"\u12"`, `"\U0041"`, `"abc`, "\"a\tb\"", "\"a\nb\"", "\"\x00\"", "\"\x1f\"", `"\"`, `"\`,
	// numbers
	`0`, `-0`, `1`, `-1`, `1.0`, `-0.0`, `0.5`, `1e5`, `1E5`, `1e+5`, `1E-5`, `1.5e3`, `-1.5E-300`, `0e0`,
	`123456789012345678901234567890`, `1.7976931348623157e309`, `1e400`, `-123456789012345678901234567890.123456789e-9999`,
	`01`, `00`, `-01`, `1.`, `.5`, `1e`, `1e+`, `1e-`, `-`, `--1`, `+1`, `1x`, `1.5.5`, `0x10`, `Infinity`, `NaN`, `1_000`,
	// literals
	`true`, `false`, `null`, `tru`, `nul`, `fals`, `nulll`, `truex`, `True`, `NULL`, `t`,
	// containers
	`{}`, `[]`, `[[]]`, `[{}]`, `{"a":{}}`, `[1,2,3]`, `[1,"x",null,true,{"b":[]}]`, `[1,]`, `[,1]`, `[1 2]`,
	`{"a":1,}`, `{,"a":1}`, `{"a" 1}`, `{"a":}`, `{"a"}`, `{1:2}`, `{"a":1 "b":2}`, `[}`, `{]`, `[1}`, `{"a":1]`,
	`{"b":1,"a":2,"c":{"z":1,"y":[{"q":1,"p":2}]}}`, `{"B":1,"a":2,"_":3,"A":4,"":5}`,
	`{"é":1,"e":2,"z":3,"\u00e9x":4}`, `{"\u0000":1,"\u0001":2," ":3}`, `{"a\u2028":1,"a":2}`,
}

// trickyBodies are whole bodies: top-level shapes, trailing data, field
// types, duplicates and whitespace.
var trickyBodies = []string{
	// not an object at all
	``, ` `, "\n\t\r ", `null`, `"s"`, `"s`, `1`, `-`, `[`, `[]`, `]`, `}`, `:`, `,`, `x`, `tru`, `true false`,
	`{`, `{"`, `{"type"`, `{"type":`, `{"type":"a"`, `{"type":"a",`, `{"type":"a","data":{}`,
	"\v{}", "\f{}", "\u00a0{}", "{}\u00a0", "\ufeff{}",
	// trailing data
	`{}{}`, `{} {`, `{}[`, `{}]`, `{}}`, `{},`, `{}:`, `{}"x"`, `{}"x`, `{} 12`, `{} 12x`, `{} 1.`, `{}-`,
	`{} tru`, `{} true`, `{} nullx`, `{} x`, "{}  \n", "{} \n {", `{"type":"a","data":{}} {"x":1}`, `{}"\ud800"`,
	`{"type":"a","data":{}}}`, `{"type":"a","data":{}}]`, `{"type":"a","data":{}},`, `{"type":"a","data":{}} "`,
	// whitespace everywhere
	" \t\r\n{ \t\r\n\"type\" \t\r\n: \t\r\n\"a\" \t\r\n, \t\r\n\"data\" \t\r\n: \t\r\n{ \"x\" : [ 1 , 2 ] } \t\r\n} \t\r\n",
	"{\"type\":\"a\",\"data\":{\"x\":[1\n,\n2]}\n}\n",
	// type
	`{"data":{}}`, `{"type":null,"data":{}}`, `{"type":1,"data":{}}`, `{"type":true,"data":{}}`, `{"type":{},"data":{}}`,
	`{"type":[],"data":{}}`, `{"type":"","data":{}}`, `{"type":"a b","data":{}}`, `{"type":"a..b","data":{}}`,
	`{"type":"\u0061","data":{}}`, `{"type":"` + strings.Repeat("a", 300) + `","data":{}}`, `{"type":"<a>","data":{}}`,
	// data
	`{"type":"a"}`, `{"type":"a","data":null}`, `{"type":"a","data":"x"}`, `{"type":"a","data":1}`,
	`{"type":"a","data":[]}`, `{"type":"a","data":true}`, `{"data":1,"type":1}`,
	// secrets
	`{"type":"a","data":{},"secrets":"x"}`, `{"type":"a","data":{},"secrets":1}`, `{"type":"a","data":{},"secrets":[]}`,
	`{"type":"a","data":{},"secrets":true}`, `{"type":"a","data":{},"secrets":{}}`, `{"type":"a","data":{},"secrets":null}`,
	`{"type":"a","data":{},"secrets":{"":"x"}}`, `{"type":"a","data":{"":1},"secrets":{"":"x"}}`,
	`{"type":"a","data":{"t":1},"secrets":{"t":"x"}}`, `{"type":"a","data":{"t":1},"secrets":{"\u0074":"x"}}`,
	`{"type":"a","data":{"x":{"t":1}},"secrets":{"t":"x"}}`, `{"type":"a","data":{"t":1},"secrets":{"T":"x","s":2,"r":{"n":[1]}}}`,
	`{"type":"a","data":{},"secrets":{"b":"1","a":"2","c":"<&>"}}`, `{"type":"a","data":{},"secrets":{"a":"1","a":"2"}}`,
	`{"type":"a","data":{},"secrets":{"\u2028":"x","\u0000":"y"}}`,
	// reissueOf and endpoint
	`{"type":"a","data":{},"reissueOf":1}`, `{"type":"a","data":{},"reissueOf":true}`, `{"type":"a","data":{},"reissueOf":{}}`,
	`{"type":"a","data":{},"reissueOf":[]}`, `{"type":"a","data":{},"reissueOf":null}`, `{"type":"a","data":{},"reissueOf":""}`,
	`{"type":"a","data":{},"reissueOf":"evt_x"}`, `{"type":"a","data":{},"reissueOf":"evt_01hzzzzzzzzzzzzzzzzzzzzzzz"}`,
	`{"type":"a","data":{},"reissueOf":"evt_01HZZZZZZZZZZZZZZZZZZZZZZZ"}`, `{"type":"a","data":{},"reissueOf":"\u0065vt_01hzzzzzzzzzzzzzzzzzzzzzzz"}`,
	`{"type":"a","data":{},"endpoint":1}`, `{"type":"a","data":{},"endpoint":false}`, `{"type":"a","data":{},"endpoint":{}}`,
	`{"type":"a","data":{},"endpoint":[]}`, `{"type":"a","data":{},"endpoint":null}`, `{"type":"a","data":{},"endpoint":""}`,
	`{"type":"a","data":{},"endpoint":"billing"}`, `{"type":"a","data":{},"endpoint":"Billing"}`, `{"type":"a","data":{},"endpoint":"a.b-c"}`,
	`{"type":"a","data":{},"endpoint":"-a"}`, `{"type":"a","data":{},"endpoint":"` + strings.Repeat("a", 254) + `"}`,
	`{"type":"a.b","data":{"n":1},"secrets":{"s":"v"},"reissueOf":"evt_01hzzzzzzzzzzzzzzzzzzzzzzz","endpoint":"billing"}`,
	// unknown fields: refused after the whole body parsed, first in key order
	`{"type":"a","data":{},"extra":1}`, `{"Type":"a","data":{}}`, `{"type":"a","data":{},"zz":1,"aa":2}`,
	`{"type":"a","data":{},"x":{"k":1,"k":2}}`, `{"type":"a","data":{},"x":[1,}`, `{"x":1,"x":2}`, `{"":1}`,
	`{"type":"a","data":{},"\u0000":1}`, `{"type":"a","data":{},"x":1}{}`,
	// duplicates: at any depth, decoded, and before later errors
	`{"type":"a","type":"b","data":{}}`, `{"type":"a","data":{},"data":{}}`, `{"type":"a","data":{"k":1,"k":2}}`,
	`{"type":"a","data":{"k":1,"\u006b":2}}`, `{"type":"a","data":{"x":[{"k":1},{"k":2,"k":3}]}}`,
	`{"type":"a","data":{"k":1,"k"`, `{"type":"a","data":{"k":1,"k":}`, `{"type":"a","data":{"k":1,"k":2,}}`,
	`{"type":"a","data":{"k":1,"k":{"d":1,"d":2}}}`, `{"type":"a","data":{"k":"\x","k":2}}`, `{"type":"a","data":{"\ud800":1,"\udc00":2}}`,
	`{"type":"a","data":{"a.b":{"c":1,"c":2}}}`, `{"type":"a","data":{"x":[[{"y":{"z":1,"z":2}}]]}}`,
	// as many secrets as allowed (4 here), and one more
	`{"type":"a","data":{},"secrets":{"a":"1","b":"2","c":"3","d":"4"}}`,
	`{"type":"a","data":{},"secrets":{"a":"1","b":"2","c":"3","d":"4","e":"5"}}`,
	// past json.Decoder's first buffer (512 bytes) and its refills
	`{"type":"a","data":{"x":"` + strings.Repeat("x", 2000) + `"` + strings.Repeat(" ", 600),
	`{"type":"a","data":{"x":"` + strings.Repeat("\u00e9", 300) + `","y":` + strings.Repeat("7", 1000) + `.`,
	"{" + strings.Repeat(" ", 1000) + "}" + strings.Repeat("\n", 1000) + "x",
	"{" + strings.Repeat(" ", 1000) + "}" + strings.Repeat(" ", 1000) + `"` + strings.Repeat("s", 700) + `"`,
	`{"type":"a","data":{` + strings.Repeat(`"k`+strings.Repeat("k", 50)+`":[1,2,3],`, 30) + `"k":1}}`,
	`{"type":"a","data":{"x":[` + strings.Repeat(`1, `, 400) + `]}}`,
}

// oracleDepthBodies nest containers at and around MaxJSONDepth, in every
// field that takes a value, with errors before and after the limit.
func oracleDepthBodies() []string {
	var out []string
	for n := MaxJSONDepth - 3; n <= MaxJSONDepth+1; n++ {
		objs := strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n)
		arrs := strings.Repeat("[", n) + strings.Repeat("]", n)
		mixed := strings.Repeat(`[{"k":`, n/2) + "null" + strings.Repeat("}]", n/2)
		for _, v := range []string{objs, arrs, mixed} {
			out = append(out,
				`{"type":"a","data":{"x":`+v+`}}`,
				`{"type":"a","data":`+v+`}`,
				`{"type":"a","data":{},"secrets":{"s":`+v+`}}`,
				`{"type":"a","data":{},"zz":`+v+`}`,
				`{"type":`+v+`}`,
				`{"type":"a","data":{"x":`+v, // truncated after the deep part
			)
		}
		// an error before the limit wins over it, one after it loses
		out = append(out,
			`{"type":"a","data":{"k":1,"k":`+strings.Repeat("[", n)+`}}`,
			`{"type":"a","data":{"x":`+strings.Repeat("[", n)+`}`,
			`{"type":"a","data":{"x":`+strings.Repeat("[", n)+`x`,
			`{"type":"a","data":{"x":`+strings.Repeat(`{"a":1,"a":`, n),
		)
	}
	return out
}

// oracleManyMembers has objects large enough for the duplicate check's
// map, with the duplicate on either side of the switch.
func oracleManyMembers() []string {
	var out []string
	for _, n := range []int{15, 16, 17, 40} {
		var sb strings.Builder
		for i := n - 1; i >= 0; i-- {
			fmt.Fprintf(&sb, `"k%02d":%d,`, i, i)
		}
		members := sb.String()
		out = append(out,
			`{"type":"a","data":{`+strings.TrimSuffix(members, ",")+`}}`,
			`{"type":"a","data":{`+members+`"k00":1}}`,
			`{"type":"a","data":{`+members+`"k`+fmt.Sprint(n-1)+`":1}}`,
			`{"type":"a","data":{"k00":0,`+members+`"z":1}}`,
			`{"type":"a","data":{`+members+`"z":{`+members+`"k03":1}}}`,
			`{"type":"a","data":{},"secrets":{`+strings.ReplaceAll(strings.TrimSuffix(members, ","), ":", `:"v",`+`"x`)+`}}`,
		)
	}
	return out
}

// oracleAckBodies are acknowledgement bodies, which share the strict parser.
var oracleAckBodies = []string{
	`{"deliveryID":"` + oracleDeliveryID + `","outcome":"processed"}`,
	`{"deliveryID":"` + oracleDeliveryID + `","outcome":"rejected","reason":"no \u00e9"}`,
	`{"deliveryID":"` + oracleDeliveryID + `","outcome":"rejected","reason":null}`,
	`{"deliveryID":"` + oracleDeliveryID + `","outcome":"rejected","reason":1}`,
	`{"deliveryID":"` + oracleDeliveryID + `","outcome":"rejected","reason":"` + strings.Repeat("r", 2000) + `"}`,
	`{"deliveryID":"` + oracleDeliveryID + `","outcome":1}`, `{"deliveryID":1,"outcome":"processed"}`,
	`{"deliveryID":"dlv_other","outcome":"processed"}`, `{"outcome":"processed"}`, `{"deliveryID":"` + oracleDeliveryID + `"}`,
	`{"deliveryID":"` + oracleDeliveryID + `","outcome":"processed","extra":{}}`,
	`{"deliveryID":"` + oracleDeliveryID + `","outcome":"processed","outcome":"rejected"}`,
	`{"deliveryID":"\u0064lv_01hzzzzzzzzzzzzzzzzzzzzzzz","outcome":"process\u0065d"}`,
}

// oracleSeeds is the table: the bodies above, each tricky value in data,
// in secrets, as a key and at the top level, and every prefix of a few
// bodies (every way a body can end early).
func oracleSeeds() []string {
	seeds := append([]string{}, trickyBodies...)
	seeds = append(seeds, oracleDepthBodies()...)
	seeds = append(seeds, oracleManyMembers()...)
	seeds = append(seeds, oracleAckBodies...)
	for _, v := range trickyValues {
		seeds = append(seeds,
			`{"type":"a","data":{"v":`+v+`}}`,
			`{"type":"a","data":{"z":1,"v":[`+v+`,`+v+`],"a":2}}`,
			`{"type":"a","data":{"k":1},"secrets":{"s":`+v+`}}`,
			`{"type":"a","data":{`+v+`:1}}`,
			`{"type":"a","data":{"x":{`+v+`:1,"k":2}}}`,
			`{"type":`+v+`,"data":{}}`,
			`{"type":"a","data":{}} `+v,
			v,
		)
	}
	for _, b := range []string{
		`{"type":"a.b","data":{"s":"x\u00e9\ud83d\ude00","n":-1.5e3,"l":[true,false,null,{}],"o":{"b":1,"a":2}},"secrets":{"t":"v"},"reissueOf":"evt_01hzzzzzzzzzzzzzzzzzzzzzzz","endpoint":"billing"}`,
		"{ \"type\" : \"a\" , \"data\" : { \"x\" : [ 1 , -0 , 1e5 , \"\\\"\" ] } }",
		`{"deliveryID":"` + oracleDeliveryID + `","outcome":"rejected","reason":"r"}`,
	} {
		for i := range len(b) {
			seeds = append(seeds, b[:i])
		}
	}
	return seeds
}

// oracleMutations derives bodies from seed by deleting each byte and by
// inserting, at each position, bytes that change the token structure.
func oracleMutations(seed string) []string {
	var out []string
	for i := range len(seed) + 1 {
		if i < len(seed) {
			out = append(out, seed[:i]+seed[i+1:])
		}
		for _, ins := range []string{" ", `"`, `\`, ",", ":", "}", "]", "{", "[", "0", "\x00", "\xff", "\xe2\x80\xa8"} {
			out = append(out, seed[:i]+ins+seed[i:])
		}
	}
	return out
}

// publishResult is what one implementation made of a publish body.
type publishResult struct {
	body *canonicalBody
	err  error
}

// comparableError is a refusal as a publisher sees it: rule, field and
// message (the HTTP door turns the rule into its status and code).
func comparableError(err error) string {
	if err == nil {
		return "<nil>"
	}
	if fe, ok := errors.AsType[*FieldError](err); ok {
		return fmt.Sprintf("%s field=%q %q", fe.Rule, fe.Field, fe.Message)
	}
	return "internal: " + err.Error()
}

// checkAgainstOracle fails t unless the new parsers answer body exactly as
// the old ones do, and returns the new publish result.
func checkAgainstOracle(t testing.TB, body []byte) publishResult {
	t.Helper()
	got, gerr := parseBody(body, 4, oracleSecretsKey)
	want, werr := oldParsePublishBody(body, 4, oracleSecretsKey)
	if g, w := comparableError(gerr), comparableError(werr); g != w {
		t.Fatalf("publish %q:\nerror %s\nwant  %s", body, g, w)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("publish %q:\ngot  %+v\nwant %+v", body, got, want)
	}

	// The canonical form of the whole object, whatever its fields.
	p := parsers.get()
	obj, err := p.Parse(body)
	gotCanon, gotErr := []byte(nil), "<nil>"
	if err != nil {
		gotErr = comparableError(jsonError(err, ""))
	} else {
		gotCanon = bytes.Clone(obj.Canonical)
	}
	parsers.put(p, len(body))
	wantCanon, wantErr := []byte(nil), "<nil>"
	if !utf8.Valid(body) {
		wantErr = comparableError(invalid(RuleJSON, "", "body must be UTF-8"))
	} else if tree, aerr := oldParseObject(body); aerr != nil {
		wantErr = comparableError(aerr)
	} else if wantCanon, err = oldCanonicalJSON(tree); err != nil {
		t.Fatal(err)
	}
	if gotErr != wantErr || !bytes.Equal(gotCanon, wantCanon) {
		t.Fatalf("canonical %q:\ngot  %s %s\nwant %s %s", body, gotCanon, gotErr, wantCanon, wantErr)
	}

	// The strictness other request bodies share (StrictObject), with the
	// fields of an acknowledgement: the same refusals, the same members.
	ackFields := []string{"deliveryID", "outcome", "reason"}
	var gotMembers map[string]string
	gotAckErr := StrictObject(body, ackFields, func(o canonjson.Object) error {
		gotMembers = map[string]string{}
		for _, m := range o.Members {
			gotMembers[string(m.Key)] = string(m.Value)
		}
		return nil
	})
	var wantMembers map[string]string
	wantTop, wantAckErr := oldParseStrictObject(body, ackFields...)
	if wantAckErr == nil {
		wantMembers = map[string]string{}
		for k, v := range wantTop {
			c, err := oldCanonicalJSON(v)
			if err != nil {
				t.Fatal(err)
			}
			wantMembers[k] = string(c)
		}
	}
	if g, w := comparableError(gotAckErr), comparableError(wantAckErr); g != w || !reflect.DeepEqual(gotMembers, wantMembers) {
		t.Fatalf("ack fields %q:\ngot  %v %s\nwant %v %s", body, gotMembers, g, wantMembers, w)
	}
	return publishResult{got, gerr}
}

func TestParsePublishBodyMatchesOracle(t *testing.T) {
	var kept []publishResult
	var accepted, refused int
	for _, seed := range oracleSeeds() {
		r := checkAgainstOracle(t, []byte(seed))
		kept = append(kept, r)
		if r.err == nil {
			accepted++
		} else {
			refused++
		}
	}
	// Results must not alias the pooled parsers' buffers: parsing the
	// bodies after them must not have changed them.
	for i, seed := range oracleSeeds() {
		want, _ := oldParsePublishBody([]byte(seed), 4, oracleSecretsKey)
		if !reflect.DeepEqual(kept[i].body, want) {
			t.Fatalf("result of %q changed after later parses: %+v, want %+v", seed, kept[i].body, want)
		}
	}
	// The table must exercise both answers broadly, or it proves little.
	t.Logf("%d accepted, %d refused", accepted, refused)
	if accepted < 100 || refused < 500 {
		t.Errorf("table has %d accepted and %d refused bodies; want at least 100 and 500", accepted, refused)
	}
}

func TestParsePublishBodyMutationsMatchOracle(t *testing.T) {
	seeds := []string{
		`{"type":"a","data":{"k":"v\u00e9","n":[1,-2.5e3,true,null]},"secrets":{"s":"x"}}`,
		`{"type":"a","data":{"b":{},"a":[]}} `,
		`{"deliveryID":"` + oracleDeliveryID + `","outcome":"processed","reason":"\ud800"}`,
	}
	if !testing.Short() {
		seeds = append(seeds, `{"type":"a","data":{"x":"\u2028\"\\","y":{"z":0,"z1":1}}}`)
	}
	n := 0
	for _, seed := range seeds {
		for _, m := range oracleMutations(seed) {
			checkAgainstOracle(t, []byte(m))
			n++
		}
	}
	t.Logf("%d mutated bodies", n)
}

// TestParsePublishBodyConcurrent parses the table from several goroutines
// at once, each in its own order: pooled parsers must never be shared, and
// no result may alias one.
func TestParsePublishBodyConcurrent(t *testing.T) {
	seeds := oracleSeeds()
	want := make([]publishResult, len(seeds))
	for i, s := range seeds {
		b, aerr := oldParsePublishBody([]byte(s), 4, oracleSecretsKey)
		want[i] = publishResult{b, aerr}
	}
	const workers = 4
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var got []publishResult
			for i := range seeds {
				b, aerr := parseBody([]byte(seeds[(i+w*len(seeds)/workers)%len(seeds)]), 4, oracleSecretsKey)
				got = append(got, publishResult{b, aerr})
			}
			for i, g := range got {
				j := (i + w*len(seeds)/workers) % len(seeds)
				if !reflect.DeepEqual(g.body, want[j].body) || comparableError(g.err) != comparableError(want[j].err) {
					t.Errorf("worker %d, %q: %+v %s, want %+v %s", w, seeds[j], g.body, comparableError(g.err), want[j].body, comparableError(want[j].err))
					return
				}
			}
		})
	}
	wg.Wait()
}

// FuzzCanonicalPublishBody compares the parsers on arbitrary bodies.
func FuzzCanonicalPublishBody(f *testing.F) {
	for _, seed := range oracleSeeds() {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAgainstOracle(t, body)
	})
}
