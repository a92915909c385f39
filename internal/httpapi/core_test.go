package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// TestHandlerPublishesThroughTheProcessCore: given the process's publish
// core (issue #45: built once in cmd for both doors), the handler publishes
// through it as door "http", whatever door the core was built for, and
// refuses publish settings of its own beside it: they would not count.
func TestHandlerPublishesThroughTheProcessCore(t *testing.T) {
	pub := newFakePublisher()
	pub.err = fmt.Errorf("insert: %w", ledger.ErrUnavailable)
	m := publish.NewMetrics(prometheus.NewRegistry())
	core, err := publish.New(publish.Config{Committer: pub, Metrics: m, Door: publish.DoorKube})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.Publisher, c.Now, c.Core = nil, nil, core })
	rec := e.do(t, req{body: validBody})
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503: %s", rec.Code, rec.Body)
	}
	if viaHTTP, kube := m.LedgerUnavailable(publish.DoorHTTP), m.LedgerUnavailable(publish.DoorKube); viaHTTP != 1 || kube != 0 {
		t.Errorf("counted http %v, kube %v; want 1 and 0", viaHTTP, kube)
	}

	for name, set := range map[string]func(*Config){
		"Publisher":      func(c *Config) { c.Publisher = pub },
		"MaxFanOut":      func(c *Config) { c.MaxFanOut = 3 },
		"SecretsHashKey": func(c *Config) { c.SecretsHashKey = []byte("k") },
		"PublishTimeout": func(c *Config) { c.PublishTimeout = 1 },
		"Contracts":      func(c *Config) { c.Contracts = noContracts{} },
	} {
		cfg := Config{Core: core, Reader: &fakeReader{}, Auth: StaticTokens{}}
		set(&cfg)
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Core with %s: %v; want a refusal naming it", name, err)
		}
	}
}

type noContracts struct{}

func (noContracts) Contract(string, string) (*publish.Contract, bool, error) { return nil, false, nil }
