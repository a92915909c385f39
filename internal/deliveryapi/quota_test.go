package deliveryapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// TestQuotaExceeded: a create over the namespace's WebhookQuota is 429
// TooManyRequests with retryAfterSeconds (which the API server answers as
// Retry-After) and one cause of type QuotaExceeded naming the hard limit;
// kubectl prints the message, which names it too.
func TestQuotaExceeded(t *testing.T) {
	core := newCore(t, fixedOutcome{res: ledger.EventInsertResult{Err: &ledger.QuotaError{
		Namespace: "shop", Limit: ledger.QuotaEventsPerDay, Hard: 1000, Used: 1000, RetryAfter: 90*time.Minute + time.Millisecond}}})
	spec := v1alpha1.WebhookEventSpec{Type: "a", Data: &runtime.RawExtension{Raw: []byte(`{}`)}}
	st := refusedStatus(t, core, "shop", &spec)
	if st.Code != http.StatusTooManyRequests || st.Reason != metav1.StatusReasonTooManyRequests {
		t.Errorf("status %d %s, want 429 TooManyRequests", st.Code, st.Reason)
	}
	// client-go would sleep 90 minutes and retry: the wait is in the
	// message only.
	if st.Details == nil || st.Details.RetryAfterSeconds != 0 || len(st.Details.Causes) != 1 {
		t.Fatalf("details %+v, want no retryAfterSeconds and one cause", st.Details)
	}
	if !strings.Contains(st.Message, "retry after 5401s") {
		t.Errorf("message %q, want the wait in it", st.Message)
	}
	if c := st.Details.Causes[0]; c.Type != QuotaExceeded || c.Field != "spec.hard.eventsPerDay" {
		t.Errorf("cause %+v, want QuotaExceeded on spec.hard.eventsPerDay", c)
	}
	if !strings.Contains(st.Message, "spec.hard.eventsPerDay is 1000") || !strings.HasSuffix(st.Message, "(QuotaExceeded)") {
		t.Errorf("message %q, want the limit named and (QuotaExceeded)", st.Message)
	}
}

// TestQuotaRateRetryAfter: over the publish rate, the next turn is near:
// retryAfterSeconds is set, so that kubectl waits for it and retries.
func TestQuotaRateRetryAfter(t *testing.T) {
	core := newCore(t, fixedOutcome{res: ledger.EventInsertResult{Err: &ledger.QuotaError{
		Namespace: "shop", Limit: ledger.QuotaPublishesPerSecond, Hard: 10, Used: 10, RetryAfter: 80 * time.Millisecond}}})
	spec := v1alpha1.WebhookEventSpec{Type: "a", Data: &runtime.RawExtension{Raw: []byte(`{}`)}}
	st := refusedStatus(t, core, "shop", &spec)
	if st.Code != http.StatusTooManyRequests || st.Details == nil || st.Details.RetryAfterSeconds != 1 {
		t.Fatalf("status %d, details %+v; want 429 with retryAfterSeconds 1", st.Code, st.Details)
	}
	if c := st.Details.Causes; len(c) != 1 || c[0].Field != "spec.hard.publishesPerSecond" {
		t.Errorf("causes %+v, want QuotaExceeded on spec.hard.publishesPerSecond", c)
	}
}
