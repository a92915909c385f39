package webhookendpoint

import (
	"strings"
	"testing"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/internal/wire"
	"github.com/hookkeeper/hookkeeper/internal/wire/wiretest"
)

// An endpoint stored before a rule existed is not Ready when its url or a
// header breaks it: every URL and header case of package wire, and every
// reserved name in several cases.
func TestWireProblem(t *testing.T) {
	spec := func(url string, headers ...hookv1.Header) *hookv1.WebhookEndpointSpec {
		return &hookv1.WebhookEndpointSpec{URL: url, EventTypes: []hookv1.EventTypePattern{"*"}, Headers: headers}
	}
	expect := func(what string, p *conditions.Problem, want error, reason, field string) {
		t.Helper()
		switch {
		case want == nil && p != nil:
			t.Errorf("%s: %+v, want no problem", what, p)
		case want != nil && p == nil:
			t.Errorf("%s: no problem, want %s %q", what, reason, want)
		case want != nil && (p.Reason != reason || !strings.HasPrefix(p.Message, field+": ") || !strings.Contains(p.Message, want.Error())):
			t.Errorf("%s: %s %q, want %s %q naming %s", what, p.Reason, p.Message, reason, want, field)
		}
	}
	for _, tc := range wiretest.URLCases {
		expect("url "+tc.URL, wireProblem(spec(tc.URL)), tc.Want, hookv1.ReasonURLInvalid, "spec.url")
	}
	for _, tc := range wiretest.HeaderCases {
		p := wireProblem(spec("https://example.com/", hookv1.Header{Name: "X-Ok", Value: "1"}, hookv1.Header{Name: tc.Name, Value: tc.Value}))
		expect("header "+tc.Name, p, tc.Want, hookv1.ReasonHeadersInvalid, "spec.headers[1]")
		if p != nil && tc.Value != "" && strings.Contains(p.Message, tc.Value) {
			t.Errorf("header %s: the message %q shows the value", tc.Name, p.Message)
		}
	}
	for _, name := range wire.ReservedHeaders {
		for _, c := range wiretest.Cases(name) {
			p := wireProblem(spec("https://example.com/", hookv1.Header{Name: c, Value: "v"}))
			expect("header "+c, p, wire.ErrHeaderReserved, hookv1.ReasonHeadersInvalid, "spec.headers[0]")
		}
	}
	p := wireProblem(spec("https://example.com/", hookv1.Header{Name: "X-A", Value: "1"}, hookv1.Header{Name: "x-a", Value: "2"}))
	expect("repeated name", p, wire.ErrHeaderRepeated, hookv1.ReasonHeadersInvalid, "spec.headers[1]")
	if p := wireProblem(spec(" https://example.com/", hookv1.Header{Name: "Host", Value: "v"})); p == nil || p.Reason != hookv1.ReasonURLInvalid {
		t.Errorf("both broken: %+v, want the url first", p)
	}
}
