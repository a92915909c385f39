package conditions

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
)

// secretish is what must never reach a condition: a credential inside an
// error's text.
const secretish = "whsec_c2VjcmV0LXNpZ25pbmcta2V5LTAxMjM0NTY3"

// TestConditionMessageShowsNoArbitraryErrorText: whatever error reaches a
// condition, its message names fields and rules, never the text of an
// error that is not a rule violation, nor the stored value of a field the
// operator could not decode.
func TestConditionMessageShowsNoArbitraryErrorText(t *testing.T) {
	urlErr := &url.Error{Op: "Get", URL: "https://user:" + secretish + "@hooks.example.com/x", Err: errors.New("connection refused")}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"a wrapped error from the API server", fmt.Errorf("reading Secret s: %w", errors.New("etcdserver: "+secretish)), InternalErrorMessage},
		{"a URL error carrying credentials", urlErr, InternalErrorMessage},
		{"a rule violation joined with an arbitrary error", errors.Join(&backoff.FieldError{Field: "factor", Detail: "must be greater than 1"}, errors.New(secretish)), InternalErrorMessage},
		{"rule violations, named by their spec path", errors.Join(
			&backoff.FieldError{Field: "factor", Detail: "must be greater than 1"},
			&backoff.FieldError{Field: "schedule[2]", Detail: "must be positive"}),
			"spec.backoff.factor: must be greater than 1; spec.backoff.schedule[2]: must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Message(tt.err)
			if strings.Contains(got, secretish) {
				t.Fatalf("message %q carries the error's secret", got)
			}
			if got != tt.want {
				t.Fatalf("message = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestUndecodableMessageNamesFieldAndRule: each value left out is named by
// its path and the rule it breaks, chosen by the kind of Go's error; the
// stored value (quoted in Go's error) never appears.
func TestUndecodableMessageNamesFieldAndRule(t *testing.T) {
	tests := []struct {
		problem  string
		wantRule string
	}{
		{`spec.replayWindow: time: invalid duration "` + secretish + `"`, "spec.replayWindow must be a duration Go can parse"},
		{`spec.selector.exhaustedAfter: parsing time "\"` + secretish + `\"" as "\"2006-01-02T15:04:05Z07:00\"": cannot parse`, "spec.selector.exhaustedAfter must be an RFC 3339 date-time"},
		{`spec.limit: json: cannot unmarshal number 1e+30` + secretish + ` into Go value of type int32`, "spec.limit must be a number in the range of its field"},
		{`spec.headers[0].value: json: cannot unmarshal object into Go value of type string: ` + secretish, "spec.headers[0].value has the wrong type for its field"},
		{`spec.headers[1].value: some decoder said ` + secretish, "spec.headers[1].value cannot be decoded into its field"},
	}
	var all []string
	for _, tt := range tests {
		got := Undecodable([]string{tt.problem})
		if strings.Contains(got, secretish) {
			t.Errorf("message %q echoes the stored value", got)
		}
		if !strings.Contains(got, tt.wantRule) {
			t.Errorf("message %q does not say %q", got, tt.wantRule)
		}
		all = append(all, tt.problem)
	}
	got := Undecodable(all)
	if strings.Contains(got, secretish) {
		t.Errorf("message %q echoes a stored value", got)
	}
	for _, tt := range tests {
		if !strings.Contains(got, tt.wantRule) {
			t.Errorf("the message of every problem %q does not say %q", got, tt.wantRule)
		}
	}
}
