package eventfilter

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
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

// Bounds FuzzHostile holds each evaluation to. The heap bound is what an
// evaluation may build (RuntimeCostLimit bytes) plus the decoding of data
// of EstimatedDataBytes (some twenty bytes of Go values per byte of JSON
// at worst) with room; the time bound is the evaluation's budget plus the
// slack of one call, which is not interrupted (the estimate bounds it).
const (
	hostileHeapBound = 64 << 20
	hostileTimeout   = 100 * time.Millisecond
	hostileSlack     = 2 * time.Second
)

// FuzzHostile: expressions the estimate accepts, over data up to the body
// limit, allocate at most hostileHeapBound and return within their time
// budget (plus one call's slack) with an answer or a bounded reason. The
// seeds include issue #42's two filters: a replace of data by data (refused
// by the estimate) and a million-step loop (stopped by its time budget).
func FuzzHostile(f *testing.F) {
	big := `{"s":"` + strings.Repeat("a", EstimatedDataBytes-16) + `"}`
	for _, seed := range []struct{ expr, data string }{
		{`has(data.s) && data.s.replace("a", data.s).replace("a", data.s).size() > 0`, `{"s":"` + strings.Repeat("a", 5000) + `"}`},
		{`has(data.s) && data.s.replace("a", data.s).replace("a", data.s).size() > 0`, big},
		{`lists.range(1000).all(i, lists.range(1000).all(j, i + j >= 0))`, `{}`},
		{`data.s.replace("a", "bb").size() > 0`, big},
		{`data.s.lowerAscii().upperAscii().trim() != ""`, big},
		{`data.s.split("").size() > 0`, big},
		{`strings.quote(data.s).size() > 0`, `{"s":"` + strings.Repeat(`\u0000`, 40000) + `"}`},
		{`data.s + data.s + data.s != ""`, big},
		{`lists.range(10000).map(i, i).sort().size() > 0`, `{}`},
		{`data.xs.map(x, [x, x]).flatten().distinct().size() > 0`, `{"xs":[` + strings.Repeat(`"abcdefgh",`, 20000) + `"x"]}`},
		{`data.s.matches("(a|aa)*$")`, big},
	} {
		f.Add(seed.expr, []byte(seed.data))
	}
	f.Fuzz(func(t *testing.T, expr string, data []byte) {
		p, err := Compile(expr)
		if err != nil {
			return
		}
		ev := NewEvent("order.created", "shop", data)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		got, err := p.Eval(context.Background(), ev, Budget{Timeout: hostileTimeout})
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		if err != nil && got {
			t.Fatalf("%q: a match with an error %v", expr, err)
		}
		if err != nil && Reason(err) == ReasonOther && strings.Contains(err.Error(), "internal error") {
			t.Fatalf("%q: %v", expr, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > hostileHeapBound {
			t.Fatalf("%q on %d bytes allocated %d MiB, more than %d MiB", expr, len(data), alloc>>20, hostileHeapBound>>20)
		}
		if took > hostileTimeout+hostileSlack {
			t.Fatalf("%q on %d bytes took %s, budget %s", expr, len(data), took, hostileTimeout)
		}
	})
}
