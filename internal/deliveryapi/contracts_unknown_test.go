package deliveryapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// unknownContracts never knew the event types (a process started while
// the Kubernetes API server does not answer, nothing in the ledger).
type unknownContracts struct{}

func (unknownContracts) Contract(namespace, _ string) (*publish.Contract, bool, error) {
	return nil, false, fmt.Errorf("namespace %s: %w", namespace, publish.ErrContractsUnknown)
}

// TestContractsUnknownIsServiceUnavailable: a create whose contract cannot
// be known yet is ServiceUnavailable (503) with a retry-after, never an
// internal error.
func TestContractsUnknownIsServiceUnavailable(t *testing.T) {
	core, err := publish.New(publish.Config{Committer: fixedOutcome{}, Contracts: unknownContracts{}, RetryAfter: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	spec := v1alpha1.WebhookEventSpec{Type: "order.created", Data: &runtime.RawExtension{Raw: []byte(`{"n":1}`)}}
	_, err = core.Publish(t.Context(), publishRequest("shop", &spec))
	se := publishError(err)
	if !apierrors.IsServiceUnavailable(se) {
		t.Fatalf("%v, want ServiceUnavailable", se)
	}
	st := se.(apierrors.APIStatus).Status()
	if st.Code != http.StatusServiceUnavailable || st.Details == nil || st.Details.RetryAfterSeconds != 2 {
		t.Errorf("status %d, details %+v: want 503 with a retry after 2 seconds", st.Code, st.Details)
	}
	if !strings.Contains(st.Message, "not known yet") {
		t.Errorf("message %q", st.Message)
	}
}
