// Package testutil holds the small helpers the controllers' tests share.
package testutil

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// Dur parses s as a metav1.Duration; it panics on a malformed literal,
// which is a bug in the test.
func Dur(s string) *metav1.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: d}
}

// MustSecret is a new signing secret.
func MustSecret(t testing.TB) sensitive.Bytes {
	t.Helper()
	s, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
