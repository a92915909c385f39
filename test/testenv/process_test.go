package testenv_test

import (
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// A kubectl wait longer than RunKubectl's own limit was killed before its
// timeout (the e2e RetryBudgetLimited spec waits 4 minutes): the limit must
// outlast every --timeout, and keep two minutes for everything else.
func TestKubectlLimitOutlastsKubectlsTimeout(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{[]string{"get", "pods"}, 2 * time.Minute},
		{[]string{"wait", "whep/x", "--for=condition=Ready", "--timeout=30s"}, 2 * time.Minute},
		{[]string{"wait", "whep/x", "--for=condition=Ready", "--timeout=4m0s"}, 4*time.Minute + 30*time.Second},
		{[]string{"wait", "--timeout=10m", "whep/x"}, 10*time.Minute + 30*time.Second},
		{[]string{"wait", "--timeout=bogus"}, 2 * time.Minute},
	} {
		if got := testenv.KubectlLimit(tc.args); got != tc.want {
			t.Errorf("KubectlLimit(%q) = %s, want %s", tc.args, got, tc.want)
		}
	}
}
