package eventtype

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "order.created", true},
		{"order.created", "order.created", true},
		{"order.created", "order.updated", false},
		{"order.*", "order.created", true},
		{"order.*", "order.line.added", true},
		{"order.*", "order", false},
		{"order.*", "orders.created", false},
		{"fan.confirmation_requested", "fan.confirmation_requested", true},
	}
	for _, tt := range tests {
		if got := Match(tt.pattern, tt.name); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
	if !MatchAny([]string{"a.b", "order.*"}, "order.x") || MatchAny([]string{"a.b"}, "order.x") || MatchAny(nil, "x") {
		t.Error("MatchAny disagrees with Match")
	}
}

func TestValidate(t *testing.T) {
	for _, ok := range []string{"order.created", "fan.confirmation_requested", "a", "hookkeeper.delivery.exhausted", "v2-order.created_at"} {
		if err := Validate(ok); err != nil {
			t.Errorf("Validate(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".order", "order.", "order..created", "order.*", "order created", "_order", strings.Repeat("a", MaxLength+1)} {
		if err := Validate(bad); err == nil {
			t.Errorf("Validate(%q) accepted a bad name", bad)
		}
	}
}
