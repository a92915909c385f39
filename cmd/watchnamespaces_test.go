package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestWatchNamespaces(t *testing.T) {
	for flag, want := range map[string][]string{
		"":                   nil,
		" , ":                nil,
		"shop":               {"shop"},
		"shop, billing,shop": {"billing", "shop"},
	} {
		o, err := watchNamespaces(flag).cacheOptions()
		if err != nil {
			t.Errorf("--watch-namespaces=%q: %v", flag, err)
			continue
		}
		if got := slices.Sorted(maps.Keys(o.DefaultNamespaces)); !slices.Equal(got, want) {
			t.Errorf("--watch-namespaces=%q watches %v, want %v", flag, got, want)
		}
	}
	for _, bad := range []string{"Shop", "shop/x", "shop,-billing"} {
		_, err := watchNamespaces(bad).cacheOptions()
		if err == nil || !strings.Contains(err.Error(), "--watch-namespaces") || !strings.Contains(err.Error(), "not a namespace name") {
			t.Errorf("--watch-namespaces=%q: %v, want an error naming the flag and the rule", bad, err)
		}
	}
}
