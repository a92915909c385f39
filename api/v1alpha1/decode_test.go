package v1alpha1_test

import (
	"encoding/json"
	"testing"
	"time"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

// TestLenientDecoding: a value the Go types cannot decode is left out and
// named; everything else in the object decodes as before.
func TestLenientDecoding(t *testing.T) {
	for _, tc := range []struct {
		name        string
		json        string
		undecodable []string
		check       func(t *testing.T, p *hookv1.RetryPolicy)
	}{{
		name: "a valid object",
		json: `{"metadata":{"name":"p"},"spec":{"replayWindow":"1h","backoff":{"schedule":["1s","2s"]}}}`,
		check: func(t *testing.T, p *hookv1.RetryPolicy) {
			if p.Spec.ReplayWindow.Duration != time.Hour || len(p.Spec.Backoff.Schedule) != 2 {
				t.Errorf("decoded %+v", p.Spec)
			}
		},
	}, {
		name:        "an overflowing duration",
		json:        `{"metadata":{"name":"p"},"spec":{"replayWindow":"9999999999h","attemptTimeout":"5s"}}`,
		undecodable: []string{`spec.replayWindow: time: invalid duration "9999999999h"`},
		check: func(t *testing.T, p *hookv1.RetryPolicy) {
			if p.Name != "p" || p.Spec.AttemptTimeout.Duration != 5*time.Second || p.Spec.ReplayWindow.Duration != 0 {
				t.Errorf("the rest did not decode: %+v", p)
			}
		},
	}, {
		name:        "one list element",
		json:        `{"spec":{"replayWindow":"1h","backoff":{"schedule":["1s","1H","3s"]}}}`,
		undecodable: []string{`spec.backoff.schedule[1]: time: unknown unit "H" in duration "1H"`},
		check: func(t *testing.T, p *hookv1.RetryPolicy) {
			if len(p.Spec.Backoff.Schedule) != 2 || p.Spec.Backoff.Schedule[1].Duration != 3*time.Second {
				t.Errorf("schedule %v", p.Spec.Backoff.Schedule)
			}
		},
	}, {
		name:        "a condition's time and an int32 out of range",
		json:        `{"spec":{"replayWindow":"1h"},"status":{"endpoints":2147483648,"conditions":[{"type":"Ready","status":"True","reason":"R","message":"m","lastTransitionTime":"2024-01-01t00:00:00z"}]}}`,
		undecodable: []string{"status.conditions[0].lastTransitionTime: ", "status.endpoints: "},
		check: func(t *testing.T, p *hookv1.RetryPolicy) {
			if len(p.Status.Conditions) != 1 || p.Status.Conditions[0].Type != "Ready" || !p.Status.Conditions[0].LastTransitionTime.IsZero() {
				t.Errorf("conditions %+v", p.Status.Conditions)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var p hookv1.RetryPolicy
			if err := json.Unmarshal([]byte(tc.json), &p); err != nil {
				t.Fatalf("decoding failed: %v", err)
			}
			if len(p.Undecodable) != len(tc.undecodable) {
				t.Fatalf("undecodable %q, want %q", p.Undecodable, tc.undecodable)
			}
			for i, want := range tc.undecodable {
				if got := p.Undecodable[i]; len(got) < len(want) || got[:len(want)] != want {
					t.Errorf("undecodable[%d] = %q, want prefix %q", i, got, want)
				}
			}
			if (p.DecodeError() == nil) != (len(tc.undecodable) == 0) {
				t.Errorf("DecodeError() = %v", p.DecodeError())
			}
			tc.check(t, &p)
			// Undecodable is never serialized.
			out, err := json.Marshal(&p)
			if err != nil {
				t.Fatal(err)
			}
			var again hookv1.RetryPolicy
			if err := json.Unmarshal(out, &again); err != nil || again.Undecodable != nil {
				t.Errorf("round trip: %v, undecodable %q", err, again.Undecodable)
			}
		})
	}

	// A spec of the wrong type is left out and named as well.
	var p hookv1.RetryPolicy
	if err := json.Unmarshal([]byte(`{"metadata":{"name":"p"},"spec":"nope"}`), &p); err != nil || len(p.Undecodable) != 1 || p.Name != "p" {
		t.Errorf("err %v, undecodable %q", err, p.Undecodable)
	}
	// Text that is not JSON stays an error.
	if err := json.Unmarshal([]byte(`{"spec":`), &p); err == nil {
		t.Errorf("truncated JSON decoded")
	}
	// Decoding again into a used object forgets the earlier problems.
	if err := json.Unmarshal([]byte(`{"spec":{"replayWindow":"9999999999h"}}`), &p); err != nil || len(p.Undecodable) != 1 {
		t.Fatalf("err %v, undecodable %q", err, p.Undecodable)
	}
	if err := json.Unmarshal([]byte(`{"spec":{"replayWindow":"1h"}}`), &p); err != nil || p.Undecodable != nil {
		t.Errorf("err %v, undecodable %q", err, p.Undecodable)
	}
}
