package catalog

import (
	"strings"
	"testing"
)

// numberFields are the fields of numberSchema: a field per way a number
// can be checked; numberCases set one of them each.
var numberFields = [][2]string{
	{"int", `{"type":"integer"}`},
	{"num", `{"type":"number"}`},
	{"int32", `{"type":"integer","format":"int32"}`},
	{"int64", `{"type":"integer","format":"int64"}`},
	{"intMax53", `{"type":"integer","maximum":9007199254740992}`},
	{"numExclMax53", `{"type":"number","maximum":9007199254740992,"exclusiveMaximum":true}`},
	{"intMaxNear63", `{"type":"integer","maximum":9223372036854774784}`},
	{"intMinNear63", `{"type":"integer","minimum":-9223372036854774784}`},
	{"intMax63", `{"type":"integer","maximum":9223372036854775807}`},
	{"intMin63", `{"type":"integer","minimum":-9223372036854775808}`},
	{"numMinHalf", `{"type":"number","minimum":0.5}`},
	{"intMultipleOf3", `{"type":"integer","multipleOf":3}`},
	{"intEnum", `{"type":"integer","enum":[9007199254740993]}`},
}

// objectOf is the schema of an object with fields.
func objectOf(fields ...[2]string) string {
	props := make([]string, len(fields))
	for i, f := range fields {
		props[i] = `"` + f[0] + `":` + f[1]
	}
	return `{"type":"object","properties":{` + strings.Join(props, ",") + `}}`
}

// numberCases are the verdicts the API server gives a custom resource
// whose schema is numberSchema (TestNumbersAsTheAPIServer asks it). It
// reads an integer that fits in 64 bits as an int64 and any other number
// as a float64, and then validates as kube-openapi does, quirks included.
var numberCases = []struct {
	field, value string
	rule         string // "" when accepted
}{
	{"int", "9223372036854775807", ""},
	{"int", "-9223372036854775808", ""},
	{"int", "9007199254740993", ""}, // 2^53+1
	{"int", "1.0", ""},
	{"int", "1e3", ""},
	{"int", "-0", ""},
	{"int", "9007199254740991.0", ""},                        // a float, 2^53-1: an integer to kube-openapi
	{"int", "9007199254740993.0", "must be of type integer"}, // a float, 2^53: beyond

	{"int", "1.5", "must be of type integer"},
	{"int", "1e300", "must be of type integer"},
	{"int", "9223372036854775808", "must be of type integer"}, // 2^63: a float
	{"int", "-9223372036854775809", "must be of type integer"},
	{"num", "9223372036854775807", ""},
	{"num", "9223372036854775808", ""},
	{"num", "1.5", ""},
	{"num", "1e300", ""},
	{"num", "-1e300", ""},
	{"int32", "2147483647", ""},
	{"int32", "2147483648", "must be of type integer with format int32"},
	{"int64", "9223372036854775807", ""},
	{"intMax53", "9007199254740992", ""},
	{"intMax53", "9007199254740993", "should be less than or equal to 9007199254740992"},
	{"numExclMax53", "9007199254740991", ""},
	{"numExclMax53", "9007199254740993", "should be less than 9007199254740992"},
	{"intMaxNear63", "9223372036854774784", ""},
	{"intMaxNear63", "9223372036854774785", "should be less than or equal to 9223372036854774784"},
	{"intMaxNear63", "9223372036854775807", "should be less than or equal to 9223372036854774784"},
	{"intMinNear63", "-9223372036854774784", ""},
	{"intMinNear63", "-9223372036854774785", "should be greater than or equal to -9223372036854774784"},
	// A bound of ±2^63 is a float whose shortest decimal form does not
	// parse as an int64: kube-openapi refuses every value.
	{"intMax63", "0", "the schema's maximum is not of type integer"},
	{"intMin63", "0", "the schema's minimum is not of type integer"},
	// An int64 is compared with int64(0.5), 0: 0 passes a minimum of 0.5.
	{"numMinHalf", "1", ""},
	{"numMinHalf", "0", ""},
	{"numMinHalf", "0.25", "should be greater than or equal to 0.5"},
	{"numMinHalf", "-1", "should be greater than or equal to 0"},
	{"intMultipleOf3", "9223372036854775806", ""},
	{"intMultipleOf3", "9223372036854775807", "should be a multiple of 3"},
	{"intEnum", "9007199254740993", ""},
	{"intEnum", "9007199254740992", "Unsupported value"},
}

// TestNumbersAsTheAPIServerReadsThem: integers are exact to 64 bits on
// every path: each case is validated under the schema of its field alone
// (which the fast check compiles, when it knows the field's keywords) and
// under numberSchema (which it does not).
func TestNumbersAsTheAPIServerReadsThem(t *testing.T) {
	whole, err := Compile([]byte(objectOf(numberFields...)))
	if err != nil {
		t.Fatal(err)
	}
	if whole.fast != nil {
		t.Fatal("the whole schema is compiled for the fast check: nothing goes only through kube-openapi")
	}
	alone := map[string]*Schema{}
	fast := 0
	for _, f := range numberFields {
		s, err := Compile([]byte(objectOf(f)))
		if err != nil {
			t.Fatal(err)
		}
		alone[f[0]] = s
		if s.fast != nil {
			fast++
		}
	}
	if fast < 8 {
		t.Errorf("%d fields compiled for the fast check, want the 8 of type, maximum and minimum", fast)
	}
	for _, c := range numberCases {
		data := `{"` + c.field + `":` + c.value + `}`
		for _, s := range []*Schema{alone[c.field], whole} {
			v := s.Validate([]byte(data))
			switch {
			case c.rule == "" && v != nil:
				t.Errorf("%s refused (fast check: %t): %v", data, s.fast != nil, v)
			case c.rule != "" && v == nil:
				t.Errorf("%s accepted (fast check: %t), want %q", data, s.fast != nil, c.rule)
			case c.rule != "" && (v.Field != "data."+c.field || !strings.Contains(v.Message, c.rule)):
				t.Errorf("%s refused %v, want data.%s: …%s…", data, v, c.field, c.rule)
			}
		}
	}
	// Both integers of the issue in one array, and a number beyond a
	// float64, refused without quoting it.
	arr, err := Compile([]byte(`{"type":"object","properties":{"ids":{"type":"array","items":{"type":"integer"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if v := arr.Validate([]byte(`{"ids":[9223372036854775807,-9223372036854775808]}`)); v != nil {
		t.Errorf("int64 max and min refused: %v", v)
	}
	if v := arr.Validate([]byte(`{"ids":[1e400]}`)); v == nil || v.Field != "data" || strings.Contains(v.Message, "400") {
		t.Errorf("1e400: %v, want a refusal of data that does not quote it", v)
	}
}
