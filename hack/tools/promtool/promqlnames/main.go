// Command promqlnames prints the metric names that PromQL expressions read,
// parsed with Prometheus' own parser: the e2e suite compares the names the
// shipped alerts and dashboard query with those the manager exports. It
// lives in the promtool module so that the project's go.mod stays free of
// Prometheus.
//
// Input: a JSON array of expressions on stdin. Output: a JSON object
// mapping each expression to its sorted metric names. An expression that
// does not parse is an error naming it.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	var exprs []string
	if err := json.NewDecoder(os.Stdin).Decode(&exprs); err != nil {
		fmt.Fprintln(os.Stderr, "promqlnames: stdin must be a JSON array of strings:", err)
		os.Exit(2)
	}
	out := map[string][]string{}
	for _, e := range exprs {
		names, err := metricNames(e)
		if err != nil {
			fmt.Fprintf(os.Stderr, "promqlnames: %q: %v\n", e, err)
			os.Exit(1)
		}
		out[e] = names
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "promqlnames:", err)
		os.Exit(1)
	}
}

// metricNames returns the names of every vector selector in expr, from
// either the bare name or a __name__ equality matcher; a selector that
// matches names by regexp is an error (it cannot be checked).
func metricNames(expr string) ([]string, error) {
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var walkErr error
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name != labels.MetricName {
				continue
			}
			if m.Type != labels.MatchEqual {
				walkErr = fmt.Errorf("selector %s matches metric names with %s: name them", vs, m.Type)
				return walkErr
			}
			name = m.Value
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		return nil
	})
	if walkErr != nil {
		return nil, walkErr
	}
	slices.Sort(names)
	return names, nil
}
