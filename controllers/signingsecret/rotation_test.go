package signingsecret

import (
	"github.com/hookkeeper/hookkeeper/controllers/internal/testutil"

	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

func TestCanonicalSecret(t *testing.T) {
	s := testutil.MustSecret(t)
	bare := strings.TrimPrefix(string(s), signing.SecretPrefix)
	for name, in := range map[string]string{
		"as generated":          string(s),
		"with a newline":        string(s) + "\n",
		"without the prefix":    bare,
		"surrounded by spaces":  "  " + string(s) + " ",
		"bare, trailing CRLF":   bare + "\r\n",
		"prefixed, leading tab": "\t" + string(s),
	} {
		got, err := canonicalSecret([]byte(in))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if string(got) != string(s) {
			t.Errorf("%s: canonical form differs from the generated secret", name)
		}
	}

	short := signing.SecretPrefix + "c2hvcnQ="
	for name, in := range map[string]string{"empty": "", "too short": short, "not base64": "whsec_!!!!"} {
		_, err := canonicalSecret([]byte(in))
		if !errors.Is(err, signing.ErrInvalidSecret) {
			t.Errorf("%s: err = %v, want ErrInvalidSecret", name, err)
		}
		if err != nil && in != "" && strings.Contains(err.Error(), strings.TrimPrefix(in, signing.SecretPrefix)) {
			t.Errorf("%s: the error quotes the secret: %v", name, err)
		}
	}
}

func TestPreviousSecretRecord(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)
	prev := &Previous{Value: testutil.MustSecret(t), RotatedAt: at}
	data := map[string][]byte{KeySigningSecret: []byte("keep")}
	encodePrevious(data, prev)
	got := DecodePrevious(data)
	if got == nil || !Same(got.Value, prev.Value) || !got.RotatedAt.Equal(at) {
		t.Fatalf("decodePrevious(encodePrevious(p)) = %+v", got)
	}
	encodePrevious(data, nil)
	if len(data) != 1 || string(data[KeySigningSecret]) != "keep" {
		t.Errorf("forgetting left %d keys or touched the current secret", len(data))
	}

	for name, data := range map[string]map[string][]byte{
		"nothing":         {},
		"no time":         {keyPreviousSigningSecret: prev.Value},
		"invalid time":    {keyPreviousSigningSecret: prev.Value, keyRotatedAt: []byte("yesterday")},
		"invalid secret":  {keyPreviousSigningSecret: []byte("whsec_x"), keyRotatedAt: []byte(at.Format(time.RFC3339Nano))},
		"no secret value": {keyRotatedAt: []byte(at.Format(time.RFC3339Nano))},
	} {
		if got := DecodePrevious(data); got != nil {
			t.Errorf("%s: decoded %+v, want none", name, got)
		}
	}
}

