package ledger

import (
	"slices"
	"strings"
	"testing"
)

func TestCapSlots(t *testing.T) {
	// Candidates are "endpoint:n" in claim order.
	endpointOf := func(c string) string { ep, _, _ := strings.Cut(c, ":"); return ep }
	for _, tc := range []struct {
		name  string
		cands []string
		slots map[string]int
		want  []string
	}{
		{"no slots keeps all", []string{"a:1", "b:1", "a:2"}, nil, []string{"a:1", "b:1", "a:2"}},
		{"capped endpoint keeps its earliest", []string{"a:1", "b:1", "a:2", "a:3", "b:2"}, map[string]int{"a": 2},
			[]string{"a:1", "b:1", "a:2", "b:2"}},
		{"zero slots drops all of the endpoint", []string{"a:1", "b:1", "a:2"}, map[string]int{"a": 0}, []string{"b:1"}},
		{"more slots than candidates keeps all", []string{"a:1", "a:2"}, map[string]int{"a": 5}, []string{"a:1", "a:2"}},
		{"each endpoint its own cap", []string{"a:1", "b:1", "a:2", "b:2", "c:1"}, map[string]int{"a": 1, "b": 1},
			[]string{"a:1", "b:1", "c:1"}},
		{"empty", nil, map[string]int{"a": 1}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CapSlots(slices.Clone(tc.cands), endpointOf, tc.slots)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("CapSlots(%v, %v) = %v, want %v", tc.cands, tc.slots, got, tc.want)
			}
		})
	}
}
