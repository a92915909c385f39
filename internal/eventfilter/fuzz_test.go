package eventfilter

import (
	"context"
	"strings"
	"testing"
)

// FuzzMatch: hostile expressions on hostile bodies never panic, give an
// answer or a bounded reason, and give the same answer twice. Their time
// is bounded by construction, not measured: an expression the estimate
// accepts costs at most EstimatedCostLimit on data of at most
// EstimatedDataBytes, and larger data is not read.
func FuzzMatch(f *testing.F) {
	for _, seed := range []struct{ expr, data string }{
		{`data.amount > 1000 && data.currency == "EUR"`, order},
		{`data.lines.exists(l, l.sku == "A-1")`, order},
		{`data.lines.all(l, data.lines.exists(m, m.sku == l.sku))`, order},
		{`data.xs.map(x, x * x).filter(y, y > 2).size() > 1`, `{"xs":[1,2,3,1e308,-9223372036854775808]}`},
		{`data.s.matches("(a+)+$")`, `{"s":"` + strings.Repeat("a", 4000) + `!"}`},
		{`data.s.split(",").size() > 2 && data.s.lowerAscii().contains("x")`, `{"s":"` + strings.Repeat("x,", 2000) + `"}`},
		{`lists.range(10000).all(i, i >= 0)`, `{}`},
		{`data.a.b.c.d.e == 1`, `{"a":{"b":{"c":{"d":{"e":1}}}}}`},
		{`data[""] == null`, `{"":null}`},
		{`data.n + 1 > 0`, `{"n":9223372036854775807}`},
		{`data.n / data.z == 0`, `{"n":1,"z":0}`},
		{`"%s %d %f".format([data.s, data.n, data.f]) != ""`, `{"s":"\u0000\ud800","n":1,"f":1.5}`},
		{`data == null`, `null`},
		{`type.startsWith("order.") || publisherNamespace == "x"`, `[1,2`},
		{`data.xs.exists(x, x == 2)`, `{"xs":[` + strings.Repeat(`[[[[[[`, 500) + strings.Repeat(`]]]]]]`, 500) + `]}`},
		{`sets.intersects(data.a, data.b)`, `{"a":[1,2,3],"b":[3.0]}`},
		{`data.?x.?y.orValue(1) == 1`, `{"x":{}}`},
		{`data.m.exists(k, v, k == v)`, `{"m":{"a":"a"}}`},
	} {
		f.Add(seed.expr, []byte(seed.data))
	}
	f.Fuzz(func(t *testing.T, expr string, data []byte) {
		p, err := Compile(expr)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Compile(%q): internal error %v", expr, err)
			}
			return
		}
		if p.EstimatedCost() > EstimatedCostLimit {
			t.Fatalf("Compile(%q) accepted an estimated cost of %d", expr, p.EstimatedCost())
		}
		ev := NewEvent("order.created", "shop", data)
		first, err1 := p.MatchEvent(context.Background(), ev)
		again, err2 := p.MatchEvent(context.Background(), ev)
		if first != again || Reason(err1) != Reason(err2) || (err1 == nil) != (err2 == nil) {
			t.Fatalf("%q twice: %v, %v then %v, %v", expr, first, err1, again, err2)
		}
		if err1 != nil {
			if first {
				t.Fatalf("%q: a match with an error %v", expr, err1)
			}
			if strings.Contains(err1.Error(), "internal error") {
				t.Fatalf("%q: %v", expr, err1)
			}
		}
	})
}
