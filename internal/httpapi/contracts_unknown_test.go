package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// unknownContracts never knew the event types (a process started while
// the Kubernetes API server does not answer, nothing in the ledger).
type unknownContracts struct{}

func (unknownContracts) Contract(namespace, _ string) (*publish.Contract, bool, error) {
	return nil, false, fmt.Errorf("namespace %s: %w", namespace, publish.ErrContractsUnknown)
}

// TestContractsUnknownIs503: a publish whose contract cannot be known yet
// is 503 Unavailable with Retry-After, never 500, and records nothing.
func TestContractsUnknownIs503(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Contracts = unknownContracts{} })
	rec := e.do(t, req{body: validBody})
	d := wantError(t, rec, http.StatusServiceUnavailable, CodeUnavailable, "")
	if got := rec.Header().Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
	if !strings.Contains(d.Message, "contracts of this namespace's event types are not known yet") {
		t.Errorf("message %q", d.Message)
	}
	if p := e.pub.last(); p != nil {
		t.Errorf("event %s committed, want none", p.ID)
	}
}
