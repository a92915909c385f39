package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// TestLedgerOutageIs503 publishes into a real PostgreSQL, cuts it off (its
// connections reset, new ones refused, as when the server crashes) and
// publishes again: the answer is 503 Unavailable with Retry-After, as for
// the API's own overload, never 500, and the outage is counted.
func TestLedgerOutageIs503(t *testing.T) {
	store, outage := pgtest.OpenOutageStore(t)
	metrics := publish.NewMetrics(prometheus.NewRegistry())
	h, err := New(Config{Publisher: pgtest.Committer{Store: store}, Reader: store,
		Auth: StaticTokens{goodToken: {Username: "it"}}, PublishMetrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	post := func() (*http.Response, ErrorBody) {
		t.Helper()
		r, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/namespaces/shop/events", strings.NewReader(validBody))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer "+goodToken)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(IdempotencyKeyHeader, "outage-1")
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp, e
	}

	if resp, _ := post(); resp.StatusCode != http.StatusCreated {
		t.Fatalf("before the outage: %d", resp.StatusCode)
	}
	outage.Cut()
	for range 2 { // an idle connection reset, then a connect refused
		resp, e := post()
		if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Code != CodeUnavailable {
			t.Fatalf("during the outage: %d %+v, want 503 %s", resp.StatusCode, e, CodeUnavailable)
		}
		if got := resp.Header.Get("Retry-After"); got != "1" {
			t.Errorf("Retry-After = %q, want 1", got)
		}
		if !strings.Contains(e.Error.Message, "ledger cannot be reached") || strings.Contains(e.Error.Message, "127.0.0.1") {
			t.Errorf("message %q: want the reason, without the cause", e.Error.Message)
		}
	}
	if got := metrics.LedgerUnavailable(publish.DoorHTTP); got != 2 {
		t.Errorf("hookkeeper_api_ledger_unavailable_total{door=http} = %v, want 2", got)
	}
	if got := metrics.LedgerUnavailable(publish.DoorKube); got != 0 {
		t.Errorf("hookkeeper_api_ledger_unavailable_total{door=kube} = %v, want 0", got)
	}
}
