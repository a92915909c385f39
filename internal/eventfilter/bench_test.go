package eventfilter

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
)

// BenchmarkMatch measures one fan-out's work for one endpoint: the issue's
// filter on a 1 KiB order, the data decoded once per event (per b.Loop
// iteration here, as a fan-out of one endpoint) or already decoded (what
// every further endpoint of the fan-out costs).
func BenchmarkMatch(b *testing.B) {
	p, err := Compile(`data.amount > 1000 && data.currency == "EUR"`)
	if err != nil {
		b.Fatal(err)
	}
	data := []byte(order)
	b.Run("decode-and-match", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ok, err := p.MatchEvent(b.Context(), NewEvent("order.created", "shop", data)); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("match-decoded", func(b *testing.B) {
		ev := NewEvent("order.created", "shop", data)
		b.ReportAllocs()
		for b.Loop() {
			if ok, err := p.MatchEvent(b.Context(), ev); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
}

// BenchmarkCostTracking shows why evaluation does without cel-go's
// runtime cost tracking (cel.CostLimit): with it, one comprehension's time
// grows with the square of its iterations (4x the elements, about 16x the
// time); without it, and with the tracker filters run with, linearly.
func BenchmarkCostTracking(b *testing.B) {
	e, err := env()
	if err != nil {
		b.Fatal(err)
	}
	ast, iss := e.Compile(`data.xs.exists(x, x == 2)`)
	if iss.Err() != nil {
		b.Fatal(iss.Err())
	}
	for _, tracked := range []bool{false, true} {
		opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
		if tracked {
			opts = append(opts, cel.CostLimit(1<<62), cel.CostTrackerOptions(interpreter.PresenceTestHasCost(false)))
		}
		prg, err := e.Program(ast, opts...)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{1000, 4000} {
			ev := NewEvent("t", "ns", []byte(`{"xs":[`+strings.Repeat(`1,`, n)+`2]}`))
			b.Run(fmt.Sprintf("tracked=%v/elements=%d", tracked, n), func(b *testing.B) {
				for b.Loop() {
					if out, _, err := prg.Eval((*vars)(ev)); err != nil || out != types.True {
						b.Fatal(out, err)
					}
				}
			})
		}
	}
	// The tracker filters run with (runtime.go): linear in the elements.
	prg, err := Compile(`data.xs.exists(x, x == 2)`)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1000, 4000} {
		ev := NewEvent("t", "ns", []byte(`{"xs":[`+strings.Repeat(`1,`, n)+`2]}`))
		b.Run(fmt.Sprintf("tracked=hookkeeper/elements=%d", n), func(b *testing.B) {
			for b.Loop() {
				if ok, err := prg.Eval(b.Context(), ev, Budget{Timeout: time.Hour}); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
