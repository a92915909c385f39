package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// TestQuotaExceeded: a publish over its namespace's WebhookQuota is 429
// QuotaExceeded with Retry-After (whole seconds, rounded up) and the hard
// limit it would exceed; nothing is published.
func TestQuotaExceeded(t *testing.T) {
	for _, tc := range []struct {
		limit      ledger.QuotaLimit
		retryAfter time.Duration
		want       string
	}{
		{ledger.QuotaPublishesPerSecond, 40 * time.Millisecond, "1"},
		{ledger.QuotaEventsPerDay, 3*time.Hour + 500*time.Millisecond, "10801"},
		{ledger.QuotaPayloadBytesRetained, ledger.QuotaBytesRetryAfter, "60"},
	} {
		t.Run(string(tc.limit), func(t *testing.T) {
			e := newEnv(t)
			e.pub.itemErr = &ledger.QuotaError{Namespace: ns, Limit: tc.limit, Hard: 10, Used: 10, RetryAfter: tc.retryAfter}
			rec := e.do(t, req{body: `{"type":"order.created","data":{}}`})
			got := wantError(t, rec, http.StatusTooManyRequests, CodeQuotaExceeded, "")
			if got.Limit != string(tc.limit) || !strings.Contains(got.Message, "spec.hard."+string(tc.limit)) {
				t.Errorf("error = %+v, want limit %s named", got, tc.limit)
			}
			if ra := rec.Header().Get("Retry-After"); ra != tc.want {
				t.Errorf("Retry-After = %q, want %q", ra, tc.want)
			}
			if len(e.pub.published) != 0 {
				t.Error("a refused event was published")
			}
		})
	}
}
