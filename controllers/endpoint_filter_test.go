package controllers

import (
	"strings"
	"testing"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

// TestFilterProblem: an endpoint's filter is compiled at reconcile; every
// kind of refusal is FilterInvalid with a message that names the field and,
// for an error at one place, its position.
func TestFilterProblem(t *testing.T) {
	tests := []struct {
		filter string
		want   string // a prefix of the message; "" for no problem
	}{
		{filter: ""},
		{filter: `data.amount > 1000 && data.currency == "EUR"`},
		{filter: `has(data.amount) && type.startsWith("order.") && publisherNamespace == "shop"`},
		{filter: `data.amout > 1000 && amout`, want: "spec.filter: 1:"},
		{filter: `data.amount >`, want: "spec.filter: 1:"},
		{filter: `data.amount`, want: "spec.filter: the expression must evaluate to a bool"},
		{filter: `data.a.all(x, data.b.all(y, data.c.all(z, x == y && y == z)))`, want: "spec.filter: estimated cost"},
		{filter: strings.Repeat("true && ", 600) + "true", want: "spec.filter: the expression has"},
	}
	for _, tt := range tests {
		p := filterProblem(&hookv1.WebhookEndpointSpec{Filter: tt.filter})
		switch {
		case tt.want == "" && p != nil:
			t.Errorf("filter %.40q: problem %q, want none", tt.filter, p.Message)
		case tt.want != "" && p == nil:
			t.Errorf("filter %.40q: no problem, want %q", tt.filter, tt.want)
		case tt.want != "" && (p.Reason != hookv1.ReasonFilterInvalid || !strings.HasPrefix(p.Message, tt.want)):
			t.Errorf("filter %.40q: %s %q, want FilterInvalid %q…", tt.filter, p.Reason, p.Message, tt.want)
		}
	}
}
