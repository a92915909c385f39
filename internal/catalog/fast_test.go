package catalog

import (
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// fastSchemas are schemas the fast check compiles, with the keywords it
// knows at their edges.
var fastSchemas = []string{
	orderSchema20,
	`{"type":"object","required":["a"],"properties":{"a":{"type":"integer","minimum":1,"maximum":10,"exclusiveMaximum":true},"b":{"type":"number","nullable":true},"c":{"type":"boolean"}}}`,
	`{"type":"object","properties":{"s":{"type":"string","minLength":2,"maxLength":3,"enum":["ab","abc","äöü","a"]},"l":{"type":"array","minItems":1,"maxItems":2,"items":{"type":"string"}}}}`,
	`{"type":"object","properties":{"e":{"type":"string","nullable":true,"enum":["x"]},"o":{"type":"object","nullable":true,"properties":{"n":{"type":"integer","nullable":true,"minimum":3}}}}}`,
	// Bounds an int64 holds exactly, and bounds it does not (2^63, a
	// fraction): kube-openapi compares an int64 with int64(bound).
	`{"type":"object","properties":{"a":{"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854774784},"b":{"type":"integer","maximum":9223372036854775807},"c":{"type":"number","minimum":0.5,"maximum":1e19,"exclusiveMaximum":true},"d":{"type":"integer","maximum":4.5},"e":{"type":"number","minimum":-3,"exclusiveMinimum":true}}}`,
}

// orderSchema20 is the 20-field schema of make bench's schema step.
const orderSchema20 = `{"type":"object","required":["id","amount","currency","customer","lines"],"properties":{
 "id":{"type":"string","maxLength":32},"amount":{"type":"number","minimum":0},"currency":{"type":"string","enum":["EUR","USD","GBP"]},
 "status":{"type":"string","maxLength":16},"note":{"type":"string","maxLength":200},"priority":{"type":"integer","minimum":0,"maximum":9},
 "paid":{"type":"boolean"},"tax":{"type":"number","minimum":0},"discount":{"type":"number","minimum":0,"maximum":100},
 "channel":{"type":"string","maxLength":16},"region":{"type":"string","maxLength":8},"shipping":{"type":"number","minimum":0},
 "coupon":{"type":"string","maxLength":32},"items":{"type":"integer","minimum":1},"weight":{"type":"number","minimum":0},
 "gift":{"type":"boolean"},"source":{"type":"string","maxLength":32},
 "customer":{"type":"object","required":["id"],"properties":{"id":{"type":"string","maxLength":32},"email":{"type":"string","maxLength":254},"tier":{"type":"integer","minimum":0}}},
 "lines":{"type":"array","maxItems":100,"items":{"type":"object","required":["sku","qty"],"properties":{"sku":{"type":"string","maxLength":16},"qty":{"type":"integer","minimum":1},"price":{"type":"number","minimum":0}}}},
 "meta":{"type":"object","properties":{"k":{"type":"string"}}}}}`

func TestFastCompilesTheCommonKeywordsOnly(t *testing.T) {
	for _, schema := range fastSchemas {
		s, err := Compile([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		if s.fast == nil {
			t.Errorf("not compiled for the fast check: %.60s", schema)
		}
	}
	for _, schema := range []string{
		`{"type":"object","properties":{"a":{"type":"string","pattern":"^a"}}}`,
		`{"type":"object","properties":{"a":{"type":"string","format":"email"}}}`,
		`{"type":"object","properties":{"a":{"type":"integer","enum":[1,2]}}}`,
		`{"type":"object","properties":{"a":{"type":"object","additionalProperties":{"type":"string"}}}}`,
		`{"type":"object","properties":{"a":{"x-kubernetes-int-or-string":true}}}`,
	} {
		s, err := Compile([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		if s.fast != nil {
			t.Errorf("compiled for the fast check although it has a keyword it does not know: %s", schema)
		}
	}
}

// FuzzFastAgreesWithTheValidator: whatever the fast check accepts, the API
// server's validator accepts too.
func FuzzFastAgreesWithTheValidator(f *testing.F) {
	for _, d := range []string{
		`{"a":1}`, `{"a":9.5}`, `{"a":10}`, `{"a":0}`, `{"a":1,"b":null}`, `{"a":1,"c":"true"}`, `{"a":1e300}`, `{"a":9007199254740993}`,
		`{"s":"ab","l":["x"]}`, `{"s":"äöü"}`, `{"e":null}`, `{"e":"x","o":null}`, `{"o":{"n":null}}`, `{"o":{"n":2}}`, `{"s":"abcd"}`, `{"l":[]}`, `{"l":["a","b","c"]}`, `{"l":[1]}`,
		`{"id":"o-1","amount":1,"currency":"EUR","customer":{"id":"c"},"lines":[{"sku":"a","qty":1}]}`,
		`{"id":"o-1","amount":-1,"currency":"EUR","customer":{"id":"c"},"lines":[]}`, `null`, `[]`, `{"lines":{}}`,
		`{"a":9223372036854775807}`, `{"a":-9223372036854775808}`, `{"a":9223372036854774784}`, `{"a":9223372036854774785}`, `{"a":9223372036854775808}`,
		`{"b":5}`, `{"b":5.0}`, `{"c":0}`, `{"c":1}`, `{"c":0.5}`, `{"c":9223372036854775807}`, `{"d":4}`, `{"d":4.0}`, `{"e":-3}`, `{"e":-3.0}`, `{"e":-2}`,
		`{"a":1.0}`, `{"a":1e3}`, `{"a":9007199254740993}`, `{"a":9007199254740992.0}`, `{"a":-0}`, `{"a":-0.0}`, `{"a":1e400}`,
	} {
		for i := range fastSchemas {
			f.Add(i, d)
		}
	}
	compiled := make([]*Schema, len(fastSchemas))
	for i, schema := range fastSchemas {
		s, err := Compile([]byte(schema))
		if err != nil {
			f.Fatal(err)
		}
		compiled[i] = s
	}
	f.Fuzz(func(t *testing.T, i int, data string) {
		if i < 0 {
			i = -i
		}
		s := compiled[i%len(compiled)]
		var obj any
		if utiljson.Unmarshal([]byte(data), &obj) != nil {
			return
		}
		if s.fast.ok(obj) {
			if v := s.slow(obj); v != nil {
				t.Fatalf("the fast check accepted %s, the validator refuses it: %v", data, v)
			}
		}
	})
}

func BenchmarkValidate20Fields(b *testing.B) {
	s, err := Compile([]byte(orderSchema20))
	if err != nil {
		b.Fatal(err)
	}
	data := []byte(`{"id":"o-1","amount":12.5,"currency":"EUR","status":"paid","note":"n","priority":3,"paid":true,"tax":1,"discount":5,
"channel":"web","region":"eu","shipping":4,"coupon":"c","items":2,"weight":1.5,"gift":false,"source":"s",
"customer":{"id":"c-1","email":"a@b.c","tier":1},"lines":[{"sku":"a","qty":1,"price":2},{"sku":"b","qty":2,"price":3}],"meta":{"k":"v"}}`)
	if v := s.Validate(data); v != nil {
		b.Fatal(v)
	}
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if s.Validate(data) != nil {
				b.Fatal("refused")
			}
		}
	})
	b.Run("validator", func(b *testing.B) {
		var obj any
		_ = utiljson.Unmarshal(data, &obj)
		for b.Loop() {
			if s.slow(obj) != nil {
				b.Fatal("refused")
			}
		}
	})
}