func TestPlanRotation(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	a, b, c := testutil.MustSecret(t), testutil.MustSecret(t), testutil.MustSecret(t)
	day := 24 * time.Hour

	type want struct {
		secrets  []ledger.SigningSecret
		remember *Previous
		forget   bool
	}
	tests := []struct {
		name string
		in   RotationInput
		want want
	}{
		{
			name: "first registration: only the current secret",
			in:   RotationInput{Current: a, Grace: day, Now: now},
			want: want{secrets: []ledger.SigningSecret{{Value: a}}},
		},
		{
			name: "unchanged: only the current secret",
			in:   RotationInput{Current: a, Registered: a, Grace: day, Now: now},
			want: want{secrets: []ledger.SigningSecret{{Value: a}}},
		},
		{
			name: "rotated: the registered secret is remembered and stays valid for the grace period",
			in:   RotationInput{Current: b, Registered: a, Grace: day, Now: now},
			want: want{
				secrets:  []ledger.SigningSecret{{Value: b}, {Value: a, NotAfter: now.Add(day)}},
				remember: &Previous{Value: a, RotatedAt: now},
			},
		},
		{
			name: "remembered but not registered yet (a crash in between): the same rotation resumes",
			in: RotationInput{Current: b, Registered: a, Grace: day, Now: now,
				Remembered: &Previous{Value: a, RotatedAt: now.Add(-time.Minute)}},
			want: want{secrets: []ledger.SigningSecret{{Value: b}, {Value: a, NotAfter: now.Add(day - time.Minute)}}},
		},
		{
			name: "within the grace period: both, nothing to write",
			in: RotationInput{Current: b, Registered: b, Grace: day, Now: now,
				Remembered: &Previous{Value: a, RotatedAt: now.Add(-time.Hour)}},
			want: want{secrets: []ledger.SigningSecret{{Value: b}, {Value: a, NotAfter: now.Add(day - time.Hour)}}},
		},
		{
			name: "grace period over: the previous secret is dropped and forgotten",
			in: RotationInput{Current: b, Registered: b, Grace: day, Now: now,
				Remembered: &Previous{Value: a, RotatedAt: now.Add(-day)}},
			want: want{secrets: []ledger.SigningSecret{{Value: b}}, forget: true},
		},
		{
			name: "rotated again within the grace period: only the immediately previous secret stays",
			in: RotationInput{Current: c, Registered: b, Grace: day, Now: now,
				Remembered: &Previous{Value: a, RotatedAt: now.Add(-time.Hour)}},
			want: want{
				secrets:  []ledger.SigningSecret{{Value: c}, {Value: b, NotAfter: now.Add(day)}},
				remember: &Previous{Value: b, RotatedAt: now},
			},
		},
		{
			name: "rotated back to the previous secret: nothing extra, the record is forgotten",
			in: RotationInput{Current: a, Registered: a, Grace: day, Now: now,
				Remembered: &Previous{Value: a, RotatedAt: now.Add(-time.Hour)}},
			want: want{secrets: []ledger.SigningSecret{{Value: a}}, forget: true},
		},
		{
			name: "a zero grace period keeps nothing",
			in:   RotationInput{Current: b, Registered: a, Grace: 0, Now: now},
			want: want{secrets: []ledger.SigningSecret{{Value: b}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanRotation(tt.in)
			if fmt.Sprint(describeSecrets(got.Secrets, a, b, c)) != fmt.Sprint(describeSecrets(tt.want.secrets, a, b, c)) {
				t.Errorf("secrets = %v, want %v", describeSecrets(got.Secrets, a, b, c), describeSecrets(tt.want.secrets, a, b, c))
			}
			switch {
			case (got.Remember == nil) != (tt.want.remember == nil):
				t.Errorf("remember = %v, want %v", got.Remember != nil, tt.want.remember != nil)
			case got.Remember != nil && (!Same(got.Remember.Value, tt.want.remember.Value) || !got.Remember.RotatedAt.Equal(tt.want.remember.RotatedAt)):
				t.Errorf("remembered the wrong rotation (at %s)", got.Remember.RotatedAt)
			}
			if got.Forget != tt.want.forget {
				t.Errorf("forget = %v, want %v", got.Forget, tt.want.forget)
			}
			if len(got.Secrets) > 1 && !got.PreviousUntil.Equal(got.Secrets[1].NotAfter) {
				t.Errorf("previousUntil = %s, want %s", got.PreviousUntil, got.Secrets[1].NotAfter)
			}
		})
	}
}

// describeSecrets names each secret a, b or c (never its value) with its
// NotAfter, for comparing plans.
func describeSecrets(ss []ledger.SigningSecret, a, b, c sensitive.Bytes) []string {
	var out []string
	for _, s := range ss {
		name := "?"
		switch {
		case Same(s.Value, a):
			name = "a"
		case Same(s.Value, b):
			name = "b"
		case Same(s.Value, c):
			name = "c"
		}
		if !s.NotAfter.IsZero() {
			name += " until " + s.NotAfter.UTC().Format(time.RFC3339)
		}
		out = append(out, name)
	}
	return out
}
