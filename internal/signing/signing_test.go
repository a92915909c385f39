package signing_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// The Standard Webhooks specification's test vector, as used by the test
// suites of its reference libraries (libraries/go/webhook_test.go and
// libraries/javascript/src/webhook.test.ts, TestWebhookSign / "sign
// function works").
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specMsgID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specPayload   = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignSpecVector(t *testing.T) {
	for _, secret := range []string{specSecret, strings.TrimPrefix(specSecret, signing.SecretPrefix), specSecret + "\n"} {
		got, err := signing.Sign(sensitive.Bytes(secret), specMsgID, time.Unix(specTimestamp, 0), []byte(specPayload))
		if err != nil {
			t.Fatal(err)
		}
		if got != specSignature {
			t.Errorf("Sign(%q) = %q, want %q", secret, got, specSignature)
		}
	}
}

func TestSignIgnoresSubSecondPrecision(t *testing.T) {
	got, err := signing.Sign(sensitive.Bytes(specSecret), specMsgID, time.Unix(specTimestamp, 999_999_999).In(time.FixedZone("x", 3600)), []byte(specPayload))
	if err != nil || got != specSignature {
		t.Fatalf("Sign = %q, %v; want %q", got, err, specSignature)
	}
}

func TestSignatureHeaderRotation(t *testing.T) {
	other := mustGenerate(t)
	secrets := []sensitive.Bytes{sensitive.Bytes(specSecret), other}
	hdr, err := signing.SignatureHeader(secrets, specMsgID, time.Unix(specTimestamp, 0), []byte(specPayload))
	if err != nil {
		t.Fatal(err)
	}
	entries := strings.Split(hdr, " ")
	if len(entries) != 2 || entries[0] != specSignature {
		t.Fatalf("header %q: want two entries, the first %q", hdr, specSignature)
	}
	second, _ := signing.Sign(other, specMsgID, time.Unix(specTimestamp, 0), []byte(specPayload))
	if entries[1] != second {
		t.Errorf("second entry %q, want %q", entries[1], second)
	}
}

func TestSignRejects(t *testing.T) {
	ts := time.Unix(specTimestamp, 0)
	body := []byte(specPayload)
	tests := []struct {
		name    string
		secrets []sensitive.Bytes
		id      string
		want    error
	}{
		{"no secret", nil, specMsgID, nil},
		{"empty id", []sensitive.Bytes{sensitive.Bytes(specSecret)}, "", signing.ErrInvalidID},
		{"id with a dot", []sensitive.Bytes{sensitive.Bytes(specSecret)}, "msg.1", signing.ErrInvalidID},
		{"id with a space", []sensitive.Bytes{sensitive.Bytes(specSecret)}, "msg 1", signing.ErrInvalidID},
		{"id with a newline", []sensitive.Bytes{sensitive.Bytes(specSecret)}, "msg\n1", signing.ErrInvalidID},
		{"too long id", []sensitive.Bytes{sensitive.Bytes(specSecret)}, strings.Repeat("a", signing.MaxIDLength+1), signing.ErrInvalidID},
		{"bad secret", []sensitive.Bytes{sensitive.Bytes("whsec_!!!")}, specMsgID, signing.ErrInvalidSecret},
		{"one bad secret of two", []sensitive.Bytes{sensitive.Bytes(specSecret), sensitive.Bytes("whsec_")}, specMsgID, signing.ErrInvalidSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr, err := signing.SignatureHeader(tt.secrets, tt.id, ts, body)
			if err == nil {
				t.Fatalf("signed %q", hdr)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
		})
	}
}

func TestGenerateSecret(t *testing.T) {
	a, b := mustGenerate(t), mustGenerate(t)
	if string(a) == string(b) {
		t.Fatal("two generated secrets are equal")
	}
	s := string(a.Reveal())
	if !strings.HasPrefix(s, signing.SecretPrefix) {
		t.Fatalf("secret lacks the %s prefix", signing.SecretPrefix)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, signing.SecretPrefix))
	if err != nil || len(raw) != signing.GeneratedKeySize {
		t.Fatalf("secret decodes to %d bytes (%v), want %d", len(raw), err, signing.GeneratedKeySize)
	}
	key, err := signing.ParseSecret(a)
	if err != nil || string(key) != string(raw) {
		t.Fatalf("ParseSecret: %v", err)
	}
}

func TestParseSecret(t *testing.T) {
	key24 := base64.StdEncoding.EncodeToString(make([]byte, 24))
	key64 := base64.StdEncoding.EncodeToString(make([]byte, 64))
	valid := []string{specSecret, strings.TrimPrefix(specSecret, "whsec_"), " " + specSecret + "\n", "whsec_" + key24, "whsec_" + key64}
	for _, s := range valid {
		if _, err := signing.ParseSecret(sensitive.Bytes(s)); err != nil {
			t.Errorf("ParseSecret(%q): %v", s, err)
		}
	}
	invalid := []string{
		"",
		"whsec_",
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS", // truncated base64
		"whsec_MfKQ9r8G-KYqrTwjUPD8ILPZIo2LaLaSw",                                            // not the standard alphabet
		"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 16)),                       // too short
		"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 65)),                       // too long
		"whsec_" + base64.RawStdEncoding.EncodeToString([]byte("0123456789abcdefghijklmno")), // 25 bytes, unpadded
	}
	for _, s := range invalid {
		_, err := signing.ParseSecret(sensitive.Bytes(s))
		if !errors.Is(err, signing.ErrInvalidSecret) {
			t.Errorf("ParseSecret(%q) = %v, want ErrInvalidSecret", s, err)
			continue
		}
		if body := strings.TrimPrefix(s, "whsec_"); len(body) > 4 && strings.Contains(err.Error(), body[:5]) {
			t.Errorf("error %q quotes the secret", err)
		}
	}
}

func mustGenerate(t *testing.T) sensitive.Bytes {
	t.Helper()
	s, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
